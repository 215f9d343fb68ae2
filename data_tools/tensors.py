"""Sparse tensors: the paper's text folds (Alog, Enron) and synthetic low-rank tensors."""

import os
from typing import NamedTuple

import numpy as np
from scipy.special import ndtr

from fastcep import _validation as V

#: tensor shapes of the paper's data sets
PAPER_TENSORS = {"alog": (200, 100, 200), "enron": (203, 203, 200)}


class SparseTensor(NamedTuple):
    """Observed entries of a tensor: 0-based coords (n, K) int64, values (n,) float64, shape."""

    coords: np.ndarray
    values: np.ndarray
    shape: tuple


def read_text_tensor(path, index_base=1, delimiter=None, shape=None):
    """Read ``i,j,k,...,value`` lines (any delimiter: comma, tab or spaces; CRLF or LF).

    Parameters
    ----------
    path : str or path-like
    index_base : {0, 1}
        Base of the indices in the file; the result is always 0-based.
    delimiter : str or None
        None: commas, tabs or spaces.
    shape : sequence of int or None
        Tensor shape; None: one more than the largest index of each mode.

    Returns
    -------
    SparseTensor

    Raises
    ------
    ValueError
        On a malformed line (its line number is given), a negative index or an index beyond shape.
    """
    from fastcep.io import iter_text_rows

    if index_base not in (0, 1):
        raise V.param_error("index_base", "read_text_tensor", "0 or 1", index_base)
    rows = list(iter_text_rows(path, index_base, delimiter))
    if not rows:
        raise ValueError(f"{path}: no entries")
    coords = np.array([idx for _, idx, _ in rows], dtype=np.int64) - index_base  # (exact, not via float)
    values = np.array([val for _, _, val in rows], dtype=np.float64)
    if shape is None:
        shape = tuple(int(x) + 1 for x in coords.max(0))
    shape = tuple(int(x) for x in shape)
    over = np.nonzero((coords >= np.asarray(shape)[None, :]).any(1))[0]
    if over.size:
        raise ValueError(
            f"{path}: {over.size} row(s) have indices beyond shape {shape}, first data row {over[0] + 1}"
        )
    return SparseTensor(np.ascontiguousarray(coords), values, shape)


def load_paper_fold(name, fold, data_dir):
    """Train and test tensors of fold 1-5 of the paper's Alog or Enron data.

    Parameters
    ----------
    name : {"alog", "enron"}
    fold : int in 1..5
    data_dir : path of the folder holding ``train-fold-k.txt`` / ``test-fold-k.txt``, or of the
        data root holding that folder as ``<name>/`` (as ``../shared/data``)

    Returns
    -------
    (train, test) : SparseTensor, SparseTensor (0-based, shape of the paper's tensor)
    """
    V.check_choice(name, "name", "load_paper_fold", tuple(PAPER_TENSORS))
    fold = V.check_int(fold, "fold", "load_paper_fold", 1, 5)
    shape = PAPER_TENSORS[name]
    folder = os.fspath(data_dir)
    inside = os.path.join(folder, name)
    if not os.path.isfile(os.path.join(folder, f"train-fold-{fold}.txt")) and os.path.isdir(inside):
        folder = inside  # the data root
    out = []
    for part in ("train", "test"):
        path = os.path.join(folder, f"{part}-fold-{fold}.txt")
        if not os.path.isfile(path):
            raise FileNotFoundError(f"load_paper_fold({name!r}, {fold}): no file {path!r}")
        out.append(read_text_tensor(path, index_base=1, shape=shape))
    return tuple(out)


#: counts up to this are exact in Alog's files: their values log(1 + count) keep 5 significant
#: digits, a resolution of 1e-4 below 10, and the logs of neighbouring counts differ by more
#: (1 / (1 + count) > 1e-4)
ALOG_EXACT_COUNTS = 9999


def load_alog_counts(fold, data_dir):
    """Train and test tensors of Alog fold 1-5 as counts: round(expm1(value)) of the files' values
    log(1 + count) (issue 22). Counts up to ALOG_EXACT_COUNTS are exact; larger ones (up to about
    2.5e7) are known to within 5e-4 of their size (the files keep 5 significant digits).

    Returns
    -------
    (train, test) : SparseTensor, SparseTensor, values float64 integers >= 0
    """
    return tuple(
        SparseTensor(t.coords, np.round(np.expm1(t.values)), t.shape)
        for t in load_paper_fold("alog", fold, data_dir)
    )


def make_cp_tensor(shape, rank, n_obs, noise_sd=0.1, binary=False, seed=0, factor_scale=None):
    """A synthetic tensor of CP rank ``rank`` with known factors, observed at random entries.

    Factors U_k ~ N(0, factor_scale^2) (default scale makes Var f = 1), entries
    f = sum_r prod_k U_k[i_k, r]; values f + N(0, noise_sd^2), or binary y ~ Bernoulli(Phi(f)).
    Observed entries are distinct, drawn uniformly.

    Returns
    -------
    tensor : SparseTensor
    factors : list of (d_k, rank) arrays
    """
    func = "make_cp_tensor"
    shape = tuple(V.check_int(int(d), "shape", func, low=1) for d in shape)
    rank = V.check_int(rank, "rank", func, low=1)
    n_obs = V.check_int(n_obs, "n_obs", func, low=1, high=int(np.prod([float(d) for d in shape])))
    rng = V.check_seed(seed, func)
    K = len(shape)
    if factor_scale is None:
        factor_scale = rank ** (-0.5 / K)
    factors = [factor_scale * rng.standard_normal((d, rank)) for d in shape]
    total = int(np.prod([float(d) for d in shape]))
    if total <= 4 * n_obs:
        lin = rng.choice(total, size=n_obs, replace=False)
    else:
        lin = np.unique(rng.integers(0, total, size=int(n_obs * 1.2) + 10))
        while lin.size < n_obs:
            lin = np.unique(np.concatenate([lin, rng.integers(0, total, size=n_obs)]))
        lin = rng.permutation(lin)[:n_obs]
    coords = np.stack(np.unravel_index(np.sort(lin), shape), axis=1).astype(np.int64)
    f = np.ones((n_obs, rank))
    for k in range(K):
        f *= factors[k][coords[:, k]]
    f = f.sum(1)
    if binary:
        values = (rng.random(n_obs) < ndtr(f)).astype(np.float64)
    else:
        values = f + noise_sd * rng.standard_normal(n_obs)
    return SparseTensor(np.ascontiguousarray(coords), values, shape), factors
