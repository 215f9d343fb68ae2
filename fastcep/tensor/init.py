"""Initial posterior means of the CP embeddings.

A parallel CEP sweep from small random means is attracted to the all-zero solution: the first
messages see random "features" uncorrelated with the data, every mean shrinks by about
1/sqrt(entries per object), and with K >= 3 modes the products of small means leave the prior in
charge (measured: 1 seed in 2 collapses on a 30 x 25 x 20 rank-3 tensor). ``init="svd"`` starts
instead from the leading R left singular vectors of each mode's unfolding of the observed tensor
(missing entries as 0), scaled so that the initial reconstruction has the data's mean square.

``init="sketch"`` takes the singular vectors of a range sketch instead, Y_k = A_k Omega_k, with a
test matrix of signs that a hash of each column's indices draws (``sketch_signs``): every entry
adds to Y_k on its own, so the sketch is a map over fixed groups of entries and a reduce in group
order (``sketch_sums``, ``sketch_start``), which a cluster runs where the entries are (a tensor
file read on the workers, ``fastcep.cluster.cp``). The SVD's A_k A_k^T pairs entries of one column,
which a split of the entries would have to shuffle together.
"""

import math

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import svds

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
#: splitmix64's constants (Steele, Lea and Flood 2014): the hash that draws the sketch's signs
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1, _MIX2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


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
        U = _leading_left_vectors(A, R, rng)
        block = np.zeros((shape[k], R))
        block[:, : U.shape[1]] = U * np.sqrt(shape[k])
        block = s * (block + NOISE * rng.standard_normal(block.shape))
        blocks.append(init_scale * block)
    return np.concatenate(blocks)


def _mix(h):
    """splitmix64's finaliser of h + golden, elementwise (uint64 arrays wrap, as the hash means)."""
    h = h + _GOLDEN
    h = (h ^ (h >> np.uint64(30))) * _MIX1
    h = (h ^ (h >> np.uint64(27))) * _MIX2
    return h ^ (h >> np.uint64(31))


def sketch_signs(coords, k, width):
    """(m, width) of +1 and -1: the rows of mode k's test matrix Omega_k for the entries' columns
    of the mode-k unfolding (their indices in the other modes, hashed in mode order; the same
    column, the same row, wherever the entry is read)."""
    h = np.full(coords.shape[0], np.uint64(k + 1))
    for j in range(coords.shape[1]):
        if j != k:
            h = _mix(h ^ coords[:, j].astype(np.uint64))
    out = np.empty((coords.shape[0], width))
    for r in range(width):
        out[:, r] = np.where(_mix(h + np.uint64(r)) >> np.uint64(63), -1.0, 1.0)
    return out


def sketch_sums(coords, f, shape, width, group, V=None):
    """Per mode k, (G, shape[k], width): each group of ``group`` entries' (in order; the last may
    be shorter) sums of f_e times its row of mode k's test matrix, added at its mode-k index in
    entry order (the map of ``init="sketch"``). The test matrix: hashed signs (``sketch_signs``;
    exact products), or with ``V`` (per mode (shape[j], width)) the Khatri-Rao product of the
    other modes' V_j, an entry's row the product of its rows of V_j in mode order (a round of
    subspace iteration on the unfoldings, ``sketch_factors``)."""
    n = coords.shape[0]
    G = -(-n // group)
    out = [np.zeros((G, d, width)) for d in shape]
    for g in range(G):
        block = coords[g * group : (g + 1) * group]
        fg = f[g * group : (g + 1) * group]
        for k, d in enumerate(shape):
            if V is None:
                W = sketch_signs(block, k, width)
            else:
                W = np.ones((block.shape[0], width))
                for j in range(len(shape)):
                    if j != k:
                        W *= V[j][block[:, j]]
            for r in range(width):
                out[k][g, :, r] = np.bincount(block[:, k], weights=fg * W[:, r], minlength=d)
    return out


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
        block = np.zeros((shape[k], R))
        block[:, : U.shape[1]] = U * math.sqrt(shape[k])
        block = s * (block + NOISE * rng.standard_normal(block.shape))
        blocks.append(init_scale * block)
    return np.concatenate(blocks)
