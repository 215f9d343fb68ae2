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
# over b that compile to SIMD code. The loops are right-looking (each finished column updates the
# ones after it), so that consecutive updates go to different elements and do not wait for each
# other; every element still receives its terms in the order of ``cholesky``, ``tri_inverse`` and
# ``cholesky_inverse`` (ascending k), from the same start.


@njit(**LEAF)
def batch_cholesky(A, L, w, ok):
    """Lower Cholesky factors of the symmetric A[:, :, b] (its lower triangle is read) into
    L[:, :, b] (lower triangle only; the upper one is not written), w[j, b] = 1 / L[j, j, b].
    ok[b] is cleared where A[:, :, b] is not positive definite (that lane then goes on with a
    pivot of 1: finite, and not used)."""
    R = A.shape[0]
    B = A.shape[2]
    for j in range(R):
        for i in range(j, R):
            for b in range(B):
                L[i, j, b] = A[i, j, b]
    for k in range(R):
        for b in range(B):
            s = L[k, k, b]
            good = s > 0.0  # (also False for NaN)
            ok[b] = ok[b] & good
            lkk = math.sqrt(s if good else 1.0)
            L[k, k, b] = lkk
            w[k, b] = 1.0 / lkk
        for i in range(k + 1, R):
            for b in range(B):
                L[i, k, b] *= w[k, b]
        for j in range(k + 1, R):
            for i in range(j, R):
                for b in range(B):
                    L[i, j, b] -= L[i, k, b] * L[j, k, b]


@njit(**LEAF)
def batch_cholesky_inverse(L, w, T):
    """A[:, :, b]^{-1} (symmetric, both triangles) into L from ``batch_cholesky``'s L and w;
    T (R, R, B) scratch (it receives L^{-1})."""
    R = L.shape[0]
    B = L.shape[2]
    # T <- L^{-1} (lower triangle), column by column (as ``tri_inverse``)
    for j in range(R):
        for b in range(B):
            T[j, j, b] = w[j, b]
        for i in range(j + 1, R):
            for b in range(B):
                T[i, j, b] = 0.0
        for k in range(j, R):
            if k > j:
                for b in range(B):
                    T[k, j, b] /= L[k, k, b]
            for i in range(k + 1, R):
                for b in range(B):
                    T[i, j, b] -= L[i, k, b] * T[k, j, b]
    # L <- L^{-T} L^{-1}: entry (j, i), j >= i, = sum over k >= j of T[k, i] T[k, j]; then mirrored
    for j in range(R):
        for i in range(j + 1):
            for b in range(B):
                L[j, i, b] = 0.0
    for k in range(R):
        for i in range(k + 1):
            for j in range(i, k + 1):
                for b in range(B):
                    L[j, i, b] += T[k, i, b] * T[k, j, b]
    for i in range(R):
        for j in range(i + 1, R):
            for b in range(B):
                L[i, j, b] = L[j, i, b]
