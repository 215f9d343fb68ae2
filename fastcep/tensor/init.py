"""Initial posterior means of the CP embeddings.

A parallel CEP sweep from small random means is attracted to the all-zero solution: the first
messages see random "features" uncorrelated with the data, every mean shrinks by about
1/sqrt(entries per object), and with K >= 3 modes the products of small means leave the prior in
charge (measured: 1 seed in 2 collapses on a 30 x 25 x 20 rank-3 tensor). ``init="svd"`` starts
instead from the leading R left singular vectors of each mode's unfolding of the observed tensor
(missing entries as 0), scaled so that the initial reconstruction has the data's mean square.
"""

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
