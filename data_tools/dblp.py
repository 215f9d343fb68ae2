"""DBLP (author x venue x keyword, 10,000 x 200 x 10,000, binary) for streaming decomposition.

The papers (POST, Du et al. 2018; CEP, Wang & Zhe 2019) train on the 155,185 training nonzeros
plus as many zero entries sampled uniformly from the entries that are in no nonzero list and no
test set, stream them in shuffled batches at rank 8, and report the AUC averaged over 50 test
sets of 200 ones and 1,800 zeros (``../shared/data/dblp/SOURCE.md``). The sampled zeros of the
papers are not public: ``build_dblp_training`` draws them again with a fixed seed.
"""

import os
import pathlib

import numpy as np

from fastcep import _validation as V

DBLP_SHAPE = (10000, 200, 10000)


def _load_mat(data_dir):
    from scipy.io import loadmat

    path = pathlib.Path(data_dir) / "dblp.mat"
    if not path.is_file():
        raise FileNotFoundError(f"DBLP: no file {str(path)!r} (see ../shared/data/dblp/SOURCE.md)")
    return loadmat(path)["data"][0, 0]


def load_dblp(data_dir):
    """The DBLP lists as 0-based int64 arrays.

    Returns
    -------
    dict with ``shape`` (3-tuple), ``train_nonzeros`` (155185, 3), ``test_nonzeros`` (38797, 3),
    ``test_sets``: list of 50 pairs (coords (2000, 3), labels (2000,) in {0, 1}).
    """
    d = _load_mat(data_dir)
    shape = tuple(int(v) for v in np.ravel(d["size"]))
    tests = []
    for t in d["test"][0]:
        tests.append(
            (
                np.asarray(t["subs"][0, 0], dtype=np.int64) - 1,
                np.asarray(t["Ymiss"][0, 0], dtype=np.float64).ravel(),
            )
        )
    return {
        "shape": shape,
        "train_nonzeros": np.asarray(d["nzind"], dtype=np.int64) - 1,
        "test_nonzeros": np.asarray(d["test_ind_all"], dtype=np.int64) - 1,
        "test_sets": tests,
    }


def _linear(coords, shape):
    return np.ravel_multi_index(tuple(coords.T), shape)


def dblp_training_set(data_dir, seed=0):
    """Training entries of the papers' protocol: the nonzeros and as many sampled zeros, shuffled.

    Zeros are drawn uniformly (seeded) among the entries in none of the training nonzeros, the
    held-out nonzeros and the 50 test sets, without repetition. Returns (coords (n, 3) int64,
    values (n,) float64 in {0, 1}, shape), rows in a seeded random order.
    """
    rng = V.check_seed(seed, "dblp_training_set")
    data = load_dblp(data_dir)
    shape = data["shape"]
    ones = data["train_nonzeros"]
    forbidden = [_linear(ones, shape), _linear(data["test_nonzeros"], shape)]
    forbidden += [_linear(c, shape) for c, _ in data["test_sets"]]
    forbidden = np.unique(np.concatenate(forbidden))
    total = int(np.prod([float(s) for s in shape]))
    zeros = np.zeros(0, dtype=np.int64)
    while zeros.size < len(ones):
        draw = rng.integers(0, total, size=2 * len(ones))
        draw = draw[~np.isin(draw, forbidden)]
        zeros = np.concatenate([zeros, draw])
        _, first = np.unique(zeros, return_index=True)
        zeros = zeros[np.sort(first)]  # keep the draw order: the result depends only on the seed
    zeros = zeros[: len(ones)]
    coords = np.concatenate([ones, np.stack(np.unravel_index(zeros, shape), axis=1)])
    values = np.concatenate([np.ones(len(ones)), np.zeros(len(ones))])
    order = rng.permutation(len(values))
    return np.ascontiguousarray(coords[order]), values[order], shape


def build_dblp_training(data_dir, out_path, seed=0):
    """Write ``dblp_training_set(data_dir, seed)`` to an HDF5 tensor file; returns its row count."""
    from fastcep.io import write_tensor

    coords, values, shape = dblp_training_set(data_dir, seed)
    write_tensor(os.fspath(out_path), coords, values, shape=shape, binary=True)
    return len(values)


def dblp_test_auc(result, data_dir=None, test_sets=None):
    """Mean and standard deviation of the AUC of a fitted binary model over the 50 DBLP test sets."""
    if test_sets is None:
        test_sets = load_dblp(data_dir)["test_sets"]
    aucs = np.array([result.auc(c, y) for c, y in test_sets])
    return float(aucs.mean()), float(aucs.std(ddof=1)), aucs
