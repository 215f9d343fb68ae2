"""Bayesian CP decomposition factors (DESIGN.md section 3.2): Gaussian and probit entries.

Objects of all modes are numbered globally (object o = offset[k] + index in mode k); entry e
touches objects gidx[e, 0..K-1]. State (natural parameters, float64, C-contiguous):

    sites:      Lam[n, K, R, R], eta[n, K, R]      one Gaussian message per (entry, mode)
    posterior:  P_Lam[n_obj, R, R], P_eta[n_obj, R] = prior + sum of the object's messages
    moments:    M[n_obj, R] means, S[n_obj, R, R] covariances, E2 = S + M M^T
    noise:      alpha[n], beta[n] Gamma messages; posterior (a0 + sum alpha, b0 + sum beta)

With ``diag`` the R x R blocks are stored as their diagonals (R,) instead: the fully
factorised variant, one Gaussian message per (entry, mode, r), for large R.

Entry kernels run in parallel over entries (entry e writes only its own messages); posterior
rebuilds run in parallel over objects, summing messages through CSR groupings in a fixed order,
so results do not depend on the number of threads.
"""

import math

import numpy as np
from numba import njit, prange

from ._config import LEAF, PARALLEL_CACHED, SERIAL
from .linalg import batch_cholesky, batch_cholesky_inverse, cholesky, cholesky_inverse, tri_inverse
from .special import inv_mills, log_ndtr

MODEL_GAUSSIAN = 0
MODEL_PROBIT = 1
#: cp_probit with the rank-one curvature (``probit_message`` with ``rank1``)
MODEL_PROBIT_RANK1 = 2


# ---------------------------------------------------------------- expectations of other modes
@njit(**LEAF)
def other_modes_moments(gidx_e, k, M, E2, Ez, Ezz):
    """Ez = Hadamard_{k' != k} M[o_k'], Ezz = Hadamard_{k' != k} E2[o_k'] (full R x R)."""
    K = gidx_e.shape[0]
    R = M.shape[1]
    Ez[:] = 1.0
    Ezz[:, :] = 1.0
    for kk in range(K):
        if kk == k:
            continue
        o = gidx_e[kk]
        for r in range(R):
            Ez[r] *= M[o, r]
            for q in range(R):
                Ezz[r, q] *= E2[o, r, q]


@njit(**LEAF)
def other_modes_moments_diag(gidx_e, k, M, E2d, Ez, Ezzd):
    """Diagonal variant: E2d[o] (R,) holds E[u_r^2]; Ezzd = Hadamard of those."""
    K = gidx_e.shape[0]
    R = M.shape[1]
    Ez[:] = 1.0
    Ezzd[:] = 1.0
    for kk in range(K):
        if kk == k:
            continue
        o = gidx_e[kk]
        for r in range(R):
            Ez[r] *= M[o, r]
            Ezzd[r] *= E2d[o, r]


# ---------------------------------------------------------------- probit message (full)
#: scratch of ``probit_message``: R x R matrices and R-vectors
PROBIT_MATS = 6
PROBIT_VECS = 3


@njit(**LEAF)
def probit_message(Lc, ec, s, Ez, Ezz, Lmsg, emsg, mat, vec, fallback, rank1=False):
    """CEP-1 probit message of one (entry, mode) from its cavity (Lc, ec) into (Lmsg, emsg).

    Textbook form (supplement 1.1.2): Sc = Lc^{-1}, mc = Sc ec, c = 1 + tr(Sc Ezz),
    u = s Ez.mc / sqrt(c), r = phi(u)/Phi(u), g = s r Ez / sqrt(c), A = g g^T + (r u / c) Ezz;
    tilted covariance Sig = Sc - Sc A Sc, mean m = mc + Sc g; message Lam* = Sig^{-1} - Lc,
    eta* = Sig^{-1} m - ec. Computed in the cavity's whitened coordinates, without inverting Sig
    and without the cancellation of Sig^{-1} - Lc: with Lc = L L^T, W = L^{-1} and
    B = W A W^T (Sig = W^T (I - B) W; Sig positive definite iff I - B is),

        Lam* = L ((I - B)^{-1} - I) L^T = A + F^T F,  F = chol(I - B)^{-1} W A,
        eta* = g + Lam* m,  m = W^T (W ec + W g).

    With ``fallback``, when that message is not valid (an indefinite A: a misclassified entry,
    u < 0, whose other modes are uncertain), the plain first-order step E[z z^T] -> E[z] E[z]^T
    is taken instead; its message is rank one and costs O(R^2) from the same factorisation:
    with v = W Ez, w = W ec, b = g'^2 + r u / c (g' = s r / sqrt(c), c = 1 + |v|^2),
    lam = b |v|^2: Lam* = b / (1 - lam) Ez Ez^T, eta* = g' Ez + b / (1 - lam) (v.w + g' |v|^2) Ez.

    A message is valid if the cavity and the tilted covariance are positive definite, Lam* is
    positive semi-definite (certain when r u >= 0; else a Cholesky of Lam* + 1e-9 max|diag| I)
    and nonzero, eta* finite.
    With ``rank1`` the curvature term takes E[z] E[z]^T instead of E[z z^T] (the supplement's
    literal replacement of z by E[z], with z^T Sc z by tr(Sc Ezz) only inside c): A = b Ez Ez^T,
    b = g'^2 + r u / c, and the message is the fallback's rank-one form with c = 1 + tr(Sc Ezz).
    It is always valid for a positive definite cavity (r (r + u) < 1 gives b |v|^2 < 1).

    Returns 0 (no valid message: Lmsg, emsg undefined), 1 (the CEP-1 message) or 2 (the
    first-order fallback). mat: (PROBIT_MATS, R, R), vec: (PROBIT_VECS, R) C-contiguous scratch.
    """
    R = Ez.shape[0]
    L = mat[0]
    W = mat[1]
    T = mat[2]
    B = mat[3]
    L2 = mat[4]
    F = mat[5]
    v = vec[0]
    w = vec[1]
    m = vec[2]
    if not cholesky(Lc, L):
        return 0
    tri_inverse(L, W)
    vv = 0.0
    vw = 0.0
    for i in range(R):
        a = 0.0
        b = 0.0
        for k in range(i + 1):
            a += W[i, k] * Ez[k]
            b += W[i, k] * ec[k]
        v[i] = a
        w[i] = b
        vv += a * a
        vw += a * b
    # T = W Ezz; B_z = T W^T (lower half; with rank1 only its diagonal), c = 1 + tr(B_z)
    for i in range(R):
        for j in range(R):
            T[i, j] = 0.0
        for k in range(i + 1):
            wik = W[i, k]
            for j in range(R):
                T[i, j] += wik * Ezz[k, j]
    c = 1.0
    for i in range(R):
        for j in range(i if rank1 else 0, i + 1):
            t = 0.0
            for k in range(j + 1):
                t += T[i, k] * W[j, k]
            B[i, j] = t
        c += B[i, i]
    if rank1:
        return 1 if probit_rank_one(c, s, Ez, vv, vw, Lmsg, emsg) else 0
    isc = 1.0 / math.sqrt(c)
    u = s * vw * isc
    r = inv_mills(u)
    kappa = r * u / c
    gs = s * r * isc
    # I - B with B = gs^2 v v^T + kappa B_z; its Cholesky factor L2
    for i in range(R):
        for j in range(i + 1):
            B[i, j] = (1.0 if i == j else 0.0) - (gs * gs * v[i] * v[j] + kappa * B[i, j])
            B[j, i] = B[i, j]
    if cholesky(B, L2):
        # F = L2^{-1} (W A), W A = gs^2 v Ez^T + kappa T (forward substitution, column by column)
        for i in range(R):
            for j in range(R):
                t = gs * gs * v[i] * Ez[j] + kappa * T[i, j]
                for k in range(i):
                    t -= L2[i, k] * F[k, j]
                F[i, j] = t / L2[i, i]
        # m = W^T (w + gs v) (back substitution order irrelevant: a product with W^T)
        for i in range(R):
            t = 0.0
            for k in range(i, R):
                t += W[k, i] * (w[k] + gs * v[k])
            m[i] = t
        big = 0.0
        for i in range(R):
            for j in range(i + 1):
                t = gs * gs * Ez[i] * Ez[j] + kappa * Ezz[i, j]
                for k in range(R):
                    t += F[k, i] * F[k, j]
                Lmsg[i, j] = t
                Lmsg[j, i] = t
            big = max(big, abs(Lmsg[i, i]))
        ok = big > 0.0
        for i in range(R):
            t = gs * Ez[i]
            for j in range(R):
                t += Lmsg[i, j] * m[j]
            emsg[i] = t
            ok = ok and math.isfinite(t)
        if ok and kappa >= 0.0:
            # A = g g^T + kappa Ezz is positive semi-definite (Ezz is, a Hadamard product of
            # second-moment matrices), hence so is Lam* = A + F^T F: no check needed
            return 1
        if ok:
            for i in range(R):
                for j in range(R):
                    B[i, j] = Lmsg[i, j] + (1e-9 * big if i == j else 0.0)
            if cholesky(B, L2):
                return 1
    if not fallback:
        return 0
    # first-order fallback: Ezz -> Ez Ez^T, B_z -> v v^T
    return 2 if probit_rank_one(1.0 + vv, s, Ez, vv, vw, Lmsg, emsg) else 0


@njit(**LEAF)
def probit_rank_one(c, s, Ez, vv, vw, Lmsg, emsg):
    """Probit message whose curvature is rank one along Ez (``probit_message``): with
    vv = Ez^T Sc Ez, vw = Ez.mc, u = s vw / sqrt(c), g' = s r / sqrt(c), b = g'^2 + r u / c,
    lam = b vv: Lam* = b / (1 - lam) Ez Ez^T, eta* = g' Ez + b / (1 - lam) (vw + g' vv) Ez.
    Returns False if that message is not valid (not b > 0, lam >= 1, zero or not finite)."""
    R = Ez.shape[0]
    isc = 1.0 / math.sqrt(c)
    u = s * vw * isc
    r = inv_mills(u)
    gs = s * r * isc
    beta = gs * gs + r * u / c
    lam = beta * vv
    if not (beta > 0.0 and lam < 1.0):
        return False
    scale = beta / (1.0 - lam)
    proj = scale * (vw + gs * vv)
    big = 0.0
    for i in range(R):
        for j in range(R):
            Lmsg[i, j] = scale * Ez[i] * Ez[j]
        emsg[i] = gs * Ez[i] + proj * Ez[i]
        big = max(big, Lmsg[i, i])
    return big > 0.0 and math.isfinite(scale) and math.isfinite(proj)


@njit(**LEAF)
def probit_coord(tc, nc, s, x, b, ezz, rank1, out):
    """CEP-1 probit message of one entry to one coordinate z_r of a diagonal-covariance object.

    f = x z_r + b with x = E[prod of the other modes' coordinate r], b the rest of f at the
    posterior means, cavity N(mc, vc) = (nc / tc, 1 / tc); the conditional tilted is the 1-D
    probit of the regression kernels with E[x^2] (ezz) in the variance terms:
    c = 1 + ezz vc, u = s (x mc + b) / sqrt(c), g = s r x / sqrt(c), a = vc (g^2 + (r u / c) ezz),
    mean = mc + vc g, var = vc (1 - a). If that message precision is not positive, ezz -> x^2
    (the plain first-order step, always valid). With ``rank1`` the curvature term a takes x^2
    (ezz stays in c; as ``probit_message``). out (2,) receives (precision, precision x mean);
    returns False if no valid message exists (not applied).
    """
    if not tc > 0.0:
        return False
    vc = 1.0 / tc
    mc = nc * vc
    for second in range(2):
        e2 = ezz if second == 0 else x * x
        c = 1.0 + e2 * vc
        isc = 1.0 / math.sqrt(c)
        u = s * (x * mc + b) * isc
        rr = inv_mills(u)
        g = s * rr * x * isc
        a = vc * (g * g + rr * u / c * (x * x if rank1 else e2))
        inv = 1.0 / (1.0 - a)
        t_new = tc * a * inv
        n_new = (vc * g * tc + nc * a) * inv
        if a > 0.0 and a < 1.0 and t_new > 0.0 and math.isfinite(t_new) and math.isfinite(n_new):
            out[0] = t_new
            out[1] = n_new
            return True
    return False


# ---------------------------------------------------------------- Gaussian noise
@njit(**LEAF)
def damp_noise_message(e, alpha, beta, rho, sq):
    """Damp entry e's Gamma message towards (shape 1/2, rate sq / 2), sq = E[(y - f)^2]."""
    alpha[e] = (1.0 - rho) * alpha[e] + rho * 0.5
    beta[e] = (1.0 - rho) * beta[e] + rho * 0.5 * sq


@njit(**LEAF)
def expected_sq_error(gidx_e, y, M, E2):
    """E[(y - f)^2] = y^2 - 2 y 1.(Hadamard_k m_k) + sum of all entries of Hadamard_k E[u u^T]."""
    K = gidx_e.shape[0]
    R = M.shape[1]
    mu = 0.0
    for r in range(R):
        p = 1.0
        for k in range(K):
            p *= M[gidx_e[k], r]
        mu += p
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


# ---------------------------------------------------------------- one entry, all modes
#: scratch of ``entry_update``: R x R matrices and R-vectors (its own three of each + the probit's)
ENTRY_MATS = 3 + PROBIT_MATS
ENTRY_VECS = 3 + PROBIT_VECS


@njit(**LEAF)
def entry_update(
    model, gidx_e, mom_e, k_lo, k_hi, y, s, Lam_e, eta_e, P_Lam, P_eta, M, E2, etau, rho, mat, vec
):
    """New damped messages of one entry to its objects of modes k_lo..k_hi-1 (full R x R blocks).

    The other modes' moments are M[mom_e[k']], E2[mom_e[k']]: mom_e = gidx_e takes them from the
    posterior; ``sweep_cavity_full`` passes one entry's cavity moments (mom_e = 0..K-1).

    Lam_e (K, R, R), eta_e (K, R): the entry's messages, updated in place. mat (ENTRY_MATS, R, R)
    and vec (ENTRY_VECS, R) C-contiguous scratch. A probit message that the paper's expected
    quadratic form makes indefinite (a misclassified entry, u < 0, whose other modes are
    uncertain) is replaced by the plain first-order step (``probit_message``). Returns the
    number of messages not applied.
    """
    R = M.shape[1]
    Ezz = mat[0]
    Lc = mat[1]
    Lmsg = mat[2]
    Ez = vec[0]
    ec = vec[1]
    emsg = vec[2]
    skipped = 0
    for k in range(k_lo, k_hi):
        other_modes_moments(mom_e, k, M, E2, Ez, Ezz)
        if model == MODEL_GAUSSIAN:
            for i in range(R):
                emsg[i] = y * etau * Ez[i]
                for j in range(R):
                    Lmsg[i, j] = etau * Ezz[i, j]
            ok = True
        else:
            o = gidx_e[k]
            for i in range(R):
                ec[i] = P_eta[o, i] - eta_e[k, i]
                for j in range(R):
                    Lc[i, j] = P_Lam[o, i, j] - Lam_e[k, i, j]
            rank1 = model == MODEL_PROBIT_RANK1
            ok = probit_message(Lc, ec, s, Ez, Ezz, Lmsg, emsg, mat[3:], vec[3:], True, rank1) > 0
        if ok:
            for i in range(R):
                eta_e[k, i] = (1.0 - rho) * eta_e[k, i] + rho * emsg[i]
                for j in range(R):
                    Lam_e[k, i, j] = (1.0 - rho) * Lam_e[k, i, j] + rho * Lmsg[i, j]
        else:
            skipped += 1
    return skipped


@njit(**LEAF)
def gaussian_entry_update(e, gidx, k_lo, k_hi, y, Lf, eta, M, E2f, etau, rho, bf, with_sums, PL, Pe):
    """cp_gaussian CEP-1 messages of entry e to its objects of modes k_lo..k_hi-1 (full R x R
    blocks), damped in place: Lam <- (1 - rho) Lam + rho E[tau] Hadamard_{k' != k} E2[o_k'],
    eta <- (1 - rho) eta + rho y E[tau] Hadamard_{k' != k} M[o_k'] (as ``entry_update``; the
    Gaussian message does not depend on the cavity, so no cavity is formed).

    Works on whole arrays and the index e (no per-entry views), with the R x R blocks as flat
    R^2 vectors in simple loops that compile to SIMD code: Lf (n, K R^2) and E2f (n_obj, R^2)
    are flat views of Lam and E2; bf (R^2,) scratch. With ``with_sums`` each new message is also
    added to the object sums PL (n_obj, R^2), Pe (n_obj, R) of the caller's group while it is in
    registers (``sweep_full``).

    Returns E[(y - f)^2] under the posterior (as ``expected_sq_error``, from the products of the
    last mode's message times the last mode's moments) when k_hi is the number of modes, else NaN.
    """
    K = gidx.shape[1]
    R = M.shape[1]
    RR = R * R
    a = 1.0 - rho
    b = rho * etau
    sq = math.nan
    for k in range(k_lo, k_hi):
        first = 1 if k == 0 else 0
        o = gidx[e, first]
        for t in range(RR):
            bf[t] = E2f[o, t]
        for kk in range(first + 1, K):
            if kk != k:
                o = gidx[e, kk]
                for t in range(RR):
                    bf[t] *= E2f[o, t]
        off = k * RR
        own = gidx[e, k]
        for t in range(RR):
            v = a * Lf[e, off + t] + b * bf[t]
            Lf[e, off + t] = v
            if with_sums:
                PL[own, t] += v
        mu = 0.0
        for r in range(R):
            p = 1.0
            for kk in range(K):
                if kk != k:
                    p *= M[gidx[e, kk], r]
            v = a * eta[e, k, r] + b * y * p
            eta[e, k, r] = v
            if with_sums:
                Pe[own, r] += v
            mu += p * M[own, r]
        if k == K - 1:  # bf holds the product over the other modes: one more factor gives all K
            second = 0.0
            for t in range(RR):
                second += bf[t] * E2f[own, t]
            sq = y * y - 2.0 * y * mu + second
    return sq


@njit(**LEAF)
def coord_update_diag(model, gidx_e, k, r, y, s, Lam_e, eta_e, P_Lam, P_eta, M, E2d, etau, rho, out):
    """Damped message of one entry to coordinate r of its mode-k object (diagonal covariances).

    The conditional for z_r keeps the object's other coordinates at their posterior means
    (b = sum_{q != r} x_q m_q): Gaussian Lam* = E[tau] E[x_r^2], eta* = E[tau] x_r (y - b);
    probit ``probit_coord``. Lam_e, eta_e (K, R) updated in place; out (2,) scratch.
    Returns 1 if the message was not applied, else 0.
    """
    K = gidx_e.shape[0]
    o = gidx_e[k]
    x = 1.0
    ezz = 1.0
    b = 0.0
    for q in range(M.shape[1]):
        p = 1.0
        for kk in range(K):
            if kk != k:
                p *= M[gidx_e[kk], q]
        if q == r:
            x = p
        else:
            b += p * M[o, q]
    for kk in range(K):
        if kk != k:
            ezz *= E2d[gidx_e[kk], r]
    if model == MODEL_GAUSSIAN:
        out[0] = etau * ezz
        out[1] = etau * x * (y - b)
    elif not probit_coord(
        P_Lam[o, r] - Lam_e[k, r], P_eta[o, r] - eta_e[k, r], s, x, b, ezz, model == MODEL_PROBIT_RANK1, out
    ):
        return 1
    Lam_e[k, r] = (1.0 - rho) * Lam_e[k, r] + rho * out[0]
    eta_e[k, r] = (1.0 - rho) * eta_e[k, r] + rho * out[1]
    return 0


@njit(**LEAF)
def zero_sums(PL, Pe):
    """Zero one group's object sums (``sweep_full`` with_sums): PL (n_obj, R^2), Pe (n_obj, R)."""
    for o in range(PL.shape[0]):
        for q in range(PL.shape[1]):
            PL[o, q] = 0.0
        for r in range(Pe.shape[1]):
            Pe[o, r] = 0.0


@njit(**LEAF)
def add_to_sums(e, gidx, k_lo, k_hi, Lf, eta, PL, Pe):
    """Add entry e's messages to modes k_lo..k_hi-1 (Lf (n, K R^2) flat) to its objects' sums."""
    R = eta.shape[2]
    RR = R * R
    for k in range(k_lo, k_hi):
        o = gidx[e, k]
        off = k * RR
        for q in range(RR):
            PL[o, q] += Lf[e, off + q]
        for r in range(R):
            Pe[o, r] += eta[e, k, r]


# ---------------------------------------------------------------- drivers
@njit(**PARALLEL_CACHED)
def sweep_full(
    model, gidx, y, s, Lam, eta, P_Lam, P_eta, M, E2, etau, rho, k_lo, k_hi, chunk, skipped, mat, vec,
    with_noise, alpha, beta, with_sums, part_L, part_e,
):  # fmt: skip
    """Damped messages of every entry to its objects of modes k_lo..k_hi-1, in parallel (full
    covariances); with ``with_noise`` also its Gamma noise message (as ``noise_messages_full``,
    from the same posterior, in the same pass).

    (0, K): the parallel (Jacobi) schedule, every mode from one posterior. (k, k + 1): one block
    of the block schedule; given the other modes the objects of mode k are independent, so
    updating mode k's messages and then rebuilding its objects is a block coordinate step, as in
    alternating least squares (the Jacobi step oscillates or diverges with damping near 1).
    mat (n_chunks, ENTRY_MATS, R, R), vec (n_chunks, ENTRY_VECS, R) scratch; skipped (n_chunks,)
    accumulates.

    With ``with_sums`` every chunk c also sums its entries' new messages per object into
    part_L[c] (n_obj, R, R) and part_e[c] (n_obj, R) (zeroed first; entry order), for
    ``reduce_object_sums``: the posterior then needs no second pass over the messages, which at
    rank 8 are 64 doubles per (entry, mode) and would be read again in an order the CPU cannot
    prefetch (``rebuild_full``). Chunks are fixed ranges of entries, so the sums do not depend on
    the number of threads.
    """
    n = gidx.shape[0]
    R = M.shape[1]
    RR = R * R
    LfA = Lam.reshape((Lam.shape[0], Lam.shape[1] * RR))
    E2fA = E2.reshape((E2.shape[0], RR))
    for c in prange(skipped.shape[0]):
        t = 0
        bfc = mat[c, 0].reshape(RR)
        # without sums part_L, part_e may be (1, 0, ...) placeholders; (c - c: a zero of c's
        # type, which numba may make unsigned; mixing it with a signed 0 would give a float)
        g = c if with_sums else c - c
        PLg = part_L[g].reshape((part_L.shape[1], RR))
        Peg = part_e[g]
        if with_sums:
            zero_sums(PLg, Peg)
        for e in range(c * chunk, min(n, (c + 1) * chunk)):
            sq = math.nan
            if model == MODEL_GAUSSIAN:
                sq = gaussian_entry_update(
                    e, gidx, k_lo, k_hi, y[e], LfA, eta, M, E2fA, etau, rho, bfc, with_sums, PLg, Peg
                )
            else:
                t += entry_update(
                    model, gidx[e], gidx[e], k_lo, k_hi, y[e], s[e], Lam[e], eta[e], P_Lam, P_eta, M, E2,
                    etau, rho, mat[c], vec[c],
                )  # fmt: skip
            if with_noise:
                if math.isnan(sq):
                    sq = expected_sq_error(gidx[e], y[e], M, E2)
                damp_noise_message(e, alpha, beta, rho, sq)
            if with_sums and model != MODEL_GAUSSIAN:  # (the Gaussian update adds its own)
                add_to_sums(e, gidx, k_lo, k_hi, LfA, eta, PLg, Peg)
        skipped[c] += t


#: entries whose cavities ``sweep_cavity_full`` forms side by side, the entry index innermost:
#: one R x R Cholesky factorisation is a latency-bound chain, and the loops over a batch compile
#: to SIMD code (measured at rank 8, one thread, factor and inverse: 460 ns per matrix one at a
#: time; 240 / 154 / 129 / 116 / 101 ns in batches of 8 / 16 / 32 / 64 / 128 in one sitting,
#: and 93-96 ns at 64 in another; in the whole sweep the batch size made no difference beyond
#: the host's noise)
CAVITY_BATCH = 64


@njit(**LEAF)
def batch_cavity_moments(gidx, e0, nb, skip, Lam, eta, P_Lam, P_eta, A, Lb, w, ec, Mb, E2b, ok):
    """Cavity moments of the entries e0..e0+nb-1 (nb <= B) for every mode but ``skip`` (-1: none),
    batch index innermost.

    Entry e's cavity of mode k, q(u_k) / (e's message to k), has precision P_Lam[o] - Lam[e, k]
    and shift P_eta[o] - eta[e, k] (o = gidx[e, k]); its mean goes to Mb[k, :, b] and its
    E[u u^T] = Sc + mean mean^T to E2b[k, :, :, b] (b = e - e0). A, Lb (R, R, B), w, ec (R, B)
    scratch (B = CAVITY_BATCH). ok[b] is set for the lanes b < nb whose cavities are all
    positive definite; lanes nb..B-1 factorise the identity and are not ok.
    """
    K = gidx.shape[1]
    R = P_eta.shape[1]
    B = A.shape[2]
    for b in range(B):
        ok[b] = b < nb
    # every mode's cavity precision (its lower triangle: all that batch_cholesky reads) into
    # E2b[k] and shift into Mb[k], entry by entry: each entry's messages are read in memory order
    for b in range(nb):
        e = e0 + b
        for kk in range(K):
            if kk == skip:
                continue
            o = gidx[e, kk]
            for i in range(R):
                Mb[kk, i, b] = P_eta[o, i] - eta[e, kk, i]
                for j in range(i + 1):
                    E2b[kk, i, j, b] = P_Lam[o, i, j] - Lam[e, kk, i, j]
    for kk in range(K):
        if kk == skip:
            continue
        for b in range(nb, B):
            for i in range(R):
                Mb[kk, i, b] = 0.0
                for j in range(i + 1):
                    E2b[kk, i, j, b] = 1.0 if i == j else 0.0
        batch_cholesky(E2b[kk], Lb, w, ok)
        batch_cholesky_inverse(Lb, w, A)  # Lb <- Sc
        for i in range(R):
            for b in range(B):
                ec[i, b] = Mb[kk, i, b]
        for i in range(R):
            for b in range(B):
                Mb[kk, i, b] = 0.0
        for j in range(R):
            for i in range(R):
                for b in range(B):
                    Mb[kk, i, b] += Lb[i, j, b] * ec[j, b]
        for i in range(R):
            for j in range(R):
                for b in range(B):
                    E2b[kk, i, j, b] = Lb[i, j, b] + Mb[kk, i, b] * Mb[kk, j, b]


@njit(**LEAF)
def gaussian_batch_messages(
    gidx, e0, nb, k_lo, k_hi, y, Lf, eta, Mb, E2bf, P, etau, rho, ok, with_sums, PL, Pe
):
    """cp_gaussian messages of the entries e0..e0+nb-1 to modes k_lo..k_hi-1 from their cavity
    moments (``batch_cavity_moments``; E2bf (K, R^2, B) its E2b flat), damped in place as in
    ``entry_update``: Lam <- (1 - rho) Lam + rho E[tau] Hadamard_{k' != k} E2b[k'], eta <- (1 -
    rho) eta + rho y E[tau] Hadamard_{k' != k} Mb[k'].

    Lanes that are not ok are left alone. Lf (n, K R^2) is Lam flat; P (R^2, B) scratch; with
    ``with_sums`` each new message is also added to the object sums PL (n_obj, R^2), Pe (n_obj,
    R) (as ``sweep_full``). Returns the number of messages not applied.
    """
    K = gidx.shape[1]
    R = eta.shape[2]
    RR = R * R
    B = P.shape[1]
    skipped = 0
    for b in range(nb):
        if not ok[b]:
            skipped += k_hi - k_lo
    for k in range(k_lo, k_hi):
        for t in range(RR):
            for b in range(B):
                P[t, b] = 1.0
        for kk in range(K):
            if kk != k:
                for t in range(RR):
                    for b in range(B):
                        P[t, b] *= E2bf[kk, t, b]
        off = k * RR
        for b in range(nb):
            if not ok[b]:
                continue
            e = e0 + b
            own = gidx[e, k]
            for t in range(RR):
                v = (1.0 - rho) * Lf[e, off + t] + rho * (etau * P[t, b])
                Lf[e, off + t] = v
                if with_sums:
                    PL[own, t] += v
            for r in range(R):
                p = 1.0
                for kk in range(K):
                    if kk != k:
                        p *= Mb[kk, r, b]
                v = (1.0 - rho) * eta[e, k, r] + rho * (y[e] * etau * p)
                eta[e, k, r] = v
                if with_sums:
                    Pe[own, r] += v
    return skipped


@njit(**PARALLEL_CACHED)
def sweep_cavity_full(
    model, gidx, y, s, Lam, eta, P_Lam, P_eta, M, E2, etau, rho, k_lo, k_hi, chunk, skipped, mat, vec,
    Mc, E2c, cmat, cvec, Mb, E2b, okb, with_noise, alpha, beta, with_sums, part_L, part_e,
):  # fmt: skip
    """``sweep_full`` with the other modes' moments under each entry's cavity, full covariances,
    in parallel over fixed chunks of entries.

    The message of entry e to mode k takes Ez = Hadamard_{k' != k} of the means and Ezz =
    Hadamard_{k' != k} of E[u u^T] of e's cavities q(u_k') / (e's message to k') (and, for
    cp_probit, mode k's own cavity as always), so that an entry's messages do not feed on each
    other. The cavities are formed CAVITY_BATCH entries at a time (``batch_cavity_moments``); an
    entry with a cavity that is not positive definite gets no new message (all counted in
    skipped). A single-mode step (block schedule) skips its own mode's cavity, which it never
    reads. cp_gaussian uses E[tau] = etau and, with ``with_noise``, its noise messages from the
    posterior M, E2 (as ``noise_messages_full``).

    Scratch per chunk c: mat, vec as ``sweep_full``; Mc (K, R), E2c (K, R, R) one entry's cavity
    moments (cp_probit); cmat (2, R, R, B), cvec (2, R, B), Mb (K, R, B), E2b (K, R, R, B), okb
    (B,) the batch's. with_sums, part_L, part_e as ``sweep_full``.
    """
    n = gidx.shape[0]
    K = gidx.shape[1]
    R = M.shape[1]
    RR = R * R
    B = okb.shape[1]
    skip = k_lo if k_hi - k_lo == 1 else -1
    LfA = Lam.reshape((Lam.shape[0], K * RR))
    idx = np.arange(K)  # (rows of one entry's cavity moments Mc[c], E2c[c]: see entry_update)
    for c in prange(skipped.shape[0]):
        A, Lb, w, ec = cmat[c, 0], cmat[c, 1], cvec[c, 0], cvec[c, 1]
        P = cmat[c, 1].reshape((RR, B))  # (Lb once the cavities are formed)
        Mbc, E2bc, ok = Mb[c], E2b[c], okb[c]
        E2bf = E2bc.reshape((K, RR, B))
        g = c if with_sums else c - c  # (as sweep_full)
        PLg = part_L[g].reshape((part_L.shape[1], RR))
        Peg = part_e[g]
        if with_sums:
            zero_sums(PLg, Peg)
        t = 0
        e_end = min(n, (c + 1) * chunk)
        for e0 in range(c * chunk, e_end, B):
            nb = min(B, e_end - e0)
            batch_cavity_moments(gidx, e0, nb, skip, Lam, eta, P_Lam, P_eta, A, Lb, w, ec, Mbc, E2bc, ok)
            if model == MODEL_GAUSSIAN:
                t += gaussian_batch_messages(
                    gidx, e0, nb, k_lo, k_hi, y, LfA, eta, Mbc, E2bf, P, etau, rho, ok, with_sums, PLg, Peg
                )
            else:
                for b in range(nb):
                    if not ok[b]:
                        t += k_hi - k_lo
                        continue
                    e = e0 + b
                    for kk in range(K):
                        for i in range(R):
                            Mc[c, kk, i] = Mbc[kk, i, b]
                            for j in range(R):
                                E2c[c, kk, i, j] = E2bc[kk, i, j, b]
                    t += entry_update(
                        model, gidx[e], idx, k_lo, k_hi, y[e], s[e], Lam[e], eta[e], P_Lam, P_eta, Mc[c],
                        E2c[c], etau, rho, mat[c], vec[c],
                    )  # fmt: skip
                    if with_sums:
                        add_to_sums(e, gidx, k_lo, k_hi, LfA, eta, PLg, Peg)
            if with_noise:
                for e in range(e0, e0 + nb):
                    damp_noise_message(e, alpha, beta, rho, expected_sq_error(gidx[e], y[e], M, E2))
        skipped[c] += t


@njit(**PARALLEL_CACHED)
def noise_messages_full(gidx, y, alpha, beta, M, E2, rho):
    """Damped Gamma messages (shape 1/2, rate E[(y - f)^2] / 2) of every entry, in parallel."""
    for e in prange(gidx.shape[0]):
        damp_noise_message(e, alpha, beta, rho, expected_sq_error(gidx[e], y[e], M, E2))


@njit(**PARALLEL_CACHED)
def chunk_sums(alpha, beta, chunk, out):
    """out[c] = (sum of alpha, sum of beta) over the entries of chunk c: with a fixed chunk the
    noise posterior's sums do not depend on the thread count or on memory alignment."""
    n = alpha.shape[0]
    for c in prange(out.shape[0]):
        a = 0.0
        b = 0.0
        for e in range(c * chunk, min(n, (c + 1) * chunk)):
            a += alpha[e]
            b += beta[e]
        out[c, 0] = a
        out[c, 1] = b


@njit(**PARALLEL_CACHED)
def sweep_diag_coord(model, gidx, y, s, Lam, eta, P_Lam, P_eta, M, E2d, etau, rho, k, r, chunk, skipped, out):
    """Damped messages of every entry to coordinate r of its mode-k object, in parallel.

    One block of the diagonal schedule: the objects of mode k are conditionally independent
    given the other modes and coordinates, so updating (k, r) for all entries and then rebuilding
    those objects (``rebuild_diag_coord``) is a block coordinate step (updating all coordinates
    at once from the same means is a Jacobi step, which diverges when coordinates are coupled).
    skipped (n_chunks,) receives counts; out (n_chunks, 2) scratch.
    """
    n = gidx.shape[0]
    for c in prange(skipped.shape[0]):
        t = 0
        for e in range(c * chunk, min(n, (c + 1) * chunk)):
            t += coord_update_diag(
                model, gidx[e], k, r, y[e], s[e], Lam[e], eta[e], P_Lam, P_eta, M, E2d, etau, rho, out[c]
            )
        skipped[c] += t


@njit(**PARALLEL_CACHED)
def noise_messages_diag(gidx, y, alpha, beta, M, E2d, rho):
    """Damped Gamma messages (shape 1/2, rate E[(y - f)^2] / 2) of every entry, in parallel."""
    for e in prange(gidx.shape[0]):
        damp_noise_message(e, alpha, beta, rho, expected_sq_error_diag(gidx[e], y[e], M, E2d))


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


@njit(**LEAF)
def start_from_prior(prior_Lam_o, prior_eta_o, P_Lam_o, P_eta_o):
    """P_Lam_o, P_eta_o <- the object's prior; returns P_Lam_o as a flat R^2 view, to which the
    caller adds the whole R x R message blocks (flat loops that compile to SIMD code)."""
    R = P_eta_o.shape[0]
    Po = P_Lam_o.reshape(R * R)
    pr = prior_Lam_o.reshape(R * R)
    for t in range(R * R):
        Po[t] = pr[t]
    for i in range(R):
        P_eta_o[i] = prior_eta_o[i]
    return Po


@njit(**LEAF)
def finish_object(P_Lam_o, P_eta_o, M_o, S_o, E2_o, L):
    """Mirror the lower triangle of the summed precision (the messages are symmetric up to
    rounding; the posterior precision is then exactly symmetric) and compute the moments
    (``object_moments``); False if not positive definite."""
    R = P_eta_o.shape[0]
    for i in range(R):
        for j in range(i):
            P_Lam_o[j, i] = P_Lam_o[i, j]
    return object_moments(P_Lam_o, P_eta_o, M_o, S_o, E2_o, L)


@njit(**PARALLEL_CACHED)
def rebuild_full(
    ptr, ent, obj_mode, lo, hi, Lam, eta, prior_Lam, prior_eta, P_Lam, P_eta, M, S, E2, obj_chunk, Ls, bad
):
    """Posterior of every object = its prior (prior_Lam (n_obj, R, R), prior_eta (n_obj, R)) + its
    messages (CSR order), then its moments.

    Objects lo..hi-1 only (all: 0, n_obj). ptr (n_obj + 1,), ent (n * K,) entry ids grouped by
    object; Ls (>= n_obj_chunks, R, R) scratch; bad (n_obj,) set to 1 where the posterior
    precision is not positive definite. The R x R blocks are summed whole, then the lower
    triangle of the sum is mirrored (``start_from_prior``, ``finish_object``).
    """
    R = M.shape[1]
    RR = R * R
    K = Lam.shape[1]
    Lf = Lam.reshape((Lam.shape[0], K, RR))
    for c in prange(-(-(hi - lo) // obj_chunk)):
        L = Ls[c]
        for o in range(lo + c * obj_chunk, min(hi, lo + (c + 1) * obj_chunk)):
            k = obj_mode[o]
            Po = start_from_prior(prior_Lam[o], prior_eta[o], P_Lam[o], P_eta[o])
            # (whole blocks: a block's rows are cache lines, read whole anyway)
            for idx in range(ptr[o], ptr[o + 1]):
                e = ent[idx]
                Le = Lf[e, k]
                for t in range(RR):
                    Po[t] += Le[t]
                for i in range(R):
                    P_eta[o, i] += eta[e, k, i]
            bad[o] = 0 if finish_object(P_Lam[o], P_eta[o], M[o], S[o], E2[o], L) else 1


@njit(**PARALLEL_CACHED)
def reduce_object_sums(prior_Lam, prior_eta, part_L, part_e, P_Lam, P_eta, M, S, E2, obj_chunk, Ls, bad):
    """Posterior of every object = prior + the per-chunk message sums of
    ``sweep_full(with_sums)`` over all modes, added in chunk order (fixed: the result does not
    depend on the number of threads), then its moments as ``rebuild_full`` (the lower triangle
    of the sum mirrored; bad[o] = 1 where not positive definite)."""
    R = M.shape[1]
    RR = R * R
    G = part_L.shape[0]
    n_obj = M.shape[0]
    for c in prange(-(-n_obj // obj_chunk)):
        L = Ls[c]
        for o in range(c * obj_chunk, min(n_obj, (c + 1) * obj_chunk)):
            Po = start_from_prior(prior_Lam[o], prior_eta[o], P_Lam[o], P_eta[o])
            for g in range(G):
                pg = part_L[g, o].reshape(RR)
                for t in range(RR):
                    Po[t] += pg[t]
                for i in range(R):
                    P_eta[o, i] += part_e[g, o, i]
            bad[o] = 0 if finish_object(P_Lam[o], P_eta[o], M[o], S[o], E2[o], L) else 1


@njit(**PARALLEL_CACHED)
def rebuild_diag(ptr, ent, obj_mode, Lam, eta, prior_Lam, prior_eta, P_Lam, P_eta, M, S, E2, bad):
    """Diagonal variant of ``rebuild_full``: all blocks are (R,)."""
    n_obj, R = M.shape
    for o in prange(n_obj):
        k = obj_mode[o]
        for r in range(R):
            P_Lam[o, r] = prior_Lam[o, r]
            P_eta[o, r] = prior_eta[o, r]
        for idx in range(ptr[o], ptr[o + 1]):
            e = ent[idx]
            for r in range(R):
                P_Lam[o, r] += Lam[e, k, r]
                P_eta[o, r] += eta[e, k, r]
        ok = True
        for r in range(R):
            ok = ok and P_Lam[o, r] > 0.0
            S[o, r] = 1.0 / P_Lam[o, r]
            M[o, r] = P_eta[o, r] * S[o, r]
            E2[o, r] = S[o, r] + M[o, r] * M[o, r]
        bad[o] = 0 if ok else 1


@njit(**PARALLEL_CACHED)
def rebuild_diag_coord(ptr, ent, lo, hi, k, r, Lam, eta, prior_Lam, prior_eta, P_Lam, P_eta, M, S, E2, bad):
    """Coordinate r of objects lo..hi-1 (all of mode k) = prior + their messages; bad as in rebuild."""
    for o in prange(lo, hi):
        pl = prior_Lam[o, r]
        pe = prior_eta[o, r]
        for idx in range(ptr[o], ptr[o + 1]):
            e = ent[idx]
            pl += Lam[e, k, r]
            pe += eta[e, k, r]
        P_Lam[o, r] = pl
        P_eta[o, r] = pe
        S[o, r] = 1.0 / pl
        M[o, r] = pe / pl
        E2[o, r] = S[o, r] + M[o, r] * M[o, r]
        bad[o] = 0 if pl > 0.0 else 1


# ---------------------------------------------------------------- prediction
@njit(**PARALLEL_CACHED)
def predict_mean(gidx, M, out_mean):
    """Predictive mean 1.(Hadamard_k m_k) of f at each entry (gauge invariant, used for convergence)."""
    n = gidx.shape[0]
    for e in prange(n):
        mu = 0.0
        for r in range(M.shape[1]):
            p = 1.0
            for k in range(gidx.shape[1]):
                p *= M[gidx[e, k], r]
            mu += p
        out_mean[e] = mu


@njit(**PARALLEL_CACHED)
def predict_full(gidx, M, E2, out_mean, out_var):
    """Predictive mean 1.(Hadamard_k m_k) and exact Var f = sum(Hadamard_k E[u u^T]) - mean^2."""
    n = gidx.shape[0]
    for e in prange(n):
        out_mean[e] = 0.0
        out_var[e] = 0.0
        mu = 0.0
        K = gidx.shape[1]
        R = M.shape[1]
        for r in range(R):
            p = 1.0
            for k in range(K):
                p *= M[gidx[e, k], r]
            mu += p
        second = expected_sq_error(gidx[e], 0.0, M, E2)
        out_mean[e] = mu
        out_var[e] = max(second - mu * mu, 0.0)


@njit(**PARALLEL_CACHED)
def predict_diag(gidx, M, E2d, out_mean, out_var):
    """Diagonal variant of ``predict_full``."""
    n = gidx.shape[0]
    for e in prange(n):
        K = gidx.shape[1]
        R = M.shape[1]
        mu = 0.0
        for r in range(R):
            p = 1.0
            for k in range(K):
                p *= M[gidx[e, k], r]
            mu += p
        out_mean[e] = mu
        out_var[e] = max(expected_sq_error_diag(gidx[e], 0.0, M, E2d) - mu * mu, 0.0)


@njit(**PARALLEL_CACHED)
def probit_predictive(mean, var, out_p, out_logp, y_sign):
    """P(y = 1) = Phi(mean / sqrt(1 + var)); log P(y) too when y_sign (+-1) is given."""
    n = mean.shape[0]
    with_y = y_sign.shape[0] == n
    for e in prange(n):
        z = mean[e] / math.sqrt(1.0 + var[e])
        out_p[e] = math.exp(log_ndtr(z))
        if with_y:
            out_logp[e] = log_ndtr(y_sign[e] * z)


# ---------------------------------------------------------------- sequential schedule
@njit(**SERIAL)
def sequential_full(
    model,
    order,
    gidx,
    y,
    s,
    Lam,
    eta,
    alpha,
    beta,
    P_Lam,
    P_eta,
    M,
    S,
    E2,
    noise,
    fix_tau,
    rho,
    mat,
    vec,
    old_L,
    old_e,
    Ltmp,
):
    """Entries in ``order``; after each entry its K objects (and the noise posterior) are refreshed.

    noise: (3,) array [a, b, E tau], updated in place (E tau only if not ``fix_tau``).
    old_L (K, R, R), old_e (K, R), Ltmp (R, R) scratch. Returns the number of messages not applied.
    """
    K = gidx.shape[1]
    R = M.shape[1]
    skipped = 0
    for ii in range(order.shape[0]):
        e = order[ii]
        old_L[:, :, :] = Lam[e]
        old_e[:, :] = eta[e]
        skipped += entry_update(
            model, gidx[e], gidx[e], 0, K, y[e], s[e], Lam[e], eta[e], P_Lam, P_eta, M, E2, noise[2], rho,
            mat, vec,
        )  # fmt: skip
        if model == MODEL_GAUSSIAN:
            new_b = (1.0 - rho) * beta[e] + rho * 0.5 * expected_sq_error(gidx[e], y[e], M, E2)
            new_a = (1.0 - rho) * alpha[e] + rho * 0.5
            noise[0] += new_a - alpha[e]
            noise[1] += new_b - beta[e]
            if not fix_tau:
                noise[2] = noise[0] / noise[1]
            alpha[e] = new_a
            beta[e] = new_b
        for k in range(K):
            o = gidx[e, k]
            for i in range(R):
                P_eta[o, i] += eta[e, k, i] - old_e[k, i]
                for j in range(R):
                    P_Lam[o, i, j] += Lam[e, k, i, j] - old_L[k, i, j]
            if not object_moments(P_Lam[o], P_eta[o], M[o], S[o], E2[o], Ltmp):
                # cannot happen with positive semi-definite messages; undo to stay proper
                for i in range(R):
                    P_eta[o, i] -= eta[e, k, i] - old_e[k, i]
                    eta[e, k, i] = old_e[k, i]
                    for j in range(R):
                        P_Lam[o, i, j] -= Lam[e, k, i, j] - old_L[k, i, j]
                        Lam[e, k, i, j] = old_L[k, i, j]
                object_moments(P_Lam[o], P_eta[o], M[o], S[o], E2[o], Ltmp)
                skipped += 1
    return skipped


@njit(**SERIAL)
def sequential_diag(
    model, order, gidx, y, s, Lam, eta, alpha, beta, P_Lam, P_eta, M, S, E2, noise, fix_tau, rho, out
):
    """Entries in ``order``; each coordinate's object is refreshed right after its message.

    noise: (3,) [a, b, E tau] updated in place (E tau only if not ``fix_tau``); out (2,) scratch.
    Returns the number of messages not applied.
    """
    K = gidx.shape[1]
    R = M.shape[1]
    skipped = 0
    for ii in range(order.shape[0]):
        e = order[ii]
        for k in range(K):
            o = gidx[e, k]
            for r in range(R):
                old_L = Lam[e, k, r]
                old_e = eta[e, k, r]
                if coord_update_diag(
                    model, gidx[e], k, r, y[e], s[e], Lam[e], eta[e], P_Lam, P_eta, M, E2, noise[2], rho, out
                ):
                    skipped += 1
                    continue
                P_Lam[o, r] += Lam[e, k, r] - old_L
                P_eta[o, r] += eta[e, k, r] - old_e
                S[o, r] = 1.0 / P_Lam[o, r]
                M[o, r] = P_eta[o, r] * S[o, r]
                E2[o, r] = S[o, r] + M[o, r] * M[o, r]
        if model == MODEL_GAUSSIAN:
            new_b = (1.0 - rho) * beta[e] + rho * 0.5 * expected_sq_error_diag(gidx[e], y[e], M, E2)
            new_a = (1.0 - rho) * alpha[e] + rho * 0.5
            noise[0] += new_a - alpha[e]
            noise[1] += new_b - beta[e]
            if not fix_tau:
                noise[2] = noise[0] / noise[1]
            alpha[e] = new_a
            beta[e] = new_b
    return skipped
