"""Mean-field variational message passing (method "vmp") for Bayesian CP decomposition.

Model as in ``fastcep.kernels.tensor`` (objects numbered globally, entry e touches objects
gidx[e, 0..K-1]): f_e = 1.(u_{e,1} o ... o u_{e,K}); prior u_o ~ N(prior_Lam[o]^{-1} prior_eta[o],
prior_Lam[o]^{-1}). cp_gaussian: y_e ~ N(f_e, 1 / tau), tau ~ Gamma(a0, b0). cp_probit, the
augmented model of Matchbox and the paper (section 5.2): z_e ~ N(f_e, 1), y_e = 1[z_e > 0],
signs s_e = 2 y_e - 1.

Approximation q = prod_o N(u_o | M[o], S[o]) q(tau) (prod_e q(z_e)), full R x R covariances.
Given the other modes, the objects of mode k are independent, so their exact coordinate updates
run in parallel over objects (each object sums its own entries through the CSR grouping, in
entry order: results do not depend on the thread count):

    P_Lam[o] = prior_Lam[o] + E[tau] sum_{e in o} Ezz_e,   Ezz_e = Hadamard_{k' != k} E[u u^T]
    P_eta[o] = prior_eta[o] + E[tau] sum_{e in o} t_e Ez_e, Ez_e = Hadamard_{k' != k} E[u]

with t_e = y_e (cp_gaussian) or t_e = E[z_e] (cp_probit, E[tau] = 1), the mean of the optimal
q(z_e) = N(mu_e, 1) truncated to s_e z > 0: E[z_e] = mu_e + s_e phi(mu_e) / Phi(s_e mu_e), with
mu_e = Ez_e . M[o] from the object's current mean (the q(z) update of the entries of mode k's
objects, exact given q(u), made just before their update).

Evidence lower bound, per entry (mu = E[f], Ef2 = E[f^2] = sum of all entries of
Hadamard_k E[u u^T]):

    cp_gaussian: 0.5 (E[log tau] - log 2 pi) - 0.5 E[tau] (y^2 - 2 y mu + Ef2)
    cp_probit:   log Phi(s mu) - 0.5 (Ef2 - mu^2)    (q(z) optimal for the current q(u))

minus KL(q(u_o) || prior) per object,
0.5 [tr(prior_Lam S) + m^T prior_Lam m - 2 m^T prior_eta + c0 - R + log det P_Lam] with the
prior's constant c0 = prior_eta^T prior_Lam^{-1} prior_eta - log det prior_Lam, and for
cp_gaussian minus KL(q(tau) || Gamma(a0, b0)) (in the Python layer).
"""

import math

from numba import njit, prange

from .._config import LEAF, PARALLEL_CACHED
from ..linalg import cholesky, cholesky_solve
from ..special import inv_mills, log_ndtr
from .messages import MODEL_GAUSSIAN
from .messages import MODEL_PROBIT as MODEL_PROBIT  # the model codes are those of kernels.tensor.messages
from .moments import expected_sq_error, object_moments, other_modes_moments

#: scratch of ``object_update``: R x R matrices and R-vectors per work unit
OBJECT_MATS = 2
OBJECT_VECS = 1


# ---------------------------------------------------------------- leaves
@njit(**LEAF)
def latent_mean(s, mu):
    """E[z] of q(z) = N(mu, 1) truncated to s z > 0: mu + s phi(mu) / Phi(s mu) (s = +-1)."""
    return mu + s * inv_mills(s * mu)


@njit(**LEAF)
def f_moments(gidx_e, M, E2):
    """(E[f], E[f^2]) of one entry: 1.(Hadamard_k m_k) and the sum of Hadamard_k E[u u^T]."""
    mu = 0.0
    for r in range(M.shape[1]):
        p = 1.0
        for k in range(gidx_e.shape[0]):
            p *= M[gidx_e[k], r]
        mu += p
    return mu, expected_sq_error(gidx_e, 0.0, M, E2)


@njit(**LEAF)
def object_update(
    model, o, k, ptr, ent, gidx, y, s, M, S, E2, prior_Lam, prior_eta, P_Lam, P_eta, etau, mat, vec
):
    """Exact coordinate update of q(u_o), o an object of mode k (full R x R blocks).

    P_Lam[o] (R, R), P_eta[o] (R,) receive the posterior natural parameters, M[o], S[o], E2[o]
    its moments (the entries of o only read other modes' rows and, for cp_probit, M[o] before
    it is overwritten). mat (OBJECT_MATS, R, R), vec (OBJECT_VECS, R) scratch. Returns
    log det P_Lam[o], or NaN if P_Lam[o] is not positive definite (then M[o], S[o], E2[o]
    are unchanged).
    """
    R = M.shape[1]
    Ezz, L = mat[0], mat[1]
    Ez = vec[0]
    PL = P_Lam[o]
    Pe = P_eta[o]
    for i in range(R):
        Pe[i] = prior_eta[o, i]
        for j in range(R):
            PL[i, j] = prior_Lam[o, i, j]
    for idx in range(ptr[o], ptr[o + 1]):
        e = ent[idx]
        other_modes_moments(gidx[e], k, M, E2, Ez, Ezz)
        if model == MODEL_GAUSSIAN:
            t = etau * y[e]
        else:
            mu = 0.0
            for i in range(R):
                mu += Ez[i] * M[o, i]
            t = latent_mean(s[e], mu)
        for i in range(R):
            Pe[i] += t * Ez[i]
            for j in range(i + 1):
                PL[i, j] += etau * Ezz[i, j]
    for i in range(R):
        for j in range(i):
            PL[j, i] = PL[i, j]
    if not object_moments(PL, Pe, M[o], S[o], E2[o], L):
        return math.nan
    logdet = 0.0
    for i in range(R):
        logdet += math.log(L[i, i])
    return 2.0 * logdet


@njit(**LEAF)
def kl_object(prior_Lam_o, prior_eta_o, c0, M_o, S_o, logdet_P):
    """KL(N(M_o, S_o) || prior) with the prior's constant c0 (``prior_constant``) and
    logdet_P = log det S_o^{-1}."""
    R = M_o.shape[0]
    t = c0 - R + logdet_P
    for i in range(R):
        q = 0.0
        for j in range(R):
            t += prior_Lam_o[i, j] * S_o[j, i]
            q += prior_Lam_o[i, j] * M_o[j]
        t += M_o[i] * (q - 2.0 * prior_eta_o[i])
    return 0.5 * t


@njit(**LEAF)
def prior_constant(prior_Lam_o, prior_eta_o, L, tmp):
    """c0 = eta^T Lam^{-1} eta - log det Lam of one prior; NaN if Lam is not positive definite.

    L (R, R), tmp (R,) scratch.
    """
    R = prior_eta_o.shape[0]
    if not cholesky(prior_Lam_o, L):
        return math.nan
    cholesky_solve(L, prior_eta_o, tmp)
    c = 0.0
    for i in range(R):
        c += prior_eta_o[i] * tmp[i] - 2.0 * math.log(L[i, i])
    return c


# ---------------------------------------------------------------- drivers
@njit(**PARALLEL_CACHED)
def update_mode(problem, store, k, lo, hi, etau, logdet, mat, vec):
    """Update q(u_o) of every object o in lo..hi-1 (all of mode k), in parallel over objects of
    ``problem.obj_chunk`` (``state.CPProblem``); the posterior in ``store`` (its messages unused).

    Objects of mode k never read each other's rows, so the result does not depend on the chunk
    or thread count. logdet (n_obj,) receives log det P_Lam[o] (NaN: not positive definite); mat
    (>= n_chunks, OBJECT_MATS, R, R) and vec (>= n_chunks, OBJECT_VECS, R) scratch.
    """
    model, ptr, ent = problem.code, problem.ptr, problem.ent
    gidx, y, s = problem.gidx, problem.y, problem.s
    prior_Lam, prior_eta, obj_chunk = problem.prior_Lam, problem.prior_eta, problem.obj_chunk
    M, S, E2 = store.M, store.S, store.E2
    P_Lam, P_eta = store.P_Lam, store.P_eta
    for c in prange(-(-(hi - lo) // obj_chunk)):
        for o in range(lo + c * obj_chunk, min(hi, lo + (c + 1) * obj_chunk)):
            logdet[o] = object_update(
                model, o, k, ptr, ent, gidx, y, s, M, S, E2, prior_Lam, prior_eta, P_Lam, P_eta, etau,
                mat[c], vec[c],
            )  # fmt: skip


@njit(**PARALLEL_CACHED)
def entry_pass(model, gidx, y, s, M, E2, f_mean, chunk, part):
    """E[f] of every entry into f_mean (n,) and per chunk of ``chunk`` entries the sum of
    E[(y - f)^2] (cp_gaussian) or of log Phi(s mu) - 0.5 (E[f^2] - mu^2) (cp_probit) into
    part (n_chunks,): fixed chunks, so their sum does not depend on the thread count."""
    n = gidx.shape[0]
    for c in prange(part.shape[0]):
        t = 0.0
        for e in range(c * chunk, min(n, (c + 1) * chunk)):
            mu, ef2 = f_moments(gidx[e], M, E2)
            f_mean[e] = mu
            if model == MODEL_GAUSSIAN:
                t += y[e] * y[e] - 2.0 * y[e] * mu + ef2
            else:
                t += log_ndtr(s[e] * mu) - 0.5 * (ef2 - mu * mu)
        part[c] = t


@njit(**PARALLEL_CACHED)
def kl_pass(prior_Lam, prior_eta, c0, M, S, logdet, obj_chunk, part):
    """Per chunk of ``obj_chunk`` objects the sum of KL(q(u_o) || prior_o) into part (n_chunks,)."""
    n_obj = M.shape[0]
    for c in prange(part.shape[0]):
        t = 0.0
        for o in range(c * obj_chunk, min(n_obj, (c + 1) * obj_chunk)):
            t += kl_object(prior_Lam[o], prior_eta[o], c0[o], M[o], S[o], logdet[o])
        part[c] = t


@njit(**PARALLEL_CACHED)
def prior_constants(prior_Lam, prior_eta, c0, obj_chunk, mat, vec):
    """c0[o] of every prior (``prior_constant``; NaN where not positive definite), in parallel;
    mat (>= n_chunks, OBJECT_MATS, R, R), vec (>= n_chunks, OBJECT_VECS, R) scratch."""
    n_obj = prior_eta.shape[0]
    for c in prange(-(-n_obj // obj_chunk)):
        for o in range(c * obj_chunk, min(n_obj, (c + 1) * obj_chunk)):
            c0[o] = prior_constant(prior_Lam[o], prior_eta[o], mat[c, 0], vec[c, 0])
