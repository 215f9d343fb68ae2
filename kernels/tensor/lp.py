"""Laplace propagation (LP) messages for Bayesian CP decomposition (the paper's section 5.2 baseline).

Same message store and schedules as CEP (``kernels.tensor``; full covariances, parallel or block
schedule); only the way the K messages of an entry are computed differs. Entry e with value y
touches the objects o_1..o_K; with the cavities N(u_k; Lc_k^{-1} ec_k, Lc_k^{-1}) (posterior
minus the entry's messages) the tilted distribution over the joint x = (u_1, ..., u_K) in R^{K R} is

    p~(x) ∝ prod_k N(u_k; cavity_k) f(y | f_e),   f_e = 1^T (u_1 ∘ ... ∘ u_K),
    phi(x) = -log p~(x) = sum_k (u_k^T Lc_k u_k / 2 - ec_k^T u_k) - h(f_e) + const,

h = log N(y; f, 1/E[tau]) (cp_gaussian, tau at its current posterior mean) or log Phi(s f)
(cp_probit, s = +-1). With g = grad f (g_k = Hadamard of the other modes' u) and h', h'' at f_e:

    grad phi = (Lc_k u_k - ec_k - h' g_k)_k
    H = blockdiag(Lc_k) - h'' g g^T - h' D,   D[(k, r), (k', r)] = prod_{k'' != k, k'} u_{k'' r}
                                              (k != k'; zero elsewhere: f is multilinear).

LP takes the mode x* of p~ and its Laplace covariance C = H(x*)^{-1}; the message to mode k is the
Gaussian whose product with the cavity has the marginal N(u_k*, C_kk):

    Lam_k* = C_kk^{-1} - Lc_k,    eta_k* = C_kk^{-1} u_k* - ec_k.

Computed without the cancellation of C_kk^{-1} - Lc_k: C_kk^{-1} is the Schur complement
H_kk - H_{k,-k} H_{-k,-k}^{-1} H_{-k,k} and H_kk = Lc_k - h'' g_k g_k^T, so with
H_{-k,-k} = Ls Ls^T and Y = Ls^{-1} H_{-k,k},

    Lam_k* = -h'' g_k g_k^T - Y^T Y,    eta_k* = Lam_k* u_k* + (Lc_k u_k* - ec_k).

Lam_k* is in general indefinite for R >= 2: on a direction v orthogonal to g_k the first term
vanishes and H_{-k,k} v = -h' D_{-k,k} v, so v^T Lam_k* v = -h'^2 |Ls^{-1} D_{-k,k} v|^2 < 0
whenever h' (E[tau] (y - f) or s phi(s f)/Phi(s f) at the mode) is nonzero: f is not jointly
concave in the embeddings and the Laplace marginal of u_k is wider than its cavity there. What
happens to such a message is the caller's choice (``LP_SKIP``, ``LP_APPLY``, ``LP_CLIP``).

The mode is found by a damped Newton iteration with the exact gradient and Hessian
(``newton_mode``), at most 100 iterations, where the paper ran L-BFGS with at most 100. Both are
descent methods on the same smooth objective from the same start, and both stop at a point with
zero gradient and positive definite Hessian: a local mode, the same one whenever they stay in
its basin (phi is not convex, and different paths can reach different local modes; the start
here is the entry's current posterior means, near the mode of the previous sweep). Newton
converges quadratically near the mode, to rounding level, where L-BFGS stops at its gradient
tolerance, and the Laplace step needs the exact Hessian at the mode anyway.
"""

import math

from numba import njit, prange

from .._config import LEAF, PARALLEL_CACHED
from ..linalg import cholesky, cholesky_solve
from ..special import finite, inv_mills, log_ndtr
from .messages import MODEL_GAUSSIAN, damp_noise_message
from .moments import expected_sq_error

#: Newton iterations (Hessian factorisations) of the mode search (the paper's L-BFGS cap)
MAX_NEWTON = 100
#: converged when every coordinate of a full Newton step is below this times (1 + max |x|)
STEP_TOL = 1e-10
#: Armijo constant and step halvings of the backtracking line search
ARMIJO = 1e-4
MAX_HALVINGS = 60
#: an unshifted Newton step whose predicted decrease is below this times (1 + |phi|) is taken whole
SMALL_DECREASE = 1e-12
#: scratch of ``lp_entry``: (K R, K R) matrices and (K R,) vectors
LP_MATS = 4
LP_VECS = 5
#: what to do with a message whose precision is not positive semi-definite (``fit(lp_indefinite=)``)
LP_SKIP = 0  #: skip it (count it; the engine's rule for every method)
LP_APPLY = 1  #: apply it (textbook LP: only the Hessian at the mode must be positive definite)
LP_CLIP = 2  #: apply its positive semi-definite part, keeping the tilted mode as the new marginal mean
#: Jacobi sweeps of ``sym_eig`` (it converges quadratically; R <= 50 needs < 15)
MAX_JACOBI = 50
#: status of ``newton_mode``
CONVERGED = 0
NOT_CONVERGED = 1
FAILED = 2


@njit(**LEAF)
def log_lik(model, y, s, etau, f):
    """(h, h', h'') at f of h = log N(y; f, 1/etau) up to a constant (model 0) or log Phi(s f)."""
    if model == MODEL_GAUSSIAN:
        d = y - f
        return -0.5 * etau * d * d, etau * d, -etau
    a = s * f
    r = inv_mills(a)
    return log_ndtr(a), s * r, -r * (a + r)


@njit(**LEAF)
def stacked_value(x, K, R):
    """f = sum_r prod_k x[k R + r]: the CP model's value at the K stacked vectors x (K R,)."""
    f = 0.0
    for r in range(R):
        p = 1.0
        for k in range(K):
            p *= x[k * R + r]
        f += p
    return f


@njit(**LEAF)
def product_gradient(x, K, R, gf):
    """f = ``stacked_value`` (returned) and gf (K R,) its gradient (no division: zeros are fine)."""
    for r in range(R):
        for k in range(K):
            q = 1.0
            for kk in range(K):
                if kk != k:
                    q *= x[kk * R + r]
            gf[k * R + r] = q
    return stacked_value(x, K, R)


@njit(**LEAF)
def objective(model, y, s, etau, Lc, ec, x, K, R):
    """phi(x) = sum_k (u_k^T Lc_k u_k / 2 - ec_k^T u_k) - h(f) (x (K R,), Lc (K, R, R), ec (K, R))."""
    v = 0.0
    for k in range(K):
        b = k * R
        for i in range(R):
            t = 0.0
            for j in range(R):
                t += Lc[k, i, j] * x[b + j]
            v += x[b + i] * (0.5 * t - ec[k, i])
    h, _, _ = log_lik(model, y, s, etau, stacked_value(x, K, R))
    return v - h


@njit(**LEAF)
def gradient_hessian(model, y, s, etau, Lc, ec, x, K, R, G, H, gf):
    """Gradient G (K R,) and Hessian H (K R, K R) of phi at x; gf (K R,) receives grad f.

    Returns (h', h'') at f(x).
    """
    n = K * R
    f = product_gradient(x, K, R, gf)
    _, h1, h2 = log_lik(model, y, s, etau, f)
    for a in range(n):
        ga = -h2 * gf[a]
        for b in range(n):
            H[a, b] = ga * gf[b]
    for k in range(K):
        b0 = k * R
        for i in range(R):
            t = 0.0
            for j in range(R):
                lij = Lc[k, i, j]
                t += lij * x[b0 + j]
                H[b0 + i, b0 + j] += lij
            G[b0 + i] = t - ec[k, i] - h1 * gf[b0 + i]
        # -h' d2f/du_k du_k' : diagonal blocks D_kk' = diag(prod_{k'' != k, k'} u_k'')
        for kp in range(k + 1, K):
            for r in range(R):
                q = 1.0
                for kk in range(K):
                    if kk != k and kk != kp:
                        q *= x[kk * R + r]
                H[b0 + r, kp * R + r] -= h1 * q
                H[kp * R + r, b0 + r] -= h1 * q
    return h1, h2


@njit(**LEAF)
def newton_mode(model, y, s, etau, Lc, ec, x, K, R, mat, vec):
    """Mode of the tilted distribution by damped Newton from x (K R,), updated in place.

    Each iteration factorises the exact Hessian (shifted by mu I, mu increased tenfold from
    1e-8 (1 + max |H_aa|), where it is not positive definite: a descent direction), then
    backtracks from the full step until the Armijo condition holds (an unshifted step whose
    predicted decrease is below SMALL_DECREASE (1 + |phi|), i.e. near the rounding level of phi,
    is taken whole: function values cannot test it). Converged when a full, unshifted Newton
    step moves no coordinate by more than STEP_TOL (1 + max |x|) (that step is taken).
    mat (LP_MATS, K R, K R) and vec (LP_VECS, K R) scratch; on return mat[0] holds the Hessian,
    vec[2] grad f at the last x it was evaluated at (the caller re-evaluates at the final x).
    Returns (status, iterations): CONVERGED, NOT_CONVERGED (MAX_NEWTON reached, or no decrease
    found) or FAILED (a non-finite value).
    """
    n = K * R
    H, T, Lh = mat[0], mat[1], mat[2]
    G, dx, gf = vec[0], vec[1], vec[2]
    xt = vec[3]
    phi = objective(model, y, s, etau, Lc, ec, x, K, R)
    if not finite(phi):
        return FAILED, 0
    for it in range(MAX_NEWTON):
        gradient_hessian(model, y, s, etau, Lc, ec, x, K, R, G, H, gf)
        big = 0.0
        for a in range(n):
            big = max(big, abs(H[a, a]))
        mu = 0.0
        ok = False
        for _ in range(40):
            for a in range(n):
                for b in range(n):
                    T[a, b] = H[a, b]
                T[a, a] += mu
            if cholesky(T, Lh):
                ok = True
                break
            mu = 1e-8 * (1.0 + big) if mu == 0.0 else 10.0 * mu
        if not ok:
            return FAILED, it + 1
        cholesky_solve(Lh, G, dx)
        slope = 0.0
        step = 0.0
        xmax = 0.0
        for a in range(n):
            dx[a] = -dx[a]
            slope += G[a] * dx[a]
            step = max(step, abs(dx[a]))
            xmax = max(xmax, abs(x[a]))
        if not finite(slope):
            return FAILED, it + 1
        if mu == 0.0 and step <= STEP_TOL * (1.0 + xmax):
            for a in range(n):
                x[a] += dx[a]
            return CONVERGED, it + 1
        t = 1.0
        # a decrease below the rounding level of phi cannot be tested: near the mode (an
        # unshifted step) the full Newton step is taken
        accepted = mu == 0.0 and -slope <= SMALL_DECREASE * (1.0 + abs(phi))
        if accepted:
            for a in range(n):
                xt[a] = x[a] + dx[a]
            pt = objective(model, y, s, etau, Lc, ec, xt, K, R)
        for _ in range(0 if accepted else MAX_HALVINGS):
            for a in range(n):
                xt[a] = x[a] + t * dx[a]
            pt = objective(model, y, s, etau, Lc, ec, xt, K, R)
            if pt <= phi + ARMIJO * t * slope:  # False for NaN
                accepted = True
                break
            t *= 0.5
        if not accepted:
            return NOT_CONVERGED, it + 1
        for a in range(n):
            x[a] = xt[a]
        phi = pt
    return NOT_CONVERGED, MAX_NEWTON


@njit(**LEAF)
def sym_eig(A, B, V, w):
    """Eigenvalues w (R,) and eigenvectors V (R, R) (columns) of the symmetric A (R, R) by cyclic
    Jacobi rotations; B (R, R) scratch (A is not modified)."""
    R = A.shape[0]
    for i in range(R):
        for j in range(R):
            B[i, j] = A[i, j]
            V[i, j] = 1.0 if i == j else 0.0
    for _ in range(MAX_JACOBI):
        off = 0.0
        on = 0.0
        for i in range(R):
            on += B[i, i] * B[i, i]
            for j in range(i):
                off += B[i, j] * B[i, j]
        if not off > 1e-32 * on:  # also stops on NaN
            break
        for p in range(R - 1):
            for q in range(p + 1, R):
                bpq = B[p, q]
                if bpq == 0.0:
                    continue
                theta = (B[q, q] - B[p, p]) / (2.0 * bpq)
                if abs(theta) > 1e150:
                    t = 0.5 / theta
                else:
                    t = 1.0 / (abs(theta) + math.sqrt(theta * theta + 1.0))
                    if theta < 0.0:
                        t = -t
                c = 1.0 / math.sqrt(t * t + 1.0)
                sn = t * c
                for k in range(R):  # B <- B J (columns p, q)
                    bkp = B[k, p]
                    bkq = B[k, q]
                    B[k, p] = c * bkp - sn * bkq
                    B[k, q] = sn * bkp + c * bkq
                for k in range(R):  # B <- J^T B (rows p, q)
                    bpk = B[p, k]
                    bqk = B[q, k]
                    B[p, k] = c * bpk - sn * bqk
                    B[q, k] = sn * bpk + c * bqk
                for k in range(R):
                    vkp = V[k, p]
                    vkq = V[k, q]
                    V[k, p] = c * vkp - sn * vkq
                    V[k, q] = sn * vkp + c * vkq
    for i in range(R):
        w[i] = B[i, i]


@njit(**LEAF)
def _invalidate(ok, status):
    """ok[:] = False (the Hessian at the mode is not positive definite); returns status."""
    for k in range(ok.shape[0]):
        ok[k] = False
    return status


@njit(**LEAF)
def message_eta(Lk, Lck, xk, eck, out):
    """out = (Lk + Lc_k) x_k - ec_k, a Laplace message's precision-times-mean (the cavity times the
    message has its mean at the mode x_k); whether every element is finite."""
    good = True
    for i in range(xk.shape[0]):
        t = 0.0
        for j in range(xk.shape[0]):
            t += (Lk[i, j] + Lck[i, j]) * xk[j]
        out[i] = t - eck[i]
        good = good and finite(out[i])
    return good


@njit(**LEAF)
def lp_messages(model, y, s, etau, Lc, ec, x, K, R, indefinite, Lmsg, emsg, ok, mat, vec):
    """Laplace messages of one entry from its cavities (Lc (K, R, R), ec (K, R)) and a start x.

    x (K R,) is the start of the mode search and receives the mode. Lmsg (K, R, R), emsg (K, R)
    receive the new (undamped) messages, ok (K,) whether each may be applied: the Hessian at the
    mode is positive definite (Cholesky of H_{-k,-k} and of the Schur complement C_kk^{-1}), the
    message is finite and its precision nonzero, and, by ``indefinite``: LP_SKIP, the precision
    is positive semi-definite (Cholesky of Lam* + 1e-9 max |diag Lam*| I, the test of
    ``kernels.tensor.messages.probit_message``); LP_APPLY, no further test; LP_CLIP, a precision that fails
    that test is replaced by its positive semi-definite part V max(w, 0) V^T (``sym_eig``), and
    eta* = Lam+ u_k* + (Lc_k u_k* - ec_k), so that cavity times message still has its mean at the
    mode u_k*. Returns the ``newton_mode`` status.
    """
    H, T, Lh = mat[0], mat[1], mat[2]
    Y = mat[3]
    gf, G = vec[2], vec[0]
    status, _ = newton_mode(model, y, s, etau, Lc, ec, x, K, R, mat, vec)
    for k in range(K):
        ok[k] = False
    if status == FAILED:
        return status
    # Hessian and grad f at the final x
    h1, h2 = gradient_hessian(model, y, s, etau, Lc, ec, x, K, R, G, H, gf)
    if not (finite(h1) and finite(h2)):
        return FAILED
    m = (K - 1) * R
    Hs = T[:m, :m]
    Ls = Lh[:m, :m]
    for k in range(K):
        b0 = k * R
        # H_{-k,-k} (the other modes' rows and columns, in order) and B = H_{-k,k}
        for a in range(m):
            ia = a if a < b0 else a + R
            for b in range(m):
                ib = b if b < b0 else b + R
                Hs[a, b] = H[ia, ib]
        if not cholesky(Hs, Ls):
            return _invalidate(ok, status)  # H is not positive definite: no message is valid
        # Y = Ls^{-1} B, column by column (forward substitution)
        for j in range(R):
            for a in range(m):
                ia = a if a < b0 else a + R
                t = H[ia, b0 + j]
                for c in range(a):
                    t -= Ls[a, c] * Y[c, j]
                Y[a, j] = t / Ls[a, a]
        Lk = Lmsg[k]
        big = 0.0
        for i in range(R):
            for j in range(i + 1):
                t = -h2 * gf[b0 + i] * gf[b0 + j]
                for a in range(m):
                    t -= Y[a, i] * Y[a, j]
                Lk[i, j] = t
                Lk[j, i] = t
            big = max(big, abs(Lk[i, i]))
        good = big > 0.0 and finite(big)
        fine = message_eta(Lk, Lc[k], x[b0 : b0 + R], ec[k], emsg[k])
        good = good and fine
        # C_kk^{-1} = Lc_k + Lam_k* must be positive definite (with H_{-k,-k}: H is)
        Cinv = T[:R, :R]
        Lc2 = Lh[:R, :R]
        for i in range(R):
            for j in range(R):
                Cinv[i, j] = Lc[k, i, j] + Lk[i, j]
        if not cholesky(Cinv, Lc2):
            return _invalidate(ok, status)
        if good and indefinite != LP_APPLY:
            for i in range(R):
                for j in range(R):
                    Cinv[i, j] = Lk[i, j] + (1e-9 * big if i == j else 0.0)
            psd = cholesky(Cinv, Lc2)
            if not psd and indefinite == LP_CLIP:
                V = Y[:R, :R]
                w = vec[1, :R]
                sym_eig(Lk, Cinv, V, w)
                big = 0.0
                for i in range(R):
                    for j in range(i + 1):
                        t = 0.0
                        for q in range(R):
                            if w[q] > 0.0:
                                t += w[q] * V[i, q] * V[j, q]
                        Lk[i, j] = t
                        Lk[j, i] = t
                    big = max(big, Lk[i, i])
                fine = message_eta(Lk, Lc[k], x[b0 : b0 + R], ec[k], emsg[k])
                good = good and fine
                psd = big > 0.0
            good = good and psd
        ok[k] = good
    return status


@njit(**LEAF)
def lp_entry(
    model, gidx_e, k_lo, k_hi, y, s, Lam_e, eta_e, P_Lam, P_eta, M, etau, rho, indefinite, Lc, ec, Lmsg, emsg,
    ok, mat, vec,
):  # fmt: skip
    """Damped LP messages of one entry to its objects of modes k_lo..k_hi-1 (all K messages are
    computed from one joint mode); returns the number not applied.

    Lam_e (K, R, R), eta_e (K, R) the entry's messages, updated in place; the mode search starts
    from the objects' posterior means M; ``indefinite`` as in ``lp_messages``. Lc, Lmsg (K, R, R),
    ec, emsg (K, R), ok (K,) bool, mat (LP_MATS, K R, K R), vec (LP_VECS, K R) scratch.
    """
    K = gidx_e.shape[0]
    R = M.shape[1]
    x = vec[4]
    for k in range(K):
        o = gidx_e[k]
        for i in range(R):
            ec[k, i] = P_eta[o, i] - eta_e[k, i]
            x[k * R + i] = M[o, i]
            for j in range(R):
                Lc[k, i, j] = P_Lam[o, i, j] - Lam_e[k, i, j]
    lp_messages(model, y, s, etau, Lc, ec, x, K, R, indefinite, Lmsg, emsg, ok, mat, vec)
    skipped = 0
    for k in range(k_lo, k_hi):
        if ok[k]:
            for i in range(R):
                eta_e[k, i] = (1.0 - rho) * eta_e[k, i] + rho * emsg[k, i]
                for j in range(R):
                    Lam_e[k, i, j] = (1.0 - rho) * Lam_e[k, i, j] + rho * Lmsg[k, i, j]
        else:
            skipped += 1
    return skipped


@njit(**PARALLEL_CACHED)
def sweep_lp(problem, store, scratch, k_lo, k_hi, etau, rho, chunk):
    """Damped LP messages of every entry to its objects of modes k_lo..k_hi-1, in parallel (full
    covariances; every cavity from one posterior), in work units of ``chunk`` entries; with
    ``problem.with_noise`` also the entry's Gamma noise message, computed exactly as CEP's
    (``kernels.tensor.schedules.sweep_full``).

    (0, K): the parallel schedule. (k, k + 1): one block of the block schedule (the caller then
    rebuilds mode k's objects); every block recomputes the entries' joint modes, so a block
    iteration costs K parallel ones. ``problem.lp_rule``: LP_SKIP, LP_APPLY or LP_CLIP
    (``lp_messages``).

    Unit c (entries c chunk .. (c + 1) chunk - 1) uses row c of the lp_ scratch
    (``state.CPScratch``); scratch.skipped[c] accumulates.
    """
    model, gidx, y = problem.code, problem.gidx, problem.y
    s, indefinite, with_noise = problem.s, problem.lp_rule, problem.with_noise
    Lam, eta, alpha = store.Lam, store.eta, store.alpha
    beta, P_Lam, P_eta = store.beta, store.P_Lam, store.P_eta
    M, E2 = store.M, store.E2
    skipped, Lc, ec = scratch.skipped, scratch.lp_Lc, scratch.lp_ec
    Lmsg, emsg, ok = scratch.lp_Lmsg, scratch.lp_emsg, scratch.lp_ok
    mat, vec = scratch.lp_mat, scratch.lp_vec
    n = gidx.shape[0]
    for c in prange(-(-n // chunk)):
        t = 0
        for e in range(c * chunk, min(n, (c + 1) * chunk)):
            t += lp_entry(
                model, gidx[e], k_lo, k_hi, y[e], s[e], Lam[e], eta[e], P_Lam, P_eta, M, etau, rho,
                indefinite, Lc[c], ec[c], Lmsg[c], emsg[c], ok[c], mat[c], vec[c],
            )  # fmt: skip
            if with_noise:
                damp_noise_message(e, alpha, beta, rho, expected_sq_error(gidx[e], y[e], M, E2))
        skipped[c] += t
