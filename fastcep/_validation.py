"""Validation at the public boundary: one message form for every bad argument.

Every check raises ``ValueError`` (or ``TypeError`` for the wrong kind of object) with the
message "The 'name' parameter of func must be <what>. Got <value> instead." so that users never
see a numba traceback or a silent NaN.

The constraint classes (``Real``, ``Int``, ``Choice``, ``Bool``, ``Callable``, ``Seed``,
``Threads``, ``PathLike``, ``Maybe``, ``Either``, ``Required``, ``ScalarOr``, ``DataCheck``) say
what one option accepts: ``check(value, name, func)`` returns the checked value (through the
helpers below, so the messages are theirs) and ``describe()`` says it in a few words for the
docs. ``Spec``, ``Refused`` and ``Option`` are the rows of the option table
(``fastcep._options.OPTIONS``), which ``fastcep._options.validate`` checks.
"""

import numbers
import os
from typing import Any, NamedTuple

import numpy as np

from ._threads import max_threads


def _short(value):
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def param_error(name, func, what, value, exc=ValueError):
    """The one error form: "The 'name' parameter of func must be what. Got value instead."."""
    return exc(f"The {name!r} parameter of {func} must be {what}. Got {_short(value)} instead.")


def check_choice(value, name, func, choices):
    """``value`` must be one of ``choices`` (strings)."""
    if not isinstance(value, str) or value not in choices:
        what = "one of " + ", ".join(repr(c) for c in choices)
        raise param_error(name, func, what, value)
    return value


def check_float(value, name, func, low=None, high=None, low_open=False, high_open=False):
    """A finite real number within [low, high] (open ends where asked)."""
    bounds = []
    if low is not None:
        bounds.append(("> " if low_open else ">= ") + repr(low))
    if high is not None:
        bounds.append(("< " if high_open else "<= ") + repr(high))
    what = "a finite float" + (" " + " and ".join(bounds) if bounds else "")
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise param_error(name, func, what, value, TypeError)
    v = float(value)
    if not np.isfinite(v):
        raise param_error(name, func, what, value)
    if low is not None and (v < low or (low_open and v == low)):
        raise param_error(name, func, what, value)
    if high is not None and (v > high or (high_open and v == high)):
        raise param_error(name, func, what, value)
    return v


def check_int(value, name, func, low=None, high=None):
    """An integer within [low, high]."""
    bounds = []
    if low is not None:
        bounds.append(f">= {low}")
    if high is not None:
        bounds.append(f"<= {high}")
    what = "an int" + (" " + " and ".join(bounds) if bounds else "")
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise param_error(name, func, what, value, TypeError)
    v = int(value)
    if (low is not None and v < low) or (high is not None and v > high):
        raise param_error(name, func, what, value)
    return v


def prior_precisions(prior_var, d, func):
    """Prior precisions (d,) from a checked scalar ``prior_var`` or an array, checked here."""
    if np.ndim(prior_var) == 0:
        return np.full(d, 1.0 / prior_var)
    arr = np.asarray(prior_var, dtype=np.float64)
    if arr.shape != (d,) or not np.all(np.isfinite(arr)) or not np.all(arr > 0):
        raise param_error("prior_var", func, f"a float > 0 or an array of {d} floats > 0", prior_var)
    return 1.0 / arr


def check_seed(value, func):
    """``None``, an int >= 0 or a ``numpy.random.Generator``; returns a Generator."""
    return rng_from(Seed().check(value, "seed", func))


def check_matrix(X, name, func, n_cols=None):
    """A 2-D, non-empty, finite numeric array; returned C-contiguous float64 (no copy if it is)."""
    if hasattr(X, "tocsr") or hasattr(X, "toarray"):
        raise param_error(name, func, "a dense 2-D array (sparse input is not supported)", X, TypeError)
    try:
        arr = np.asarray(X)
    except Exception as exc:  # ragged lists and other unconvertible objects
        raise param_error(name, func, "a 2-D array of numbers", X, TypeError) from exc
    if arr.dtype.kind not in "biuf":
        raise param_error(name, func, "a 2-D array of real numbers", f"dtype {arr.dtype}", TypeError)
    if arr.ndim != 2:
        raise param_error(name, func, "a 2-D array (n_samples, n_features)", f"shape {arr.shape}")
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise param_error(name, func, "non-empty", f"shape {arr.shape}")
    if n_cols is not None and arr.shape[1] != n_cols:
        raise param_error(name, func, f"an array with {n_cols} columns", f"shape {arr.shape}")
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    rows = non_finite_rows(arr)
    if rows.size:
        raise ValueError(
            f"The {name!r} parameter of {func} must be finite (no NaN or inf). "
            f"Got non-finite values in {rows.size} row(s), first rows {rows[:5].tolist()}."
        )
    return arr


def is_sparse(X):
    """Whether X is a scipy.sparse matrix or array (of any format)."""
    try:
        import scipy.sparse as sp
    except ImportError:  # pragma: no cover - scipy is a dependency
        return False
    return sp.issparse(X)


def _index_array(a, what, name, func, length=None):
    """A sparse matrix's index array: 1-D integers (of ``length``, if given)."""
    a = np.asarray(a)
    if a.ndim != 1 or a.dtype.kind not in "iu":
        raise param_error(name, func, f"a sparse matrix whose {what} are a 1-D integer array", a.dtype)
    if length is not None and a.size != length:
        raise ValueError(
            f"The {name!r} parameter of {func} must be a sparse matrix whose {what} hold {length} "
            f"values. Got {a.size} instead (the matrix is corrupt)."
        )
    return a


def _compressed_structure(X, major, minor, name, func):
    """Check a CSR-like (indptr, indices, data) of ``major`` (rows, columns) and ``minor``
    (columns, rows) words: a non-decreasing indptr of major + 1 from 0 that ends within the
    indices and data, indices within [0, minor)."""
    (n_major, major_word), (n_minor, minor_word) = major, minor
    indptr = _index_array(X.indptr, "indptr", name, func, n_major + 1)
    indices = _index_array(X.indices, "indices", name, func)
    stored = min(indices.size, len(X.data))
    steps = np.diff(indptr)
    if indptr[0] != 0 or indptr[-1] > stored or (steps.size and steps.min() < 0):
        at = int(np.flatnonzero(steps < 0)[0]) if steps.size and steps.min() < 0 else None
        got = (
            f"indptr[0] = {int(indptr[0])}" if indptr[0] != 0
            else f"indptr decreasing at {major_word} {at}" if at is not None
            else f"indptr ending at {int(indptr[-1])} with {stored} stored values"
        )  # fmt: skip
        raise ValueError(
            f"The {name!r} parameter of {func} must be a sparse matrix whose indptr starts at 0, never "
            f"decreases and ends within its {stored} stored values. Got {got} instead (the matrix is "
            "corrupt)."
        )
    used = indices[: indptr[-1]]
    if used.size == 0 or (used.min() >= 0 and used.max() < n_minor):
        return
    bad = np.flatnonzero((used < 0) | (used >= n_minor))
    if bad.size:
        at = int(np.searchsorted(indptr, bad[0], side="right") - 1)
        more = f" (and {bad.size - 1} more out of range)" if bad.size > 1 else ""
        raise ValueError(
            f"The {name!r} parameter of {func} must be a sparse matrix whose {minor_word} indices lie in "
            f"[0, {n_minor}). Got {minor_word} index {int(used[bad[0]])} in {major_word} {at}{more} instead."
        )


def check_sparse_structure(X, name, func):
    """Check the index arrays of a scipy.sparse X against its shape before any compiled code reads
    them (scipy's conversions and sums do not, and crash on an index out of range): CSR, CSC,
    BSR and COO are checked in place, other formats are built by scipy's own checked code.
    Raises ValueError naming the row (column, for CSC) and the index."""
    if X.ndim != 2:
        raise param_error(name, func, "a 2-D sparse matrix (n_samples, n_features)", f"shape {X.shape}")
    n, d = X.shape
    fmt = X.format
    if fmt in ("csr", "csc"):
        rows, cols = (n, "row"), (d, "column")
        _compressed_structure(X, *((rows, cols) if fmt == "csr" else (cols, rows)), name, func)
    elif fmt == "bsr":
        r, c = X.blocksize
        if r < 1 or c < 1 or n % r or d % c or np.ndim(X.data) != 3:
            got = f"blocks {X.blocksize} of {X.shape}"
            raise param_error(name, func, "a BSR matrix of whole blocks", got)
        _compressed_structure(X, (n // r, "block row"), (d // c, "block column"), name, func)
    elif fmt == "coo":
        size = len(X.data)
        for idx, bound, word in ((X.row, n, "row"), (X.col, d, "column")):
            idx = _index_array(idx, f"{word} indices", name, func, size)
            bad = np.flatnonzero((idx < 0) | (idx >= bound))
            if bad.size:
                raise ValueError(
                    f"The {name!r} parameter of {func} must be a sparse matrix whose {word} indices lie in "
                    f"[0, {bound}). Got {word} index {int(idx[bad[0]])} at stored value {int(bad[0])} "
                    "instead."
                )


def check_sparse(X, name, func, n_cols=None):
    """A scipy.sparse matrix or array (CSR, CSC, COO, ...) of finite real numbers, 2-D and
    non-empty, returned as a new CSR array of float64: indices sorted within each row, duplicate
    entries summed (scipy's ``sum_duplicates``), explicit zeros dropped. X is never modified; its
    index arrays are checked against its shape first (``check_sparse_structure``)."""
    import scipy.sparse as sp

    if X.ndim != 2:
        raise param_error(name, func, "a 2-D sparse matrix (n_samples, n_features)", f"shape {X.shape}")
    if X.dtype.kind not in "biuf":
        raise param_error(name, func, "a sparse matrix of real numbers", f"dtype {X.dtype}", TypeError)
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise param_error(name, func, "non-empty", f"shape {X.shape}")
    if n_cols is not None and X.shape[1] != n_cols:
        raise param_error(name, func, f"a matrix with {n_cols} columns", f"shape {X.shape}")
    check_sparse_structure(X, name, func)
    A = sp.csr_array(X, dtype=np.float64, copy=True)
    if X.format != "csr":
        check_sparse_structure(A, name, func)  # (as scipy built it: a LIL, DOK or DIA matrix's too)
    A.prune()  # (stored values past indptr[-1] belong to no row)
    A.sum_duplicates()
    bad = np.flatnonzero(~np.isfinite(A.data))
    if bad.size:
        rows = np.unique(np.searchsorted(A.indptr, bad, side="right") - 1)
        raise ValueError(
            f"The {name!r} parameter of {func} must be finite (no NaN or inf). "
            f"Got non-finite values in {rows.size} row(s), first rows {rows[:5].tolist()}."
        )
    A.eliminate_zeros()
    return A


def check_rows(X, name, func, n_cols=None):
    """``check_matrix`` for dense X, ``check_sparse`` for a scipy.sparse X."""
    if is_sparse(X):
        return check_sparse(X, name, func, n_cols)
    return check_matrix(X, name, func, n_cols)


def non_finite_rows(arr, block_bytes=1 << 24):
    """Rows of a 2-D array holding NaN or inf, checked in blocks (no full-size temporary)."""
    step = max(1, block_bytes // max(1, arr.shape[1] * 8))
    bad = [
        lo + np.nonzero(~np.isfinite(arr[lo : lo + step]).all(1))[0] for lo in range(0, arr.shape[0], step)
    ]
    return np.concatenate(bad) if bad else np.empty(0, dtype=np.int64)


def label_classes(y, name, func):
    """For labels that are not numbers (strings, as scikit-learn's estimators take): the two
    classes, sorted, the second the positive one (as scikit-learn's ``classes_[-1]``); None for
    numeric or boolean labels."""
    try:
        arr = np.asarray(y)
    except Exception:
        return None  # (check_labels says what is wrong)
    if (
        arr.dtype.kind not in "USO"
        or arr.dtype.kind == "O"
        and all(isinstance(v, (int, float, bool, np.number, np.bool_)) for v in arr.ravel()[:1000])
    ):
        return None
    try:
        classes = np.unique(arr.astype(str))
    except (TypeError, ValueError) as exc:
        raise param_error(name, func, "binary labels of one type", y, TypeError) from exc
    if classes.size != 2:
        raise ValueError(
            f"The {name!r} parameter of {func} must hold exactly two classes when its labels are not "
            f"numbers (the second in sorted order is the positive one). Got {classes.size}: "
            f"{classes[:5].tolist()}."
        )
    return classes.tolist()


def check_labels(y, name, func, n, classes=None):
    """Binary labels as {0, 1}, {-1, 1} or bool, length n, or labels from ``classes`` (two
    strings, the second positive: ``label_classes``); returned as float64 signs +-1."""
    try:
        arr = np.asarray(y)
    except Exception as exc:
        raise param_error(name, func, "a 1-D array of binary labels", y, TypeError) from exc
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise param_error(name, func, "a 1-D array of binary labels", f"shape {arr.shape}")
    if arr.shape[0] != n:
        raise ValueError(
            f"The {name!r} parameter of {func} must have one label per row of X ({n}). "
            f"Got {arr.shape[0]} labels instead."
        )
    if arr.dtype == bool:
        return np.where(arr, 1.0, -1.0)
    if classes is not None and arr.dtype.kind in "USO":
        text = arr.astype(str)
        unknown = np.nonzero(~np.isin(text, classes))[0]
        if unknown.size:
            raise ValueError(
                f"The {name!r} parameter of {func} must hold the classes {classes}. Got "
                f"{np.unique(text[unknown])[:5].tolist()} at rows {unknown[:5].tolist()} instead."
            )
        return np.where(text == classes[1], 1.0, -1.0)
    if arr.dtype.kind not in "iuf":
        want = "binary labels in {0, 1}, {-1, 1}, bool or two classes of strings"
        raise param_error(name, func, want, f"dtype {arr.dtype}", TypeError)
    values = arr.astype(np.float64)
    if not np.all(np.isfinite(values)):
        rows = np.nonzero(~np.isfinite(values))[0]
        raise ValueError(
            f"The {name!r} parameter of {func} must be finite. Got NaN or inf at rows {rows[:5].tolist()}."
        )
    uniq = np.unique(values)
    if np.all(np.isin(uniq, (0.0, 1.0))):
        return np.where(values == 1.0, 1.0, -1.0)
    if np.all(np.isin(uniq, (-1.0, 1.0))):
        return np.where(values == 1.0, 1.0, -1.0)
    bad = np.nonzero(~np.isin(values, (0.0, 1.0, -1.0)))[0]
    if bad.size:
        detail = f"values {np.unique(values[bad])[:5].tolist()} at rows {bad[:5].tolist()}"
    else:
        detail = "a mix of 0, 1 and -1"
    raise ValueError(
        f"The {name!r} parameter of {func} must hold binary labels in {{0, 1}}, {{-1, 1}} or bool. "
        f"Got {detail} instead."
    )


def rng_from(seed):
    """The Generator of a checked seed (``Seed``): the Generator itself, fresh entropy for None,
    else ``default_rng(seed)``."""
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is None:
        return np.random.default_rng()
    return np.random.default_rng(int(seed))


# ----------------------------------------------------------------------------- constraints
def _number(x):
    return repr(float(x)) if isinstance(x, float) else repr(x)


class Constraint:
    """What one option accepts: ``check(value, name, func)`` returns the checked value or raises
    the one error form; ``describe()`` says what it accepts, for the docs."""

    def check(self, value, name, func):
        raise NotImplementedError

    def describe(self):
        raise NotImplementedError

    def __repr__(self):
        return f"{type(self).__name__}({self.describe()!r})"


class Real(Constraint):
    """A finite float within [low, high] (open ends where asked), returned as float."""

    def __init__(self, low=None, high=None, low_open=False, high_open=False):
        self.low, self.high, self.low_open, self.high_open = low, high, low_open, high_open

    def check(self, value, name, func):
        return check_float(value, name, func, self.low, self.high, self.low_open, self.high_open)

    def describe(self):
        lo, hi = self.low, self.high
        if lo is not None and hi is not None:
            return f"float in {'(' if self.low_open else '['}{lo:g}, {hi:g}{')' if self.high_open else ']'}"
        if lo is not None:
            return f"float {'>' if self.low_open else '>='} {lo:g}"
        if hi is not None:
            return f"float {'<' if self.high_open else '<='} {hi:g}"
        return "float"


class Int(Constraint):
    """An integer within [low, high], returned as int."""

    def __init__(self, low=None, high=None):
        self.low, self.high = low, high

    def check(self, value, name, func):
        return check_int(value, name, func, self.low, self.high)

    def describe(self):
        if self.low is not None and self.high is not None:
            return f"int in [{self.low}, {self.high}]"
        if self.low is not None:
            return f"int >= {self.low}"
        return "int" if self.high is None else f"int <= {self.high}"


class Choice(Constraint):
    """One of the given strings; ``what``, if given, replaces "one of ..." in the message.
    ``refused``: {value: why} for values a user may expect that are not among them (ValueError
    "func: name=value why")."""

    def __init__(self, *values, what=None, refused=None):
        self.values, self.what, self.refused = values, what, refused or {}

    def check(self, value, name, func):
        if isinstance(value, str) and value in self.refused:
            raise ValueError(f"{func}: {name}={value!r} {self.refused[value]}")
        if self.what is not None and (not isinstance(value, str) or value not in self.values):
            raise param_error(name, func, self.what, value)
        return check_choice(value, name, func, self.values)

    def describe(self):
        return "{" + ", ".join(repr(v) for v in self.values) + "}"


class Bool(Constraint):
    """True or False (a numpy bool, 0 or 1 too), returned as bool."""

    def check(self, value, name, func):
        if isinstance(value, (bool, np.bool_)) or (isinstance(value, numbers.Integral) and value in (0, 1)):
            return bool(value)
        raise param_error(name, func, "a bool", value, TypeError)

    def describe(self):
        return "bool"


class Callable(Constraint):
    """A callable or None."""

    def check(self, value, name, func):
        if value is not None and not callable(value):
            raise param_error(name, func, "a callable or None", value, TypeError)
        return value

    def describe(self):
        return "callable or None"


class Client(Constraint):
    """A ``distributed.Client`` or None (``fastcep.cluster``); ``unsupported``: why this family
    does not run on a cluster yet (any value but None is then refused with it)."""

    def __init__(self, unsupported=None):
        self.unsupported = unsupported

    def check(self, value, name, func):
        if value is None:
            return None
        if self.unsupported:
            raise NotImplementedError(f"{func}({name}=...): {self.unsupported}")
        from .cluster import check_client

        return check_client(value, func)

    def describe(self):
        return "distributed.Client or None"


class Seed(Constraint):
    """An int >= 0, a ``numpy.random.Generator`` or None (fresh entropy); returned as given
    (``rng_from`` makes the Generator)."""

    def check(self, value, name, func):
        if value is None or isinstance(value, np.random.Generator):
            return value
        check_int(value, name, func, 0)
        return value

    def describe(self):
        return "int >= 0, Generator or None"


class Threads(Constraint):
    """None (numba's current setting) or 1..NUMBA_NUM_THREADS."""

    def check(self, value, name, func):
        return None if value is None else check_int(value, name, func, 1, max_threads())

    def describe(self):
        return "int in [1, NUMBA_NUM_THREADS] or None"


class PathLike(Constraint):
    """A file path: str or os.PathLike."""

    def check(self, value, name, func):
        if not isinstance(value, (str, os.PathLike)):
            raise param_error(name, func, "a path (str or os.PathLike)", value, TypeError)
        return value

    def describe(self):
        return "path"


class Maybe(Constraint):
    """None, or what ``inner`` accepts."""

    def __init__(self, inner):
        self.inner = inner

    def check(self, value, name, func):
        return None if value is None else self.inner.check(value, name, func)

    def describe(self):
        return f"{self.inner.describe()} or None"


class Either(Constraint):
    """A string that ``choice`` accepts, or what ``other`` accepts (every non-string value goes to
    ``other``); a bad string gets the message "must be <what>"."""

    def __init__(self, choice, other, what):
        self.choice, self.other, self.what = choice, other, what

    def check(self, value, name, func):
        if isinstance(value, str):
            if value in self.choice.values:
                return value
            raise param_error(name, func, self.what, value)
        return self.other.check(value, name, func)

    def describe(self):
        return f"{self.other.describe()} or " + " or ".join(repr(v) for v in self.choice.values)


class Required(Constraint):
    """What ``inner`` accepts; None (the signature's placeholder) raises TypeError "must be
    <what>"."""

    def __init__(self, inner, what):
        self.inner, self.what = inner, what

    def check(self, value, name, func):
        if value is None:
            raise param_error(name, func, self.what, value, TypeError)
        return self.inner.check(value, name, func)

    def describe(self):
        return self.inner.describe()


class ScalarOr(Constraint):
    """A scalar that ``scalar`` accepts, or an array checked against the data by the entry point
    (``what`` describes it)."""

    def __init__(self, scalar, what):
        self.scalar, self.what = scalar, what

    def check(self, value, name, func):
        return self.scalar.check(value, name, func) if np.ndim(value) == 0 else value

    def describe(self):
        return f"{self.scalar.describe()} or {self.what}"


class DataCheck(Constraint):
    """A value checked against the data by the entry point (its shape, its objects): passed on
    unchanged here."""

    def __init__(self, what):
        self.what = what

    def check(self, value, name, func):
        return value

    def describe(self):
        return self.what


# ------------------------------------------------------------------------- the table's rows
#: the default of an option without one (a required argument)
REQUIRED = object()


class ByModel(dict):
    """Per-model values (``Spec.none``): what None stands for, model by model."""


class Spec(NamedTuple):
    """An option's constraint and default in one family (or one method of it).

    ``methods``: the family's methods it applies to (None: all). ``none``: what None stands for
    (a value, or ``ByModel`` values), for options whose default depends on the model. ``note``:
    what differs in this family, for the docs.
    """

    constraint: Constraint
    default: Any = REQUIRED
    note: str = ""
    methods: tuple | None = None
    none: Any = None


class Refused(NamedTuple):
    """An option that does not apply to a method: any value but None raises the method's refusal
    (``fastcep._options.REFUSALS``) with ``reason``; ``value`` is what the entry point gets."""

    reason: str
    value: Any = None


class Option(NamedTuple):
    """One option of ``fastcep.fit`` and ``fastcep.stream``: its name, one-line doc and its
    specs, keyed "family" or "family/method" (the latter first)."""

    name: str
    doc: str
    specs: dict


def cluster_module(cluster, func):
    """The ``fastcep.cluster`` module that runs a call with ``client=``: an engine's entry point
    is given it by ``fastcep.fit`` or ``fastcep.stream`` (``fastcep.api``), so that no engine
    imports the cluster code that builds on it."""
    if cluster is None:
        raise ValueError(
            f"{func}: client= runs through fastcep.fit and fastcep.stream (they pass the cluster's module)."
        )
    return cluster
