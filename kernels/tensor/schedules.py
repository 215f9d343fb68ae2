"""Sweeps of the CP message engine: parallel and block (full and diagonal), noise, sequential.

Entry kernels run in parallel over fixed chunks of entries (entry e writes only its own
messages), so results do not depend on the number of threads.
"""

import math

from numba import njit, prange

from .._config import PARALLEL_CACHED, SERIAL
from .messages import (
    MODEL_GAUSSIAN,
    by_likelihood,
    coord_update_diag,
    damp_noise_message,
    entry_update,
    gaussian_entry_update,
)
from .moments import expected_sq_error, expected_sq_error_diag, object_moments
from .posterior import add_to_sums, zero_sums

__all__ = [
    "sweep_full",
    "noise_messages_full",
    "sweep_diag_coord",
    "noise_messages_diag",
    "sequential_full",
    "sequential_diag",
]


# ---------------------------------------------------------------- drivers
#: cp_gaussian's messages, compiled in the drivers of the hand-written models only
_gaussian_entry_update = by_likelihood(gaussian_entry_update, math.nan, generic=False)


@njit(**PARALLEL_CACHED)
def sweep_full(problem, store, scratch, k_lo, k_hi, etau, rho, chunk, lik):
    """Damped messages of every entry to its objects of modes k_lo..k_hi-1, in parallel (full
    covariances), in work units of ``chunk`` entries; with ``problem.with_noise`` also its Gamma
    noise message (as ``noise_messages_full``, from the same posterior, in the same pass).
    MODEL_GENERIC: the likelihood ``lik`` and the Gauss-Hermite rule of ``problem``
    (``entry_update``); None for the other models. ``lik`` has no default in the five drivers:
    numba types a left-out argument apart from a None given, so a caller that left it out
    compiled a second copy of the driver (the tests did, 15 s a driver).

    (0, K): the parallel (Jacobi) schedule, every mode from one posterior. (k, k + 1): one block
    of the block schedule; given the other modes the objects of mode k are independent, so
    updating mode k's messages and then rebuilding its objects is a block coordinate step, as in
    alternating least squares (the Jacobi step oscillates or diverges with damping near 1).
    Work unit c uses scratch.mat[c] and scratch.vec[c]; scratch.skipped[c] accumulates.

    With ``problem.with_sums`` every unit c also sums its entries' new messages per object into
    part_L[c] (n_obj, R, R) and part_e[c] (n_obj, R) (zeroed first; entry order), for
    ``reduce_object_sums``: the posterior then needs no second pass over the messages, which at
    rank 8 are 64 doubles per (entry, mode) and would be read again in an order the CPU cannot
    prefetch (``rebuild_full``). Chunks are fixed ranges of entries, so the sums do not depend on
    the number of threads.
    """
    model, gidx, y = problem.code, problem.gidx, problem.y
    s, nodes, weights = problem.s, problem.nodes, problem.weights
    with_noise, with_sums = problem.with_noise, problem.with_sums
    Lam, eta, alpha = store.Lam, store.eta, store.alpha
    beta, P_Lam, P_eta = store.beta, store.P_Lam, store.P_eta
    M, E2 = store.M, store.E2
    skipped, mat, vec = scratch.skipped, scratch.mat, scratch.vec
    part_L, part_e = scratch.part_L, scratch.part_e
    n = gidx.shape[0]
    R = M.shape[1]
    RR = R * R
    LfA = Lam.reshape((Lam.shape[0], Lam.shape[1] * RR))
    E2fA = E2.reshape((E2.shape[0], RR))
    for c in prange(-(-n // chunk)):
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
                sq = _gaussian_entry_update(
                    lik, e, gidx, k_lo, k_hi, y[e], LfA, eta, M, E2fA, etau, rho, bfc, with_sums, PLg, Peg
                )
            else:
                t += entry_update(
                    model, gidx[e], gidx[e], k_lo, k_hi, y[e], s[e], Lam[e], eta[e], P_Lam, P_eta, M, E2,
                    etau, rho, mat[c], vec[c], lik, nodes, weights,
                )  # fmt: skip
            if with_noise:
                if math.isnan(sq):
                    sq = expected_sq_error(gidx[e], y[e], M, E2)
                damp_noise_message(e, alpha, beta, rho, sq)
            if with_sums and model != MODEL_GAUSSIAN:  # (the Gaussian update adds its own)
                add_to_sums(e, gidx, k_lo, k_hi, LfA, eta, PLg, Peg)
        skipped[c] += t


@njit(**PARALLEL_CACHED)
def noise_messages_full(problem, store, rho):
    """Damped Gamma messages (shape 1/2, rate E[(y - f)^2] / 2) of every entry, in parallel."""
    gidx, y = problem.gidx, problem.y
    alpha, beta, M = store.alpha, store.beta, store.M
    E2 = store.E2
    for e in prange(gidx.shape[0]):
        damp_noise_message(e, alpha, beta, rho, expected_sq_error(gidx[e], y[e], M, E2))


@njit(**PARALLEL_CACHED)
def sweep_diag_coord(problem, store, scratch, k, r, etau, rho, chunk, lik):
    """Damped messages of every entry to coordinate r of its mode-k object, in parallel, in work
    units of ``chunk`` entries (lik: MODEL_GENERIC's, as ``sweep_full``).

    One block of the diagonal schedule: the objects of mode k are conditionally independent
    given the other modes and coordinates, so updating (k, r) for all entries and then rebuilding
    those objects (``rebuild_diag_coord``) is a block coordinate step (updating all coordinates
    at once from the same means is a Jacobi step, which diverges when coordinates are coupled).
    scratch.skipped[c] accumulates counts; scratch.vec (n_chunks, 2) is the units' scratch.
    """
    model, gidx, y = problem.code, problem.gidx, problem.y
    s, nodes, weights = problem.s, problem.nodes, problem.weights
    Lam, eta, P_Lam = store.Lam, store.eta, store.P_Lam
    P_eta, M, E2d = store.P_eta, store.M, store.E2
    skipped, out = scratch.skipped, scratch.vec
    n = gidx.shape[0]
    for c in prange(-(-n // chunk)):
        t = 0
        for e in range(c * chunk, min(n, (c + 1) * chunk)):
            t += coord_update_diag(
                model, gidx[e], k, r, y[e], s[e], Lam[e], eta[e], P_Lam, P_eta, M, E2d, etau, rho, out[c],
                lik, nodes, weights,
            )  # fmt: skip
        skipped[c] += t


@njit(**PARALLEL_CACHED)
def noise_messages_diag(problem, store, rho):
    """Damped Gamma messages (shape 1/2, rate E[(y - f)^2] / 2) of every entry, in parallel."""
    gidx, y = problem.gidx, problem.y
    alpha, beta, M = store.alpha, store.beta, store.M
    E2d = store.E2
    for e in prange(gidx.shape[0]):
        damp_noise_message(e, alpha, beta, rho, expected_sq_error_diag(gidx[e], y[e], M, E2d))


# ---------------------------------------------------------------- sequential schedule
@njit(**SERIAL)
def sequential_full(problem, store, scratch, order, fix_tau, rho, lik):
    """Entries in ``order``; after each entry its K objects (and the noise posterior) are refreshed.

    store.noise: (3,) [a, b, E tau], updated in place (E tau only if not ``fix_tau``). Scratch:
    mat[0], vec[0] and seq_L, seq_e, seq_tmp; lik: MODEL_GENERIC's (as ``sweep_full``). Returns
    the number of messages not applied.
    """
    # (a serial driver: no parallel loop, so the tuples unpack whole; ``state``'s module text)
    gidx, y, s, model = problem.gidx, problem.y, problem.s, problem.code
    nodes, weights = problem.nodes, problem.weights
    Lam, eta, alpha, beta, P_Lam, P_eta, M, S, E2, noise = store
    mat, vec = scratch.mat[0], scratch.vec[0]
    old_L, old_e, Ltmp = scratch.seq_L, scratch.seq_e, scratch.seq_tmp
    K = gidx.shape[1]
    R = M.shape[1]
    skipped = 0
    for ii in range(order.shape[0]):
        e = order[ii]
        old_L[:, :, :] = Lam[e]
        old_e[:, :] = eta[e]
        skipped += entry_update(
            model, gidx[e], gidx[e], 0, K, y[e], s[e], Lam[e], eta[e], P_Lam, P_eta, M, E2, noise[2], rho,
            mat, vec, lik, nodes, weights,
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
                # cannot happen but by rounding: the damped update is a convex combination of two
                # proper posteriors of the same cavity (the old one and the tilted's, also for a
                # message of negative precision: ``rank_one_message``); undo to stay proper
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
def sequential_diag(problem, store, scratch, order, fix_tau, rho, lik):
    """Entries in ``order``; each coordinate's object is refreshed right after its message.

    store.noise: (3,) [a, b, E tau] updated in place (E tau only if not ``fix_tau``); scratch.vec[0]
    (2,) scratch; lik: MODEL_GENERIC's (as ``sweep_full``). A message of negative precision (a
    likelihood that may not be log-concave: ``generic_coord``) keeps the coordinate proper: the
    damped update is a convex combination of two proper posteriors of the same cavity (the old
    one and the tilted's). Returns the number of messages not applied.
    """
    # (a serial driver: the tuples unpack whole, as ``sequential_full``)
    gidx, y, s, model = problem.gidx, problem.y, problem.s, problem.code
    nodes, weights = problem.nodes, problem.weights
    Lam, eta, alpha, beta, P_Lam, P_eta, M, S, E2, noise = store
    out = scratch.vec[0]
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
                    model, gidx[e], k, r, y[e], s[e], Lam[e], eta[e], P_Lam, P_eta, M, E2, noise[2], rho, out,
                    lik, nodes, weights,
                ):  # fmt: skip
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
