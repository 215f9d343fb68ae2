"""Validation at the public boundary: one message form for every bad argument.

Every check raises ``ValueError`` (or ``TypeError`` for the wrong kind of object) with the
message "The 'name' parameter of func must be <what>. Got <value> instead." so that users never
see a numba traceback or a silent NaN.
"""

import numbers

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


def check_n_threads(value, func):
    """``None`` (numba's current setting) or 1..NUMBA_NUM_THREADS."""
    if value is None:
        return None
    return check_int(value, "n_threads", func, 1, max_threads())


def check_seed(value, func):
    """``None``, an int >= 0 or a ``numpy.random.Generator``; returns a Generator."""
    if isinstance(value, np.random.Generator):
        return value
    if value is None:
        return np.random.default_rng()
    return np.random.default_rng(check_int(value, "seed", func, 0))


def check_callback(value, func):
    """``None`` or a callable."""
    if value is not None and not callable(value):
        raise param_error("callback", func, "a callable or None", value, TypeError)
    return value


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


def non_finite_rows(arr, block_bytes=1 << 24):
    """Rows of a 2-D array holding NaN or inf, checked in blocks (no full-size temporary)."""
    step = max(1, block_bytes // max(1, arr.shape[1] * 8))
    bad = [
        lo + np.nonzero(~np.isfinite(arr[lo : lo + step]).all(1))[0] for lo in range(0, arr.shape[0], step)
    ]
    return np.concatenate(bad) if bad else np.empty(0, dtype=np.int64)


def check_labels(y, name, func, n):
    """Binary labels as {0, 1}, {-1, 1} or bool, length n; returned as float64 signs +-1."""
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
    if arr.dtype.kind not in "iuf":
        raise param_error(
            name, func, "binary labels in {0, 1}, {-1, 1} or bool", f"dtype {arr.dtype}", TypeError
        )
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
