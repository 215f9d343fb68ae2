"""Messages of one CP entry (DESIGN.md section 3.2): Gaussian, probit and any likelihood of the
seam (``kernels.likelihoods``), full and diagonal.

The leaves that turn an entry's moments into its damped messages to its objects; the model
codes that select them. Drivers that loop over entries are in ``schedules`` and ``cavity``.

A likelihood of the seam (MODEL_GENERIC) reaches the drivers as three trailing arguments
``lik, nodes, weights`` (its NamedTuple and a Gauss-Hermite rule), which the hand-written models
leave out. The branches of the other kind are resolved to stubs at compile time by that
argument's type (``by_likelihood``): a driver of the hand-written models compiles no generic
message, and a driver of a likelihood (one per likelihood class, serving the generic models)
compiles no probit or Gaussian message. Measured (``python -m bench.compile_cost``, BENCHMARKS.md
"Compilation"): the dead branches cost seconds of compilation per likelihood class.
"""

import math

from numba import njit, types
from numba.extending import overload

from .._config import LEAF, LEAF_SUMS
from ..likelihoods import not_log_concave
from ..linalg import cholesky, tri_inverse
from ..special import finite, inv_mills
from .moments import other_modes_moments
from .tilted import cp_tilted

__all__ = [
    "probit_message",
    "probit_rank_one",
    "probit_coord",
    "rank_one_message",
    "whiten_cavity",
    "generic_message",
    "generic_coord",
    "damp_noise_message",
    "entry_update",
    "gaussian_entry_update",
    "coord_update_diag",
    "MODEL_GAUSSIAN",
    "MODEL_PROBIT",
    "MODEL_PROBIT_RANK1",
    "MODEL_GENERIC",
    "PROBIT_MATS",
    "PROBIT_VECS",
    "ENTRY_MATS",
    "ENTRY_VECS",
]


MODEL_GAUSSIAN = 0
MODEL_PROBIT = 1
#: cp_probit with the rank-one curvature (``probit_message`` with ``rank1``)
MODEL_PROBIT_RANK1 = 2
#: any likelihood of the seam through its ``tilted`` moments (``generic_message``, ``generic_coord``)
MODEL_GENERIC = 3


def _left_out(lik):
    """Whether the likelihood argument's type says it was left out (a hand-written model)."""
    return lik is None or isinstance(lik, (types.NoneType, types.Omitted))


def by_likelihood(leaf, stub, generic):
    """A stand-in for ``leaf`` with the likelihood as first argument, resolved at compile time by
    its type: for ``generic`` (``leaf`` serves the seam's likelihoods) ``leaf(lik, ...)`` when a
    likelihood is given and ``stub`` when it is left out; otherwise (a hand-written message)
    ``leaf(...)`` when it is left out and ``stub`` when it is given. A driver compiles the
    messages of its own models only: the others' would be dead code that costs seconds of
    compilation per likelihood class (in compiled code only)."""

    def call(lik, *args):
        raise TypeError(f"{leaf.__name__}'s stand-in is resolved by numba inside compiled code")

    @overload(call, jit_options=LEAF)
    def _call(lik, *args):
        if _left_out(lik) == generic:
            return lambda lik, *args: stub
        if generic:
            return lambda lik, *args: leaf(lik, *args)
        return lambda lik, *args: leaf(*args)

    call.__name__ = call.__qualname__ = f"{leaf.__name__}_by_likelihood"
    return call


# ---------------------------------------------------------------- probit message (full)
#: scratch of ``probit_message``: R x R matrices and R-vectors
PROBIT_MATS = 6
PROBIT_VECS = 3


@njit(**LEAF)
def whiten_cavity(Lc, ec, Ez, Ezz, mat, vec, c0, full):
    """The cavity (Lc, ec) of one (entry, mode) in its whitened coordinates, and what the
    messages need of E[z], E[z z^T] there: with Lc = L L^T, W = L^{-1} (Sc = W^T W),
    v = W Ez, w = W ec, T = W Ezz and B_z = T W^T (its lower half with ``full``, else only
    its diagonal), returns (ok, vv, vw, c): vv = |v|^2 = Ez^T Sc Ez, vw = v.w = Ez.mc and
    c = c0 + tr(B_z) = c0 + tr(Sc Ezz) (summed onto c0 in that order). ok is False (and the
    rest undefined) if the cavity is not positive definite. L, W, T, B_z go to mat[0..3], v, w
    to vec[0], vec[1] (``probit_message``'s scratch)."""
    R = Ez.shape[0]
    L, W, T = mat[0], mat[1], mat[2]
    B = mat[3]
    v, w = vec[0], vec[1]
    if not cholesky(Lc, L):
        return False, 0.0, 0.0, 0.0
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
    # T = W Ezz; B_z = T W^T (lower half; without ``full`` only its diagonal), c = c0 + tr(B_z)
    for i in range(R):
        for j in range(R):
            T[i, j] = 0.0
        for k in range(i + 1):
            wik = W[i, k]
            for j in range(R):
                T[i, j] += wik * Ezz[k, j]
    c = c0
    for i in range(R):
        for j in range(0 if full else i, i + 1):
            t = 0.0
            for k in range(j + 1):
                t += T[i, k] * W[j, k]
            B[i, j] = t
        c += B[i, i]
    return True, vv, vw, c


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
    W, T, B = mat[1], mat[2], mat[3]
    L2, F = mat[4], mat[5]
    v, w, m = vec[0], vec[1], vec[2]
    ok, vv, vw, c = whiten_cavity(Lc, ec, Ez, Ezz, mat, vec, 1.0, not rank1)
    if not ok:
        return 0
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
            ok = ok and finite(t)
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
    lam = b vv: Lam* = b / (1 - lam) Ez Ez^T, eta* = g' Ez + b / (1 - lam) (vw + g' vv) Ez
    (``rank_one_message`` with the probit's alpha = g' and beta = b).
    Returns False if that message is not valid (not b > 0, lam >= 1, zero or not finite)."""
    isc = 1.0 / math.sqrt(c)
    u = s * vw * isc
    r = inv_mills(u)
    gs = s * r * isc
    return rank_one_message(gs, gs * gs + r * u / c, Ez, vv, vw, Lmsg, emsg)


@njit(**LEAF)
def rank_one_message(alpha, beta, Ez, vv, vw, Lmsg, emsg, signed=False):
    """The CEP-1 message of an entry whose likelihood reaches the object's u through
    a = u.E[z] only, from the derivatives of the one-dimensional tilted's log Z in the mean of a,
    alpha = d log Z / dm and beta = -d^2 log Z / dm^2 (``likelihoods.tilted``).

    Cavity N(u | mc, Sc); vv = Ez^T Sc Ez, vw = Ez.mc. The tilted mean is mc + alpha Sc Ez and its
    covariance Sc - beta Sc Ez Ez^T Sc (g = alpha Ez, A = beta Ez Ez^T), so by Sherman-Morrison,
    with lam = beta vv: Lam* = beta / (1 - lam) Ez Ez^T, eta* = alpha Ez + beta / (1 - lam)
    (vw + alpha vv) Ez. Returns False if that message is not valid (not beta > 0, lam >= 1: a
    tilted covariance that is not positive definite; zero or not finite). For a log-concave
    likelihood 0 < beta < 1 / v for the tilted's variance v, so a v >= vv gives a valid message.

    With ``signed`` (a likelihood that may not be log-concave: ``likelihoods.not_log_concave``) a
    negative beta gives a valid message too, of negative semi-definite precision, as EP defines
    it: an outlier's tilted variance of a exceeds its cavity's (the tilted covariance Sc - beta
    Sc Ez Ez^T Sc is then larger than the cavity's, and positive definite). A sequential update
    keeps the object proper (a convex combination of two proper posteriors of the cavity); a
    parallel sweep's sum may not, and the engine guards it (``posterior.restore_objects``,
    ``mark_shrunk``). Lmsg (R, R), emsg (R,) receive it."""
    R = Ez.shape[0]
    lam = beta * vv
    if not ((beta > 0.0 or (signed and beta < 0.0)) and lam < 1.0):
        return False
    scale = beta / (1.0 - lam)
    proj = scale * (vw + alpha * vv)
    big = 0.0
    for i in range(R):
        for j in range(R):
            Lmsg[i, j] = scale * Ez[i] * Ez[j]
        emsg[i] = alpha * Ez[i] + proj * Ez[i]
        big = max(big, abs(Lmsg[i, i]))
    return big > 0.0 and finite(scale) and finite(proj)


@njit(**LEAF)
def generic_message(lik, y, Lc, ec, Ez, Ezz, Lmsg, emsg, mat, vec, nodes, weights):
    """CEP-1 message of one (entry, mode) for any likelihood of the seam (full covariances).

    Given the other modes' moments E[z], E[z z^T] the entry's likelihood p(y | a) depends on the
    object's u through a = u.z; under the cavity N(u | mc, Sc) (Sc = Lc^{-1}, mc = Sc ec), a has
    mean m_a = E[z].mc and, as in the probit message, variance v_a = tr(Sc E[z z^T]). The
    likelihood's tilted p(y | a) N(a | m_a, v_a) gives (alpha, beta) (``tilted.cp_tilted``: a
    closed form or Gauss-Hermite with ``nodes``, ``weights``), and the message is the rank-one
    ``rank_one_message`` (signed for a likelihood that may not be log-concave). cp_probit's
    rank-one message (``probit_rank_one``) is this one with the probit's closed form. mat (>= 4,
    R, R), vec (>= 2, R) C-contiguous scratch. Returns True if the message (Lmsg, emsg) is valid.
    """
    ok, vv, vw, v_a = whiten_cavity(Lc, ec, Ez, Ezz, mat, vec, 0.0, False)
    if not ok:
        return False
    log_z, alpha, beta = cp_tilted(lik, y, vw, v_a, nodes, weights)
    return rank_one_message(alpha, beta, Ez, vv, vw, Lmsg, emsg, not_log_concave(lik))


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
        if a > 0.0 and a < 1.0 and t_new > 0.0 and finite(t_new) and finite(n_new):
            out[0] = t_new
            out[1] = n_new
            return True
    return False


@njit(**LEAF)
def generic_coord(lik, y, tc, nc, x, b, ezz, nodes, weights, out):
    """CEP-1 message of one entry to one coordinate z_r of a diagonal-covariance object, for any
    likelihood of the seam (``probit_coord``'s rank-one rule with the likelihood's tilted).

    f = x z_r + b (x = E[prod of the other modes' coordinate r], b the rest of f at the posterior
    means), cavity N(mc, vc) = (nc / tc, 1 / tc); the tilted of f has m_a = x mc + b and
    v_a = ezz vc, whose (alpha, beta) (``tilted.cp_tilted``) give the tilted mean mc + vc x alpha
    and variance vc (1 - a), a = vc x^2 beta. out (2,) receives (precision, precision x mean);
    returns False if no valid message exists (0 < a < 1 fails: not applied; for a likelihood that
    may not be log-concave a < 0 is valid too, a negative precision: ``rank_one_message``).
    """
    if not tc > 0.0:
        return False
    vc = 1.0 / tc
    mc = nc * vc
    log_z, alpha, beta = cp_tilted(lik, y, x * mc + b, ezz * vc, nodes, weights)
    a = vc * x * x * beta
    inv = 1.0 / (1.0 - a)
    t_new = tc * a * inv
    n_new = (alpha * x + nc * a) * inv
    signed = not_log_concave(lik) and a < 0.0
    if (signed or (a > 0.0 and t_new > 0.0)) and a < 1.0 and finite(t_new) and finite(n_new):
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


# the messages each driver compiles: its own models' only (``by_likelihood``)
_probit_message = by_likelihood(probit_message, 0, generic=False)
_generic_message = by_likelihood(generic_message, False, generic=True)
_probit_coord = by_likelihood(probit_coord, False, generic=False)
_generic_coord = by_likelihood(generic_coord, False, generic=True)


# ---------------------------------------------------------------- one entry, all modes
#: scratch of ``entry_update``: R x R matrices and R-vectors (its own three of each + the probit's)
ENTRY_MATS = 3 + PROBIT_MATS
ENTRY_VECS = 3 + PROBIT_VECS


@njit(**LEAF)
def entry_update(
    model, gidx_e, mom_e, k_lo, k_hi, y, s, Lam_e, eta_e, P_Lam, P_eta, M, E2, etau, rho, mat, vec,
    lik=None, nodes=None, weights=None,
):  # fmt: skip
    """New damped messages of one entry to its objects of modes k_lo..k_hi-1 (full R x R blocks).

    The other modes' moments are M[mom_e[k']], E2[mom_e[k']]: mom_e = gidx_e takes them from the
    posterior; ``sweep_cavity_full`` passes one entry's cavity moments (mom_e = 0..K-1).

    Lam_e (K, R, R), eta_e (K, R): the entry's messages, updated in place. mat (ENTRY_MATS, R, R)
    and vec (ENTRY_VECS, R) C-contiguous scratch. A probit message that the paper's expected
    quadratic form makes indefinite (a misclassified entry, u < 0, whose other modes are
    uncertain) is replaced by the plain first-order step (``probit_message``). MODEL_GENERIC:
    the likelihood ``lik`` of the value y through its tilted moments (``generic_message``, with
    the Gauss-Hermite rule ``nodes``, ``weights``; left out for the other models). Returns the
    number of messages not applied.
    """
    R = M.shape[1]
    Ezz, Lc, Lmsg = mat[0], mat[1], mat[2]
    Ez, ec, emsg = vec[0], vec[1], vec[2]
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
            if model == MODEL_GENERIC:
                ok = _generic_message(lik, y, Lc, ec, Ez, Ezz, Lmsg, emsg, mat[3:], vec[3:], nodes, weights)
            else:
                rank1 = model == MODEL_PROBIT_RANK1
                ok = _probit_message(lik, Lc, ec, s, Ez, Ezz, Lmsg, emsg, mat[3:], vec[3:], True, rank1) > 0
        if ok:
            for i in range(R):
                eta_e[k, i] = (1.0 - rho) * eta_e[k, i] + rho * emsg[i]
                for j in range(R):
                    Lam_e[k, i, j] = (1.0 - rho) * Lam_e[k, i, j] + rho * Lmsg[i, j]
        else:
            skipped += 1
    return skipped


@njit(**LEAF_SUMS)
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
def coord_update_diag(
    model, gidx_e, k, r, y, s, Lam_e, eta_e, P_Lam, P_eta, M, E2d, etau, rho, out, lik=None, nodes=None,
    weights=None,
):  # fmt: skip
    """Damped message of one entry to coordinate r of its mode-k object (diagonal covariances).

    The conditional for z_r keeps the object's other coordinates at their posterior means
    (b = sum_{q != r} x_q m_q): Gaussian Lam* = E[tau] E[x_r^2], eta* = E[tau] x_r (y - b);
    probit ``probit_coord``; MODEL_GENERIC ``generic_coord`` (lik, nodes, weights as
    ``entry_update``). Lam_e, eta_e (K, R) updated in place; out (2,) scratch.
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
    elif model == MODEL_GENERIC:
        if not _generic_coord(
            lik, y, P_Lam[o, r] - Lam_e[k, r], P_eta[o, r] - eta_e[k, r], x, b, ezz, nodes, weights, out
        ):
            return 1
    elif not _probit_coord(
        lik, P_Lam[o, r] - Lam_e[k, r], P_eta[o, r] - eta_e[k, r], s, x, b, ezz, model == MODEL_PROBIT_RANK1,
        out,
    ):  # fmt: skip
        return 1
    Lam_e[k, r] = (1.0 - rho) * Lam_e[k, r] + rho * out[0]
    eta_e[k, r] = (1.0 - rho) * eta_e[k, r] + rho * out[1]
    return 0
