"""Initial posterior means of the CP embeddings.

A parallel CEP sweep from small random means is attracted to the all-zero solution: the first
messages see random "features" uncorrelated with the data, every mean shrinks by about
1/sqrt(entries per object), and with K >= 3 modes the products of small means leave the prior in
charge (measured: 1 seed in 2 collapses on a 30 x 25 x 20 rank-3 tensor). ``init="svd"`` starts
instead from the leading R left singular vectors of each mode's unfolding of the observed tensor
(missing entries as 0), scaled so that the initial reconstruction has the data's mean square.

``init="sketch"`` takes the singular vectors of a range sketch instead, Y_k = A_k Omega_k, with a
test matrix of signs that a hash of each column's indices draws: every entry
adds to Y_k on its own, so the sketch is a map over fixed groups of entries and a reduce in group
order (``sketch_sums``, ``sketch_init``), which a cluster runs where the entries are (a tensor
file read on the workers, ``fastcep.cluster.cp``). The SVD's A_k A_k^T pairs entries of one column,
which a split of the entries would have to shuffle together.
"""

import math

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import svds

from ..kernels import tensor as K

#: the noise added to the scaled singular vectors, relative to their size: it decides which of
#: Alog's fixed points a seed reaches (0 starts every seed at one point, and a worse one; 1.0 is
#: worse again: BENCHMARKS.md, "The start's noise and the seeds")
NOISE = 0.1
#: an unfolding wider than this keeps only its columns that hold entries: a sparse solver's
#: products with A^T are dense vectors of the unfolding's width, and a (1e5)^3 tensor's 1e10
#: columns asked for 74.5 GiB (issue 38, item 14). All-zero columns change no left singular
#: vector; narrower unfoldings (DBLP's 2e6 columns) are built as before, bit for bit
MAX_DENSE_COLUMNS = 1 << 26
#: columns of the range sketch beyond the rank (``init="sketch"``; Halko, Martinsson and Tropp's
#: usual oversampling)
SKETCH_OVERSAMPLING = 10
#: rounds of subspace iteration after the hashed sketch (``sketch_init``), each a pass over the
#: entries: on Alog's five folds the sketch start's test RMSE (ranks 3 and 8) was 0.955 and 0.855
#: after 0 rounds, 0.920 and 0.848 after 3, 0.897 and 0.836 after 8, the SVD start's 0.894 and
#: 0.838 (``python -m bench.cp_sketch_start --rounds R``; BENCHMARKS.md)
SKETCH_ROUNDS = 8


def _leading_left_vectors(A, R, rng):
    """Up to R leading left singular vectors of the sparse matrix A (d, m), d x min(R, d)."""
    d = A.shape[0]
    if d <= 2000 or R >= d - 1:
        G = (A @ A.T).toarray()
        w, V = np.linalg.eigh(G)
        return V[:, ::-1][:, : min(R, d)]
    v0 = rng.standard_normal(min(A.shape))
    U, s, _ = svds(A, k=R, v0=v0)
    return U[:, np.argsort(s)[::-1]]


def svd_init(coords, values, shape, R, init_scale, rng):
    """Initial means (n_obj, R): per mode, scaled leading singular vectors plus a little noise."""
    K = len(shape)
    target = float(np.mean(values**2)) or 1.0
    # entries of a unit vector are ~ 1/sqrt(d): scale so that sum_r prod_k u_kr has mean square target
    s = (target / R) ** (1.0 / (2 * K))
    blocks = []
    for k in range(K):
        others = [j for j in range(K) if j != k]
        cols = np.ravel_multi_index(tuple(coords[:, j] for j in others), tuple(shape[j] for j in others))
        width = int(np.prod([shape[j] for j in others], dtype=np.float64))
        if width > MAX_DENSE_COLUMNS:  # (only the columns that hold entries: the same left vectors)
            cols = np.unique(cols, return_inverse=True)[1].reshape(-1)
            width = int(cols.max()) + 1
        A = sp.csr_matrix((values, (coords[:, k], cols)), shape=(shape[k], width))
        blocks.append(_scaled(_leading_left_vectors(A, R, rng), shape[k], R, s, init_scale, rng))
    return np.concatenate(blocks)


def _scaled(U, d, R, s, init_scale, rng):
    """A mode's initial means (d, R): its (up to R) unit singular vectors U times sqrt(d), plus
    NOISE of their size (seeded), times the scale s of the data and init_scale."""
    block = np.zeros((d, R))
    block[:, : U.shape[1]] = U * np.sqrt(d)
    block = s * (block + NOISE * rng.standard_normal(block.shape))
    return init_scale * block


def sketch_sums(coords, f, shape, width, group, V=None):
    """Per mode k, (G, shape[k], width): each group of ``group`` entries' (in order; the last may
    be shorter) sums of f_e times its row of mode k's test matrix, added at its mode-k index in
    entry order (the map of ``init="sketch"``, ``kernels.tensor.sketch_groups``). The test
    matrix: signs drawn by a hash of each column's indices (the same column, the same row,
    wherever the entry is read; exact products), or with ``V`` (per mode (shape[j], width)) the
    Khatri-Rao product of the other modes' V_j, an entry's row the product of its rows of V_j in
    mode order (a round of subspace iteration on the unfoldings, ``sketch_factors``)."""
    offsets = np.zeros(len(shape) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum(shape)
    out = np.empty((-(-coords.shape[0] // group), int(offsets[-1]), width))
    factors = np.empty((0, width)) if V is None else np.ascontiguousarray(np.concatenate(V))
    K.sketch_groups(
        np.ascontiguousarray(coords, dtype=np.int64), np.ascontiguousarray(f, dtype=np.float64), offsets,
        group, factors, V is None, out,
    )  # fmt: skip
    return [out[:, offsets[k] : offsets[k + 1]] for k in range(len(shape))]


def _added(sums):
    """A mode's sketch: its groups' sums (G, d, width) added in group order."""
    Y = sums[0].copy()
    for g in range(1, sums.shape[0]):
        Y += sums[g]
    return Y


def sketch_factors(sums, shape):
    """The test factors of the next round of ``sketch_sums``: per mode an orthonormal basis of its
    sketch (QR), times sqrt(d_k) (entries of size about 1), zero-padded to the sketch's width."""
    V = []
    for k, d in enumerate(shape):
        Y = _added(sums[k])
        Q = np.linalg.qr(Y, mode="reduced")[0]
        out = np.zeros_like(Y)
        out[:, : Q.shape[1]] = Q * math.sqrt(d)
        V.append(out)
    return V


def sketch_init(sums_of, total_sq, n, shape, R, init_scale, rng, rounds):
    """Initial means (n_obj, R) of ``init="sketch"``: the hashed sketch, ``rounds`` rounds of
    subspace iteration, then per mode the leading R left singular vectors of its sketch, scaled
    and noised as ``svd_init``'s (the mean square ``total_sq / n`` of f, exact). ``sums_of(V)``
    runs the map (``sketch_sums`` over every group, in order; V None for the signs) where the
    entries are."""
    sums = sums_of(None)
    for _ in range(rounds):
        sums = sums_of(sketch_factors(sums, shape))
    K = len(shape)
    target = total_sq / n if total_sq > 0.0 else 1.0
    s = (target / R) ** (1.0 / (2 * K))
    blocks = []
    for k in range(K):
        U = np.linalg.svd(_added(sums[k]), full_matrices=False)[0][:, : min(R, shape[k])]
        blocks.append(_scaled(U, shape[k], R, s, init_scale, rng))
    return np.concatenate(blocks)
