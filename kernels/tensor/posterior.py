"""Posterior of the CP objects = prior + sum of their messages (race-free reductions).

Rebuilds run in parallel over fixed chunks of objects, summing messages through CSR groupings in
a fixed order, or reduce the per-group sums that a sweep collected; results do not depend on the
number of threads.
"""

from numba import njit, prange

from .._config import LEAF, PARALLEL_CACHED
from ..linalg import cholesky
from .moments import object_moments

__all__ = [
    "start_from_prior",
    "finish_object",
    "zero_sums",
    "add_to_sums",
    "noise_chunk_sums",
    "rebuild_full",
    "reduce_object_sums",
    "rebuild_diag",
    "rebuild_diag_coord",
    "restore_objects",
    "mark_shrunk",
    "mark_shrunk_diag",
    "KEEP",
    "PULLBACK",
]


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


@njit(**LEAF)
def finish_precision(P_Lam_o, L):
    """``finish_object`` without the moments: the lower triangle mirrored, then whether the
    precision is positive definite (its Cholesky factor into L)."""
    R = P_Lam_o.shape[0]
    for i in range(R):
        for j in range(i):
            P_Lam_o[j, i] = P_Lam_o[i, j]
    return cholesky(P_Lam_o, L)


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


@njit(**PARALLEL_CACHED)
def noise_chunk_sums(alpha, beta, chunk, out):
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
def rebuild_full(problem, store, scratch, lo, hi, moments, flat=False):
    """Posterior of every object = its prior (prior_Lam (n_obj, R, R), prior_eta (n_obj, R)) + its
    messages (CSR order: ``problem.ptr``, ``problem.ent``), then its moments (``moments`` False:
    its natural parameters only, checked positive definite; M, S and E2 are left as they are,
    for a fresh fit whose start writes them: ``CPEngine._start``). ``flat``: every message is
    entry 0's, ptr[o + 1] - ptr[o] times (the flat start of a cluster fit's client, which holds
    one entry's messages for all; ``problem.ent`` is not read), the same additions.

    Objects lo..hi-1 only (all: 0, n_obj), in units of ``problem.obj_chunk`` objects; scratch.Ls
    (>= n_obj_chunks, R, R); scratch.bad (n_obj,) set to 1 where the posterior precision is not
    positive definite. The R x R blocks are summed whole, then the lower triangle of the sum is
    mirrored (``start_from_prior``, ``finish_object``).
    """
    ptr, ent, obj_mode = problem.ptr, problem.ent, problem.obj_mode
    prior_Lam, prior_eta = problem.prior_Lam, problem.prior_eta
    Lam, eta, P_Lam = store.Lam, store.eta, store.P_Lam
    P_eta, M, S = store.P_eta, store.M, store.S
    E2 = store.E2
    obj_chunk = problem.obj_chunk
    Ls, bad = scratch.Ls, scratch.bad
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
                e = 0 if flat else ent[idx]
                Le = Lf[e, k]
                for t in range(RR):
                    Po[t] += Le[t]
                for i in range(R):
                    P_eta[o, i] += eta[e, k, i]
            if moments:
                bad[o] = 0 if finish_object(P_Lam[o], P_eta[o], M[o], S[o], E2[o], L) else 1
            else:
                bad[o] = 0 if finish_precision(P_Lam[o], L) else 1


@njit(**PARALLEL_CACHED)
def reduce_object_sums(problem, store, scratch):
    """Posterior of every object = prior + the per-group message sums of ``sweep_full`` with
    ``problem.with_sums`` over all modes (scratch.part_L, part_e), added in group order (fixed:
    the result does not depend on the number of threads), then its moments as ``rebuild_full``
    (the lower triangle of the sum mirrored; scratch.bad[o] = 1 where not positive definite)."""
    prior_Lam, prior_eta, obj_chunk = problem.prior_Lam, problem.prior_eta, problem.obj_chunk
    P_Lam, P_eta, M = store.P_Lam, store.P_eta, store.M
    S, E2 = store.S, store.E2
    part_L, part_e, Ls = scratch.part_L, scratch.part_e, scratch.Ls
    bad = scratch.bad
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
def rebuild_diag(problem, store, scratch):
    """Diagonal variant of ``rebuild_full`` (every object): all blocks are (R,)."""
    ptr, ent, obj_mode = problem.ptr, problem.ent, problem.obj_mode
    prior_Lam, prior_eta = problem.prior_Lam, problem.prior_eta
    Lam, eta, P_Lam = store.Lam, store.eta, store.P_Lam
    P_eta, M, S = store.P_eta, store.M, store.S
    E2 = store.E2
    bad = scratch.bad
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
def rebuild_diag_coord(problem, store, scratch, lo, hi, k, r):
    """Coordinate r of objects lo..hi-1 (all of mode k) = prior + their messages; bad as in rebuild."""
    ptr, ent, prior_Lam = problem.ptr, problem.ent, problem.prior_Lam
    prior_eta = problem.prior_eta
    Lam, eta, P_Lam = store.Lam, store.eta, store.P_Lam
    P_eta, M, S = store.P_eta, store.M, store.S
    E2 = store.E2
    bad = scratch.bad
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


@njit(**PARALLEL_CACHED)
def restore_objects(problem, store, scratch, lo, hi, r, frac):
    """The guard of the parallel schedules for messages of negative precision (a likelihood that
    may not be log-concave: ``messages.rank_one_message`` signed): every object o in lo..hi-1 with
    scratch.bad[o] (its posterior not proper after a sweep, or shrunk: ``mark_shrunk``) has its
    messages pulled back towards those of before the sweep, scratch.old_Lam and old_eta (shaped as
    store.Lam and eta): msg <- old + frac (msg - old) (frac 0: restored); with r >= 0 (diagonal
    covariances, one coordinate's step) only coordinate r's. scratch.restored (n_obj,) int64
    receives the number of changed messages per object (0 for one not bad). An object owns its
    messages (its mode's block of its entries): race-free."""
    ptr, ent, obj_mode = problem.ptr, problem.ent, problem.obj_mode
    Lam, eta = store.Lam, store.eta
    bad, old_Lam, old_eta = scratch.bad, scratch.old_Lam, scratch.old_eta
    restored = scratch.restored
    n, K = eta.shape[0], eta.shape[1]
    Lf = Lam.reshape((n, K, Lam.size // (n * K)))
    old_Lf = old_Lam.reshape((n, K, Lam.size // (n * K)))
    B = Lf.shape[2]
    R = eta.shape[2]
    for o in prange(lo, hi):
        count = 0
        if bad[o] != 0:
            k = obj_mode[o]
            for idx in range(ptr[o], ptr[o + 1]):
                e = ent[idx]
                changed = False
                for t in range(r if r >= 0 else 0, r + 1 if r >= 0 else B):
                    changed = changed or Lf[e, k, t] != old_Lf[e, k, t]
                    Lf[e, k, t] = old_Lf[e, k, t] + frac * (Lf[e, k, t] - old_Lf[e, k, t])
                for i in range(r if r >= 0 else 0, r + 1 if r >= 0 else R):
                    changed = changed or eta[e, k, i] != old_eta[e, k, i]
                    eta[e, k, i] = old_eta[e, k, i] + frac * (eta[e, k, i] - old_eta[e, k, i])
                if changed:
                    count += 1
        restored[o] = count


#: the guard's trust region (``mark_shrunk``): one iteration may at most double a variance
KEEP = 0.5
#: the guard's steps (``restore_objects``' frac): an object it refuses takes half its step, a
#: quarter, an eighth, then none (its messages of before the sweep)
PULLBACK = (0.5, 0.5, 0.5, 0.0)


@njit(**PARALLEL_CACHED)
def mark_shrunk(P_Lam, old_P_Lam, lo, hi, obj_chunk, A, Ls, bad):
    """The trust region of the guard of ``restore_objects``: bad[o] = 1 for every object o of
    lo..hi-1 whose posterior precision P_Lam[o] (R, R) has lost more than 1 - KEEP of old_P_Lam[o]
    in some direction (P_Lam[o] - KEEP old_P_Lam[o] not positive definite: a variance grown more
    than 1 / KEEP times); the others are left as they are. A, Ls (>= n_obj_chunks, R, R) scratch.
    A sum of messages of negative precision can leave an object proper but nearly singular, and
    its mean then runs off (seen: 400 on a Student-t tensor whose means are about 2)."""
    R = P_Lam.shape[1]
    for c in prange(-(-(hi - lo) // obj_chunk)):
        Ac = A[c]
        for o in range(lo + c * obj_chunk, min(hi, lo + (c + 1) * obj_chunk)):
            for i in range(R):
                for j in range(i + 1):
                    Ac[i, j] = P_Lam[o, i, j] - KEEP * old_P_Lam[o, i, j]
            if not cholesky(Ac, Ls[c]):
                bad[o] = 1


@njit(**PARALLEL_CACHED)
def mark_shrunk_diag(P_Lam, old_P_Lam, lo, hi, r, bad):
    """``mark_shrunk`` for diagonal covariances (n_obj, R): coordinate r only with r >= 0."""
    R = P_Lam.shape[1]
    for o in prange(lo, hi):
        for q in range(r if r >= 0 else 0, r + 1 if r >= 0 else R):
            if not P_Lam[o, q] - KEEP * old_P_Lam[o, q] > 0.0:
                bad[o] = 1
