"""Small dense linear algebra for R x R blocks (R is a tensor rank, typically <= 50).

Serial ``@njit`` leaves on preallocated arrays: no allocation, no LAPACK call per block, and a
returned flag instead of an exception when a matrix is not positive definite or is singular.
"""

import math

from numba import njit

from ._config import LEAF


@njit(**LEAF)
def cholesky(A, L):
    """Lower Cholesky factor of the symmetric A (R, R) into L; False if A is not positive definite."""
    R = A.shape[0]
    for j in range(R):
        s = A[j, j]
        for k in range(j):
            s -= L[j, k] * L[j, k]
        if not s > 0.0:  # also catches NaN
            return False
        ljj = math.sqrt(s)
        L[j, j] = ljj
        inv = 1.0 / ljj
        for i in range(j + 1, R):
            t = A[i, j]
            for k in range(j):
                t -= L[i, k] * L[j, k]
            L[i, j] = t * inv
        for i in range(j):
            L[i, j] = 0.0
    return True


@njit(**LEAF)
def tri_inverse(L, out):
    """L^{-1} of the lower triangular L (R, R) into out (lower triangular, zeros above), column
    by column."""
    R = L.shape[0]
    for j in range(R):
        for i in range(j):
            out[i, j] = 0.0
        out[j, j] = 1.0 / L[j, j]
        for i in range(j + 1, R):
            s = 0.0
            for k in range(j, i):
                s -= L[i, k] * out[k, j]
            out[i, j] = s / L[i, i]


@njit(**LEAF)
def cholesky_inverse(L, out):
    """A^{-1} from the lower Cholesky factor L of A, into out (R, R), symmetric."""
    R = L.shape[0]
    tri_inverse(L, out)
    # A^{-1} = L^{-T} L^{-1}: entry (i, j) = sum_k Linv[k, i] Linv[k, j], k >= max(i, j)
    for i in range(R):
        for j in range(i, R):
            s = 0.0
            for k in range(j, R):
                s += out[k, i] * out[k, j]
            out[j, i] = s  # lower part first: out[k, *] with k >= j is still L^{-1}
    for i in range(R):
        for j in range(i + 1, R):
            out[i, j] = out[j, i]


@njit(**LEAF)
def cholesky_solve(L, b, out):
    """Solve A x = b with A = L L^T; b and out are (R,) (may be the same array)."""
    R = L.shape[0]
    for i in range(R):
        s = b[i]
        for k in range(i):
            s -= L[i, k] * out[k]
        out[i] = s / L[i, i]
    for i in range(R - 1, -1, -1):
        s = out[i]
        for k in range(i + 1, R):
            s -= L[k, i] * out[k]
        out[i] = s / L[i, i]


# ---------------------------------------------------------------- batches, entry index innermost
# One R x R Cholesky factorisation is a chain of dependent operations (latency-bound, ~1 flop
# per cycle); B of them side by side, stored (R, R, B) with the batch index innermost, give loops
# over b that compile to SIMD code. Each lane performs the operations of ``cholesky`` and
# ``cholesky_inverse`` in their order.


@njit(**LEAF)
def batch_cholesky(A, L, w, ok):
    """Lower Cholesky factors of the symmetric A[:, :, b] into L[:, :, b] (lower triangle only;
    the upper one is not written), w[j, b] = 1 / L[j, j, b]. ok[b] is cleared where A[:, :, b] is
    not positive definite (that lane then goes on with a pivot of 1: finite, and not used)."""
    R = A.shape[0]
    B = A.shape[2]
    for j in range(R):
        for b in range(B):
            L[j, j, b] = A[j, j, b]
        for k in range(j):
            for b in range(B):
                L[j, j, b] -= L[j, k, b] * L[j, k, b]
        for b in range(B):
            s = L[j, j, b]
            good = s > 0.0  # (also False for NaN)
            ok[b] = ok[b] & good
            ljj = math.sqrt(s if good else 1.0)
            L[j, j, b] = ljj
            w[j, b] = 1.0 / ljj
        for i in range(j + 1, R):
            for b in range(B):
                L[i, j, b] = A[i, j, b]
            for k in range(j):
                for b in range(B):
                    L[i, j, b] -= L[i, k, b] * L[j, k, b]
            for b in range(B):
                L[i, j, b] *= w[j, b]


@njit(**LEAF)
def batch_cholesky_inverse(L, w, out, acc):
    """A[:, :, b]^{-1} (symmetric, both triangles) into out from ``batch_cholesky``'s L and w;
    acc (B,) scratch."""
    R = L.shape[0]
    B = L.shape[2]
    # L^{-1} into the lower triangle of out, column by column (as ``tri_inverse``)
    for j in range(R):
        for b in range(B):
            out[j, j, b] = w[j, b]
        for i in range(j + 1, R):
            for b in range(B):
                acc[b] = 0.0
            for k in range(j, i):
                for b in range(B):
                    acc[b] -= L[i, k, b] * out[k, j, b]
            for b in range(B):
                out[i, j, b] = acc[b] / L[i, i, b]
    # A^{-1} = L^{-T} L^{-1}, lower part first (rows k >= j of out still hold L^{-1}), then mirrored
    for i in range(R):
        for j in range(i, R):
            for b in range(B):
                acc[b] = 0.0
            for k in range(j, R):
                for b in range(B):
                    acc[b] += out[k, i, b] * out[k, j, b]
            for b in range(B):
                out[j, i, b] = acc[b]
    for i in range(R):
        for j in range(i + 1, R):
            for b in range(B):
                out[i, j, b] = out[j, i, b]
