"""Moments of the CP model (DESIGN.md section 3.2) that every tensor kernel reads.

Objects of all modes are numbered globally (object o = offset[k] + index in mode k); entry e
touches objects gidx[e, 0..K-1]. State (natural parameters, float64, C-contiguous):

    sites:      Lam[n, K, R, R], eta[n, K, R]      one Gaussian message per (entry, mode)
    posterior:  P_Lam[n_obj, R, R], P_eta[n_obj, R] = prior + sum of the object's messages
    moments:    M[n_obj, R] means, S[n_obj, R, R] covariances, E2 = S + M M^T
    noise:      alpha[n], beta[n] Gamma messages; posterior (a0 + sum alpha, b0 + sum beta)

With ``diag`` the R x R blocks are stored as their diagonals (R,) instead: the fully
factorised variant, one Gaussian message per (entry, mode, r), for large R.

Here: the CP model's value at an entry, the expectations over the other modes of an entry, the
expected squared error of a Gaussian entry, and one object's moments from its natural parameters.
"""

from numba import njit

from .._config import LEAF
from ..linalg import cholesky, cholesky_inverse

__all__ = [
    "cp_value",
    "other_modes_product",
    "other_modes_moments",
    "expected_sq_error",
    "expected_sq_error_diag",
    "object_moments",
]


# ---------------------------------------------------------------- the model at one entry
@njit(**LEAF, inline="always")
def cp_value(gidx_e, U):
    """f = 1.(Hadamard_k U[o_k]) = sum_r prod_k U[gidx_e[k], r] at one entry: gidx_e (K,) int64
    global objects, U (n_obj, R) (the factors, or the posterior means M: the predictive mean).

    ``inline="always"`` inlines the body in numba's IR: every caller computes exactly as the loop
    written in its place, also a caller loaded from the disk cache (an LLVM call to a cached leaf
    is not inlined, and fused multiply-adds across it differ; BENCHMARKS.md)."""
    K = gidx_e.shape[0]
    R = U.shape[1]
    f = 0.0
    for r in range(R):
        p = 1.0
        for k in range(K):
            p *= U[gidx_e[k], r]
        f += p
    return f


# ---------------------------------------------------------------- expectations of other modes
@njit(**LEAF, inline="always")
def other_modes_product(gidx_e, k, A, out):
    """out (R,) = Hadamard_{k' != k} A[o_k'] for A (n_obj, R): the means M, or the diagonals E2d.

    Inlined in numba's IR (as ``cp_value``): no call per (entry, mode) in a cached caller."""
    K = gidx_e.shape[0]
    R = A.shape[1]
    out[:] = 1.0
    for kk in range(K):
        if kk == k:
            continue
        o = gidx_e[kk]
        for r in range(R):
            out[r] *= A[o, r]


@njit(**LEAF)
def other_modes_moments(gidx_e, k, M, E2, Ez, Ezz):
    """Ez = Hadamard_{k' != k} M[o_k'], Ezz = Hadamard_{k' != k} E2[o_k'] (full R x R)."""
    K = gidx_e.shape[0]
    R = M.shape[1]
    other_modes_product(gidx_e, k, M, Ez)
    Ezz[:, :] = 1.0
    for kk in range(K):
        if kk == k:
            continue
        o = gidx_e[kk]
        for r in range(R):
            for q in range(R):
                Ezz[r, q] *= E2[o, r, q]


# ---------------------------------------------------------------- Gaussian noise
@njit(**LEAF)
def expected_sq_error(gidx_e, y, M, E2):
    """E[(y - f)^2] = y^2 - 2 y 1.(Hadamard_k m_k) + sum of all entries of Hadamard_k E[u u^T]."""
    K = gidx_e.shape[0]
    R = M.shape[1]
    mu = cp_value(gidx_e, M)
    second = 0.0
    for r in range(R):
        for q in range(R):
            p = 1.0
            for k in range(K):
                p *= E2[gidx_e[k], r, q]
            second += p
    return y * y - 2.0 * y * mu + second


@njit(**LEAF)
def expected_sq_error_diag(gidx_e, y, M, E2d):
    """Diagonal covariances: E[u_r u_q] = m_r m_q for r != q."""
    K = gidx_e.shape[0]
    R = M.shape[1]
    mu = 0.0
    diag = 0.0
    for r in range(R):
        p = 1.0
        p2 = 1.0
        pm2 = 1.0
        for k in range(K):
            o = gidx_e[k]
            p *= M[o, r]
            p2 *= E2d[o, r]
            pm2 *= M[o, r] * M[o, r]
        mu += p
        diag += p2 - pm2
    return y * y - 2.0 * y * mu + mu * mu + diag


@njit(**LEAF)
def object_moments(P_Lam_o, P_eta_o, M_o, S_o, E2_o, L):
    """S = P_Lam^{-1}, M = S P_eta, E2 = S + M M^T for one object; False if not positive definite."""
    R = M_o.shape[0]
    if not cholesky(P_Lam_o, L):
        return False
    cholesky_inverse(L, S_o)
    for i in range(R):
        t = 0.0
        for j in range(R):
            t += S_o[i, j] * P_eta_o[j]
        M_o[i] = t
    for i in range(R):
        for j in range(R):
            E2_o[i, j] = S_o[i, j] + M_o[i] * M_o[j]
    return True
