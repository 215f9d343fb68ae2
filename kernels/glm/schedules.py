"""Schedules of fully factorised regression: one call runs one whole sweep.

Every (likelihood, method) is a row function (``sweep`` gives the signature) chosen by an integer
``code`` (``METHOD_CODES``) once per chunk of rows. Likelihoods without hand-written rows go
through the generic row functions of ``generic`` (``GENERIC_CODES``), which take the problem's
likelihood (``kernels.likelihoods``); each driver compiles once per likelihood class and is cached
on disk, with the hand-written rows of that class only (``hand_written_rows``). The drivers take
the fit's ``GLMProblem``, likelihood, ``GLMState`` and ``GLMScratch`` (``state``) whole and return
``(change, skipped)``: the stopping rule's measure (``sweep.posterior_change``) and the number of
messages not applied.

parallel_step: damped parallel schedule. All messages are computed from one posterior; chunks of
``problem.chunk`` rows are the unit of parallel work and chunk c writes only its rows of tau/nu
and row c of the partial sums, skipped counts and scratch, so the sweep is race-free and its
result does not depend on the number of threads. The partial sums are then reduced in chunk
order and the change measured, in the same call. ``parallel_step_serial`` is the same code
compiled without threads (no parallel region, for small problems: a parallel region costs
microseconds, and a whole scheduler quantum when a core is busy); both give the same bits.

sequential_step: rows in ``scratch.order``, the posterior refreshed after every row, then rebuilt
exactly (no drift from the incremental updates).

restore_improper: the parallel schedule's guard for methods whose messages may have negative
precisions (importance sampling keeps them, see ``importance``): a weight whose posterior or some
cavity would be improper after a sweep keeps its messages from before the sweep.
"""

from numba import njit, prange
from numba.extending import overload

from .._config import LEAF, LOGISTIC, PARALLEL_CACHED, PROBIT, SERIAL, renamed
from ..likelihoods import Logistic, Probit
from ..special import finite
from . import generic, importance, laplace, logistic, probit
from .sweep import SLAB_D, posterior_change, rebuild_posterior, reduce_posterior, tile_posterior

METHOD_CODES = {
    ("probit", "cep1"): 0,
    ("probit", "cep2"): 1,
    ("probit", "ep"): 2,
    ("logistic", "cep1"): 3,
    ("logistic", "cep2"): 4,
    ("logistic", "ep"): 5,
    ("probit", "lp"): 6,
    ("logistic", "lp"): 7,
    ("probit", "is"): 8,
    ("logistic", "is"): 9,
}
#: row functions of any likelihood (``generic``); probit's EP is the generic one
GENERIC_CODES = {"ep": 2, "cep1": 10, "cep2": 11}


def hand_written_rows(code, problem, lik, state, scratch, order, lo, hi, seq, rho, pT, pN, c, key):
    """The hand-written rows of ``code`` (``run_rows``'s arguments), resolved at compile time by
    the likelihood's class: the probit's for ``Probit``, the logistic's for ``Logistic``, and
    for any other likelihood an error (it has none). So a driver compiles the hand-written rows of
    its own likelihood only: the others' would be dead code that costs seconds of compilation
    per likelihood class (in compiled code only)."""
    raise TypeError("hand_written_rows is resolved by numba inside compiled code")


def _probit_rows(code, problem, lik, state, scratch, order, lo, hi, seq, rho, pT, pN, c, key):
    X, S = problem.X, problem.s
    tau, nu, T, N, mu, v = state
    work, old = scratch.work, scratch.old
    if not seq and X.shape[1] < SLAB_D and (code == 0 or code == 1):
        return probit.cep_slab(
            X, S, lo, hi, tau, nu, T, N, mu, v, rho, code == 1, pT, pN, c, scratch.slab, scratch.tiles
        )
    rows = (X, S, order, lo, hi, seq, tau, nu, T, N, mu, v, rho)
    if code == 0 or code == 1:
        return probit.cep_rows(*rows, code == 1, pT, pN, c, work, old)
    if code == 6:
        return laplace.lp_rows(PROBIT, *rows, pT, pN, c, work, old)
    if code == 8:
        return importance.is_rows(PROBIT, *rows, problem.n_samples, key, pT, pN, c, work, old)
    raise ValueError("run_rows: a row code of another likelihood than the probit")


def _logistic_rows(code, problem, lik, state, scratch, order, lo, hi, seq, rho, pT, pN, c, key):
    X, S, nodes, weights = problem.X, problem.s, problem.nodes, problem.weights
    tau, nu, T, N, mu, v = state
    work, old = scratch.work, scratch.old
    if not seq and X.shape[1] < SLAB_D and (code == 3 or code == 4):
        return logistic.cep_slab(
            X, S, lo, hi, tau, nu, T, N, mu, v, rho, code == 4, nodes, weights, pT, pN, c, scratch.slab,
            scratch.tiles,
        )  # fmt: skip
    rows = (X, S, order, lo, hi, seq, tau, nu, T, N, mu, v, rho)
    if code == 3 or code == 4:
        return logistic.cep_rows(*rows, code == 4, nodes, weights, pT, pN, c, work, old)
    if code == 5:
        return logistic.ep_rows(*rows, nodes, weights, pT, pN, c, old)
    if code == 7:
        return laplace.lp_rows(LOGISTIC, *rows, pT, pN, c, work, old)
    if code == 9:
        return importance.is_rows(LOGISTIC, *rows, problem.n_samples, key, pT, pN, c, work, old)
    raise ValueError("run_rows: a row code of another likelihood than the logistic")


def _no_rows(code, problem, lik, state, scratch, order, lo, hi, seq, rho, pT, pN, c, key):
    if code >= 0:  # (typed as the others: an int)
        raise ValueError("run_rows: a hand-written row code for a likelihood without hand-written rows")
    return 0


@overload(hand_written_rows, jit_options=LEAF)
def _hand_written_rows(code, problem, lik, state, scratch, order, lo, hi, seq, rho, pT, pN, c, key):
    cls = getattr(lik, "instance_class", None)
    return {Probit: _probit_rows, Logistic: _logistic_rows}.get(cls, _no_rows)


@njit(**LEAF)
def run_rows(code, problem, lik, state, scratch, order, lo, hi, seq, rho, pT, pN, c, key):
    """Rows order[lo..hi-1] by the rows function of ``code`` (one call per chunk, the loop over
    rows inside it); with ``seq`` the posterior is refreshed after every row. Rows of fewer than
    SLAB_D features in the parallel schedule (rows in order) go through the slab functions.
    Returns the number of skipped messages. key (the sweep's uint64 key) serves importance
    sampling only. The generic rows serve every likelihood; the hand-written ones only their own
    (``hand_written_rows``)."""
    if code == 2 or code == 10 or code == 11:
        X, S, nodes, weights = problem.X, problem.s, problem.nodes, problem.weights
        tau, nu, T, N, mu, v = state
        work, old = scratch.work, scratch.old
        rows = (X, S, order, lo, hi, seq, tau, nu, T, N, mu, v, rho)
        if code == 2:
            return generic.ep_rows(lik, *rows, nodes, weights, problem.offset, pT, pN, c, work, old)
        return generic.cep1_rows(lik, *rows, nodes, weights, problem.offset, pT, pN, c, work, old, code == 11)
    return hand_written_rows(code, problem, lik, state, scratch, order, lo, hi, seq, rho, pT, pN, c, key)


@njit(**LEAF)
def begin_sweep(state, scratch):
    """Keep the posterior moments before a sweep (for the change it makes)."""
    for m in range(state.mu.shape[0]):
        scratch.mu_old[m] = state.mu[m]
        scratch.v_old[m] = state.v[m]


@njit(**LEAF)
def finish_parallel(problem, state, scratch):
    """After the chunks of a parallel sweep: the posterior from the partial sums (chunk order),
    the change since ``begin_sweep`` and the number of skipped messages."""
    tau, nu, T, N, mu, v = state
    reduce_posterior(problem.prior_T, problem.prior_N, scratch.pT, scratch.pN, T, N, mu, v)
    k = 0
    for c in range(scratch.skipped.shape[0]):
        k += scratch.skipped[c]
    return posterior_change(mu, v, scratch.mu_old, scratch.v_old), k


@njit(**LEAF)
def finish_sequential(problem, state, scratch):
    """After a sequential sweep: the exact posterior (no drift from the incremental updates)
    and the change since ``begin_sweep``."""
    rebuild_posterior(
        problem.prior_T, problem.prior_N, state.tau, state.nu, problem.chunk, scratch.pT, scratch.pN, state.T,
        state.N, state.mu, state.v,
    )  # fmt: skip
    return posterior_change(state.mu, state.v, scratch.mu_old, scratch.v_old)


def _parallel_step(problem, lik, state, scratch, rho, key):
    """One damped parallel sweep, the posterior rebuilt from its partial sums, and the change."""
    pT, pN, skipped = scratch.pT, scratch.pN, scratch.skipped
    n, d = problem.X.shape
    chunk = problem.chunk
    begin_sweep(state, scratch)
    if d < SLAB_D:
        tile_posterior(state.T, state.N, state.mu, state.v, scratch.tiles)
    for c in prange(pT.shape[0]):
        lo = c * chunk
        hi = min(n, lo + chunk)
        for m in range(d):
            pT[c, m] = 0.0
            pN[c, m] = 0.0
        skipped[c] = run_rows(
            problem.code, problem, lik, state, scratch, scratch.order, lo, hi, False, rho, pT, pN, c, key
        )
    return finish_parallel(problem, state, scratch)


parallel_step = njit(**PARALLEL_CACHED)(_parallel_step)
parallel_step_serial = njit(**SERIAL)(renamed(_parallel_step, "_parallel_step_serial"))


@njit(**SERIAL)
def sequential_step(problem, lik, state, scratch, rho, key):
    """One sequential sweep over ``scratch.order`` (the posterior refreshed after every row), the
    exact rebuild of the posterior, and the change (arguments as ``parallel_step``)."""
    begin_sweep(state, scratch)
    k = run_rows(
        problem.code, problem, lik, state, scratch, scratch.order, 0, scratch.order.shape[0], True, rho,
        scratch.row_t, scratch.row_n, 0, key,
    )  # fmt: skip
    return finish_sequential(problem, state, scratch), k


@njit(**SERIAL)
def rebuild(problem, state, scratch):
    """The posterior of ``state`` from its messages (``sweep.rebuild_posterior``)."""
    rebuild_posterior(
        problem.prior_T, problem.prior_N, state.tau, state.nu, problem.chunk, scratch.pT, scratch.pN, state.T,
        state.N, state.mu, state.v,
    )  # fmt: skip


@njit(**SERIAL)
def change_since(state, scratch):
    """The change of the posterior since the start of the last step (``posterior_change``)."""
    return posterior_change(state.mu, state.v, scratch.mu_old, scratch.v_old)


@njit(**PARALLEL_CACHED)
def restore_improper(T, tau, nu, old_t, old_n, restored):
    """After a parallel sweep (T (d,) the new posterior precisions, tau/nu (n, d) the new
    messages, old_t/old_n (n, d) the messages before it): every weight m whose posterior precision
    T_m or some cavity precision T_m - tau_im is not positive (or not finite) gets its old messages
    back. restored (d,) int64 receives the number of changed messages undone per weight (0: the
    weight was proper). Each m owns column m (race-free, thread-count independent)."""
    n, d = tau.shape
    for m in prange(d):
        proper = T[m] > 0.0 and finite(T[m])
        for i in range(n):
            # (written so that a NaN makes the weight improper)
            proper = proper and (T[m] - tau[i, m] > 0.0) and finite(nu[i, m])
        k = 0
        if not proper:
            for i in range(n):
                if tau[i, m] != old_t[i, m] or nu[i, m] != old_n[i, m]:
                    k += 1
                tau[i, m] = old_t[i, m]
                nu[i, m] = old_n[i, m]
        restored[m] = k
