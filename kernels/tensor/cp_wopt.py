"""CP-WOPT (Acar et al. 2011): objective and gradient of weighted least-squares CP completion.

Objects of all modes are numbered globally (object o = offset[k] + index in mode k, as in
``kernels.tensor``); the factor matrices are stacked into U[n_obj, R] (row o is object o's
factor row). For observed entries e with global objects gidx[e, 0..K-1] and values y[e]:

    f_e = sum_r prod_k U[gidx[e, k], r]                       (the CP reconstruction)
    F(U) = 1/2 sum_e (y_e - f_e)^2 + reg/2 sum_o |U_o|^2
    dF/dU[o, r] = reg U[o, r] - sum_{e in o} (y_e - f_e) prod_{k' != k(o)} U[gidx[e, k'], r]

Residuals are computed in parallel over fixed chunks of entries (entry e writes only res[e]);
gradient rows in parallel over fixed chunks of objects, each summing its entries through the
CSR grouping (ptr, ent) in entry order (object o writes only G[o]). Partial sums of the
objective are reduced serially in chunk order, so results are bitwise identical on 1 or N
threads.
"""

from numba import njit, prange

from .._config import LEAF, PARALLEL_CACHED
from .moments import cp_value


@njit(**LEAF)
def entry_residual(gidx_e, y_e, U):
    """y_e - f_e for one entry: gidx_e (K,) int64 global objects, U (n_obj, R) float64."""
    return y_e - cp_value(gidx_e, U)


@njit(**LEAF)
def object_gradient(o, k, ptr, ent, gidx, res, U, reg, g_o, z):
    """Gradient row g_o (R,) of object o (of mode k) and its squared norm |U_o|^2 (returned).

    g_o = reg U_o - sum_{e in o} res_e Hadamard_{k' != k} U[gidx[e, k']], the entries e of o
    taken from ent[ptr[o]:ptr[o + 1]] in that order; z (R,) scratch.
    """
    K = gidx.shape[1]
    R = U.shape[1]
    for r in range(R):
        g_o[r] = 0.0
    for idx in range(ptr[o], ptr[o + 1]):
        e = ent[idx]
        re = res[e]
        for r in range(R):
            z[r] = re
        for kk in range(K):
            if kk == k:
                continue
            oo = gidx[e, kk]
            for r in range(R):
                z[r] *= U[oo, r]
        for r in range(R):
            g_o[r] -= z[r]
    sq = 0.0
    for r in range(R):
        u = U[o, r]
        g_o[r] += reg * u
        sq += u * u
    return sq


@njit(**PARALLEL_CACHED)
def value_and_grad(problem, U, reg, entry_chunk, res, sse, sq, G, z):
    """Objective F(U) (returned) and its gradient G (n_obj, R); residuals y - f into res (n,).

    The entries, their CSR grouping by object and ``obj_chunk`` come from ``problem``
    (``state.CPProblem``; its prior and model code unused); U (n_obj, R), reg >= 0. Scratch: sse
    (ceil(n / entry_chunk),) and sq (ceil(n_obj / obj_chunk),) partial sums, z (ceil(n_obj /
    obj_chunk), R).
    """
    gidx, y, ptr = problem.gidx, problem.y, problem.ptr
    ent, obj_mode, obj_chunk = problem.ent, problem.obj_mode, problem.obj_chunk
    n = gidx.shape[0]
    n_obj = U.shape[0]
    for c in prange(sse.shape[0]):
        t = 0.0
        for e in range(c * entry_chunk, min(n, (c + 1) * entry_chunk)):
            r_e = entry_residual(gidx[e], y[e], U)
            res[e] = r_e
            t += r_e * r_e
        sse[c] = t
    for c in prange(sq.shape[0]):
        t = 0.0
        for o in range(c * obj_chunk, min(n_obj, (c + 1) * obj_chunk)):
            t += object_gradient(o, obj_mode[o], ptr, ent, gidx, res, U, reg, G[o], z[c])
        sq[c] = t
    total_sse = 0.0
    for c in range(sse.shape[0]):
        total_sse += sse[c]
    total_sq = 0.0
    for c in range(sq.shape[0]):
        total_sq += sq[c]
    return 0.5 * total_sse + 0.5 * reg * total_sq
