"""CEP-1 under each entry's cavity of the other modes (``expect_under="cavity"``)."""

import numpy as np
from numba import njit, prange

from .._config import LEAF, PARALLEL_CACHED
from ..linalg import batch_cholesky, batch_cholesky_inverse
from .messages import MODEL_GAUSSIAN, by_likelihood, damp_noise_message, entry_update
from .moments import expected_sq_error
from .posterior import add_to_sums, zero_sums

__all__ = [
    "batch_cavity_moments",
    "gaussian_batch_messages",
    "sweep_cavity_full",
    "CAVITY_BATCH",
]


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


#: cp_gaussian's messages, compiled in the drivers of the hand-written models only
_gaussian_batch_messages = by_likelihood(gaussian_batch_messages, 0, generic=False)


@njit(**PARALLEL_CACHED)
def sweep_cavity_full(problem, store, scratch, k_lo, k_hi, etau, rho, chunk, lik):
    """``sweep_full`` with the other modes' moments under each entry's cavity, full covariances,
    in parallel over fixed chunks of entries.

    The message of entry e to mode k takes Ez = Hadamard_{k' != k} of the means and Ezz =
    Hadamard_{k' != k} of E[u u^T] of e's cavities q(u_k') / (e's message to k') (and, for
    cp_probit and the generic models, mode k's own cavity as always), so that an entry's messages
    do not feed on each other. The cavities are formed CAVITY_BATCH entries at a time
    (``batch_cavity_moments``); an entry with a cavity that is not positive definite gets no new
    message (all counted in skipped). A single-mode step (block schedule) skips its own mode's
    cavity, which it never reads. cp_gaussian uses E[tau] = etau and, with ``problem.with_noise``, its
    noise messages from the posterior M, E2 (as ``noise_messages_full``).

    Scratch per work unit c of ``chunk`` entries: mat, vec as ``sweep_full``; the cav_ arrays
    (``state.CPScratch``). The sums per object (``problem.with_sums``) and (MODEL_GENERIC) lik as
    ``sweep_full``.
    """
    model, gidx, y = problem.code, problem.gidx, problem.y
    s, nodes, weights = problem.s, problem.nodes, problem.weights
    with_noise, with_sums = problem.with_noise, problem.with_sums
    Lam, eta, alpha = store.Lam, store.eta, store.alpha
    beta, P_Lam, P_eta = store.beta, store.P_Lam, store.P_eta
    M, E2 = store.M, store.E2
    skipped, mat, vec = scratch.skipped, scratch.mat, scratch.vec
    part_L, part_e, Mc = scratch.part_L, scratch.part_e, scratch.cav_M
    E2c, cmat, cvec = scratch.cav_E2, scratch.cav_mat, scratch.cav_vec
    Mb, E2b, okb = scratch.cav_Mb, scratch.cav_E2b, scratch.cav_ok
    n = gidx.shape[0]
    K = gidx.shape[1]
    R = M.shape[1]
    RR = R * R
    B = okb.shape[1]
    skip = k_lo if k_hi - k_lo == 1 else -1
    LfA = Lam.reshape((Lam.shape[0], K * RR))
    idx = np.arange(K)  # (rows of one entry's cavity moments Mc[c], E2c[c]: see entry_update)
    for c in prange(-(-n // chunk)):
        A, Lb = cmat[c, 0], cmat[c, 1]
        w, ec = cvec[c, 0], cvec[c, 1]
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
                t += _gaussian_batch_messages(
                    lik, gidx, e0, nb, k_lo, k_hi, y, LfA, eta, Mbc, E2bf, P, etau, rho, ok, with_sums, PLg,
                    Peg,
                )  # fmt: skip
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
                        E2c[c], etau, rho, mat[c], vec[c], lik, nodes, weights,
                    )  # fmt: skip
                    if with_sums:
                        add_to_sums(e, gidx, k_lo, k_hi, LfA, eta, PLg, Peg)
            if with_noise:
                for e in range(e0, e0 + nb):
                    damp_noise_message(e, alpha, beta, rho, expected_sq_error(gidx[e], y[e], M, E2))
        skipped[c] += t
