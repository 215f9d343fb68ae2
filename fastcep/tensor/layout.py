"""Layout of a sparse tensor's observed entries: checked coordinates and values, the global
object numbering of every mode and the CSR grouping of entries by object."""

import hashlib
import math
import numbers
import os
from typing import NamedTuple

import numpy as np

from .. import _validation as V
from ..metrics import power_of_two_at_or_below
from . import likelihoods


class Layout(NamedTuple):
    """Global object numbering and CSR grouping of entries by object."""

    shape: tuple
    offsets: np.ndarray  #: (K + 1,) first global object of each mode
    gidx: np.ndarray  #: (n, K) global object of each entry in each mode
    obj_mode: np.ndarray  #: (n_obj,) mode of each object
    ptr: np.ndarray  #: (n_obj + 1,) CSR pointers
    ent: np.ndarray  #: (n K,) entry ids grouped by object, in entry order


#: the bounds of the rank a fit chooses when none is given (``default_rank``)
DEFAULT_RANK_MIN, DEFAULT_RANK_MAX = 3, 20


def default_rank(shape, n):
    """A generous rank for ``n`` observed entries of a tensor of ``shape``: about one embedding
    number per two entries over all objects, n // (2 (d_1 + ... + d_K)), between
    DEFAULT_RANK_MIN and DEFAULT_RANK_MAX. The learned prior prunes the columns the data do not
    carry; on Alog (21,076 entries, 500 objects: 20) it kept 9-15 and reached RMSE 0.782 over
    five folds, against 0.834 at rank 8 (BENCHMARKS.md)."""
    return int(min(DEFAULT_RANK_MAX, max(DEFAULT_RANK_MIN, int(n) // (2 * int(np.sum(shape))))))


def make_layout(coords, shape):
    n, Kmodes = coords.shape
    offsets = np.zeros(Kmodes + 1, dtype=np.int64)
    offsets[1:] = np.cumsum(shape)
    gidx = np.ascontiguousarray(coords + offsets[:-1][None, :])
    n_obj = int(offsets[-1])
    obj_mode = np.repeat(np.arange(Kmodes, dtype=np.int64), shape)
    flat = gidx.T.ravel()  # mode-major: stable sort keeps entry order within an object
    order = np.argsort(flat, kind="stable")
    ent = np.ascontiguousarray(np.tile(np.arange(n, dtype=np.int64), Kmodes)[order])
    counts = np.bincount(flat, minlength=n_obj)
    ptr = np.zeros(n_obj + 1, dtype=np.int64)
    ptr[1:] = np.cumsum(counts)
    return Layout(tuple(int(d) for d in shape), offsets, gidx, obj_mode, ptr, ent)


def check_coords(coords, shape, func, name="coords"):
    """0-based integer coordinates (n, K), K >= 2, within ``shape`` (inferred if None)."""
    if V.is_sparse(coords):  # (a tensor's entries are listed by their coordinates: dense (n, K))
        want = "a dense 2-D integer array (n, K) of the entries' coordinates, not a sparse matrix"
        raise V.param_error(name, func, want, type(coords).__name__, TypeError)
    try:
        arr = np.asarray(coords)
    except Exception as exc:
        raise V.param_error(name, func, "a 2-D integer array (n, K)", coords, TypeError) from exc
    if arr.ndim != 2 or arr.shape[1] < 2:
        raise V.param_error(name, func, "a 2-D integer array (n, K) with K >= 2 modes", f"shape {arr.shape}")
    if arr.shape[0] == 0:
        raise V.param_error(
            name, func, "non-empty (the tensor has no observed entries)", f"shape {arr.shape}"
        )
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)):
            bad = np.nonzero(~(np.isfinite(arr) & (arr == np.round(arr))).all(1))[0]
            raise ValueError(
                f"The {name!r} parameter of {func} must hold integer indices. "
                f"Got non-integer values at rows {bad[:5].tolist()}."
            )
        arr = arr.astype(np.int64)
    elif arr.dtype.kind not in "iu":
        raise V.param_error(name, func, "an integer array", f"dtype {arr.dtype}", TypeError)
    arr = np.ascontiguousarray(arr, dtype=np.int64)
    Kmodes = arr.shape[1]
    if shape is None:
        shape = tuple(int(x) + 1 for x in arr.max(0))
    else:
        try:
            dims = list(shape)
        except TypeError as exc:
            raise V.param_error(
                "shape", func, f"a sequence of {Kmodes} positive ints", shape, TypeError
            ) from exc
        if not all(isinstance(d, numbers.Integral) and not isinstance(d, (bool, np.bool_)) for d in dims):
            # (a size of 8.5 was truncated to 8)
            raise V.param_error("shape", func, f"a sequence of {Kmodes} positive ints", shape, TypeError)
        shape = tuple(int(d) for d in dims)
        if len(shape) != Kmodes:
            raise ValueError(
                f"The {name!r} parameter of {func} must have {len(shape)} columns, one per mode of the "
                f"tensor of shape {shape}. Got {Kmodes} columns instead."
            )
        if min(shape) < 1:
            raise V.param_error("shape", func, f"{Kmodes} positive ints (one per column of {name})", shape)
    neg = np.nonzero((arr < 0).any(1))[0]
    if neg.size:
        raise ValueError(
            f"The {name!r} parameter of {func} must be 0-based indices >= 0. "
            f"Got negative indices in {neg.size} row(s), first rows {neg[:5].tolist()}."
        )
    over = np.nonzero((arr >= np.asarray(shape)[None, :]).any(1))[0]
    if over.size:
        r = int(over[0])
        raise ValueError(
            f"The {name!r} parameter of {func} has indices beyond shape {shape} in {over.size} row(s), "
            f"first rows {over[:5].tolist()} (row {r}: {arr[r].tolist()})."
        )
    return arr, shape


def check_values(values, n, likelihood, func, name="values"):
    """Finite values of length n; binary (returned as +-1) for cp_probit and the other binary
    likelihoods, those the likelihood's ``check`` accepts for the others (None: real numbers):
    ``fastcep.tensor.likelihoods.check_values``."""
    return likelihoods.check_values(values, n, likelihood, func, name)


def standardization(blocks, model, standardize):
    """(center, scale) of cp_gaussian values from the values in ``blocks`` (arrays, merged by
    Chan's pairwise update): ``standardize="scale"``: (0, sqrt(mean(y^2))); "center": (mean, sd);
    a scale of 0 becomes 1 (values all 0, or constant). (0, 1), no change, for cp_probit or
    "none"."""
    if model != "cp_gaussian" or standardize == "none":
        return 0.0, 1.0
    return scale_of(value_moments(blocks), standardize)


def value_moments(blocks, moments=(0, 0.0, 0.0, None)):
    """The moments (n, mean, m2, unit) of the values in ``blocks`` merged into ``moments`` (of
    y / unit: sum of squared deviations m2; unit 1 or the power of 2 that keeps extreme values
    finite, ``_unit``): a block's own, or those of other blocks (a cluster stream's shards)."""
    for values in blocks:
        if len(values):
            block_unit = _unit(values)
            scaled = values / block_unit if block_unit != 1.0 else values  # (a power of 2: exact)
            bm = float(np.mean(scaled))
            moments = merge_moments(moments, (len(values), bm, float(np.sum((scaled - bm) ** 2)), block_unit))
    return moments


def merge_moments(a, b):
    """Two sets of moments (n, mean, m2, unit) as one, in the larger unit (Chan's update)."""
    (n, mean, m2, unit), (k, bm, bm2, block_unit) = a, b
    if k == 0:
        return a
    if unit is None or block_unit > unit:  # (the moments so far in the larger unit)
        f = 1.0 if unit is None else unit / block_unit
        mean, m2, unit = mean * f, m2 * f * f, block_unit
    elif block_unit < unit:
        f = block_unit / unit
        bm, bm2 = bm * f, bm2 * f * f
    delta = bm - mean
    mean += delta * k / (n + k)
    m2 += bm2 + delta * delta * n * k / (n + k)
    return n + k, mean, m2, unit


def scale_of(moments, standardize):
    """(center, scale) from the values' ``moments`` (``value_moments``) for ``standardize``
    "scale" or "center" (``standardization``)."""
    n, mean, m2, unit = moments
    if standardize == "scale":  # mean(y^2) = var + mean^2
        mean, m2 = 0.0, m2 + n * mean * mean
    sd = math.sqrt(m2 / n) if n else 0.0
    if unit is not None and unit != 1.0:
        mean, sd = mean * unit, sd * unit
    return mean, (sd if sd > 0 and math.isfinite(sd) else 1.0)


#: values whose largest size lies outside [1 / UNIT_RANGE, UNIT_RANGE] are measured in a power of
#: 2 near that size: their squares overflowed (x 1e200: a scale of inf, taken as 1, and a
#: LinAlgError) or underflowed (x 1e-200: a scale of 0, taken as 1, and every prediction 0;
#: issue 38, item 13). Values inside it are measured as they are, bit for bit as before
UNIT_RANGE = 2.0**400


def _unit(values):
    """1.0, or for values of extreme size the power of 2 at or below their largest |y|."""
    top = float(np.max(np.abs(values)))
    if top == 0.0 or 1.0 / UNIT_RANGE <= top <= UNIT_RANGE:
        return 1.0
    return power_of_two_at_or_below(top)


def standardized(y, model, standardize):
    """``(values the engines fit, center, scale)``: cp_gaussian's (y - center) / scale
    (``standardization``); y itself otherwise."""
    center, scale = standardization([y], model, standardize)
    if scale != 1.0 or center != 0.0:
        y = (y - center) / scale  # (the fit sees values of size 1; the result carries the transform)
    return y, center, scale


def check_eval_set(eval_set, shape, likelihood, func):
    """A test pair ``(coords, values)`` checked like the training data (by the fit's
    likelihood); returns the two arrays."""
    if not (isinstance(eval_set, (tuple, list)) and len(eval_set) == 2):
        raise V.param_error("eval_set", func, "a pair (coords, values) or None", eval_set, TypeError)
    ev_coords, _ = check_coords(eval_set[0], shape, func, "eval_set[0]")
    return ev_coords, check_values(eval_set[1], len(ev_coords), likelihood, func, "eval_set[1]")


#: bytes per number of the arrays a fit holds, times this, is its estimate (scratch, copies)
MEMORY_MARGIN = 1.5


def estimate_bytes(n, shape, R, covariance="full", message_copies=1):
    """About the bytes a CP fit of ``n`` entries over ``shape`` at rank ``R`` holds: per entry and
    mode a message (R x R precision and R-vector, or two R-vectors with ``covariance="diag"``),
    ``message_copies`` times (2 for the guard of messages of negative precision, which keeps
    those of before each sweep); per object about eight posterior, prior and partial-sum arrays
    of the same size; the layout's index arrays; times MEMORY_MARGIN."""
    per = R * R + R if covariance == "full" else 2 * R
    n_obj = float(np.sum(np.asarray(shape, dtype=np.float64)))
    K = len(shape)
    return MEMORY_MARGIN * 8.0 * (n * K * per * message_copies + 8 * n_obj * per + 3 * n * K + n_obj)


def available_bytes():
    """The memory this process may still take: the system's available memory (Linux:
    MemAvailable), under the address-space limit if one is set; None if unknown."""
    avail = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    avail = int(line.split()[1]) * 1024
    except (OSError, ValueError):
        try:
            avail = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, AttributeError):
            avail = None
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft != resource.RLIM_INFINITY:
            avail = soft if avail is None else min(avail, soft)
    except (ImportError, OSError, ValueError):
        pass
    return avail


def check_memory(n, shape, R, covariance, func, what="the fit", message_copies=1):
    """Refuse, before allocating, a fit whose estimate (``estimate_bytes``) exceeds the available
    memory, with the estimate and what to change."""
    need = estimate_bytes(n, shape, R, covariance, message_copies)
    have = available_bytes()
    if have is not None and need > have:
        n_obj = int(np.sum(np.asarray(shape, dtype=np.float64)))
        also = ", or stream the tensor (fastcep.stream)" if what == "the fit" else ""
        raise MemoryError(
            f"{func}: {what} needs about {need / 2**30:.1f} GiB ({n} entries, {n_obj} objects over "
            f"shape {tuple(int(d) for d in shape)}, rank {R}, covariance {covariance!r}) and "
            f"{have / 2**30:.1f} GiB are available: lower the rank, use covariance='diag' or check "
            f"the shape{also}."
        )
    return need


def entries_digest(shape, blocks):
    """SHA-256 (hex) of a tensor's contents: its shape and every entry in order (coords as int64,
    values as float64), however ``blocks`` ((coords, values) pairs) cut them."""
    hc, hv = hashlib.sha256(), hashlib.sha256()
    for coords, values in blocks:
        hc.update(np.ascontiguousarray(coords, dtype=np.int64).tobytes())
        hv.update(np.ascontiguousarray(values, dtype=np.float64).tobytes())
    return hashlib.sha256(np.asarray(shape, dtype=np.int64).tobytes() + hc.digest() + hv.digest()).hexdigest()
