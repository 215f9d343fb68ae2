"""Test helpers: the regression drivers of ``fastcep.kernels.glm.schedules`` called on plain arrays."""

import numpy as np

from fastcep.kernels.glm import schedules as S
from fastcep.kernels.glm.state import GLMProblem, GLMScratch, GLMState
from fastcep.kernels.glm.sweep import tile_posterior
from fastcep.kernels.likelihoods import REGISTRY


def code_and_likelihood(model, method):
    """(row-function code, likelihood) of a model name, or of a likelihood instance (the generic
    row functions)."""
    if isinstance(model, str):
        return S.METHOD_CODES[(model, method)], REGISTRY[model]()
    return S.GENERIC_CODES[method], model


def setup(X, s, tau, nu, prior_T, model, method, chunk, nodes, weights, n_samples=0, prior_N=None):
    """(problem, lik, state, scratch) over the given arrays (tau, nu used in place), posterior
    rebuilt; ``model`` a name or a likelihood instance (``code_and_likelihood``)."""
    n, d = X.shape
    n_chunks = max(1, -(-n // chunk))
    code, lik = code_and_likelihood(model, method)
    prior_N = np.zeros(d) if prior_N is None else prior_N
    problem = GLMProblem(X, s, prior_T, prior_N, nodes, weights, code, chunk, n_samples)
    state = GLMState(tau, nu, *(np.empty(d) for _ in range(4)))
    scratch = GLMScratch.allocate(n, d, chunk, n_chunks)
    S.rebuild(problem, state, scratch)
    return problem, lik, state, scratch


def one_row(model, method, x, s, tau_r, nu_r, T, N, rho, nodes, weights, n_samples=0, key=0):
    """The row function of (model, method) on one row whose cavities come from the posterior
    natural parameters T, N; tau_r, nu_r (d,) updated in place. Returns (skipped, acc_t, acc_n):
    acc_t, acc_n the row's contribution to the partial sums."""
    d = x.shape[0]
    code, lik = code_and_likelihood(model, method)
    problem = GLMProblem(
        x[None, :].copy(),
        np.array([s], dtype=np.float64),
        np.zeros(d),
        np.zeros(d),
        nodes,
        weights,
        code,
        1,
        n_samples,
    )
    tau, nu = tau_r[None, :].copy(), nu_r[None, :].copy()
    state = GLMState(tau, nu, T.copy(), N.copy(), N / T, 1.0 / T)
    pT, pN = np.zeros((1, d)), np.zeros((1, d))
    scratch = GLMScratch.allocate(1, d, 1, 1)
    tile_posterior(state.T, state.N, state.mu, state.v, scratch.tiles)  # (rows of d < SLAB_D: slabs)
    order = np.arange(1)
    k = S.run_rows(code, problem, lik, state, scratch, order, 0, 1, False, rho, pT, pN, 0, np.uint64(key))
    tau_r[:] = tau[0]
    nu_r[:] = nu[0]
    return int(k), pT[0], pN[0]
