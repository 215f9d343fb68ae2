"""One family of states (issue 40, build point 4): every fit's ``res.state`` holds what its loop
changes (messages or moments, the posterior, hyper-posterior and learned likelihood parameters,
the damping and its phase, the sequential schedule's generator, the iterations behind it), and
``fit(..., init_state=res.state)`` goes on as the uninterrupted fit would: 7 + 5 iterations are
12, bitwise (a CP state carries its posterior as the fit left it, and a VMP state its second
moments, rather than have them formed again in another order), with two documented exceptions:
CP-WOPT (scipy's L-BFGS-B takes no memory to start from) and method "kjit" (its learned oracle
is not part of the state)."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import fastcep
from fastcep.data_tools import make_cp_tensor


def _regression_data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 5))
    w = rng.normal(size=5)
    binary = (X @ w + 0.5 * rng.normal(size=200) > 0).astype(int)
    counts = rng.poisson(np.exp(0.3 * X @ w)).astype(float)
    Xs = sp.random(200, 30, density=0.2, random_state=1, format="csr")
    sparse_y = (Xs @ rng.normal(size=30) > 0).astype(int)
    return {"dense": (X, binary), "counts": (X, counts), "sparse": (Xs, sparse_y)}


REGRESSION = [("dense", "probit", m) for m in ("cep1", "cep2", "ep", "lp", "is", "vb")]
REGRESSION += [("counts", "poisson", m) for m in ("cep1", "ep")] + [("sparse", "logistic", "cep1")]


def _three(fit):
    """The full fit, the first 7 iterations and 5 more from their state."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fastcep.ConvergenceWarning)
        full = fit(max_iter=12)
        part = fit(max_iter=7)
        rest = fit(max_iter=5, init_state=part.state)
    return full, part, rest


@pytest.mark.parametrize("data, model, method", REGRESSION, ids=lambda c: str(c))
def test_a_resumed_regression_is_the_uninterrupted_one(data, model, method):
    X, y = _regression_data()[data]
    full, part, rest = _three(lambda **kw: fastcep.fit(X, y, model=model, method=method, tol=0, seed=3, **kw))
    np.testing.assert_array_equal(rest.posterior.mean, full.posterior.mean)
    np.testing.assert_array_equal(rest.posterior.var, full.posterior.var)
    if method != "vb":
        assert part.state.iterations == 7 and rest.state.iterations == 12


CP = [("cp_gaussian", {"method": m}) for m in ("cep1", "lp", "vmp")]
CP += [("cp_gaussian", {"schedule": s}) for s in ("sequential", "block")]
CP += [("cp_gaussian", {"covariance": "diag"}), ("cp_probit", {}), ("cp_probit", {"schedule": "sequential"})]
CP += [("cp_poisson", {})]


@pytest.mark.parametrize("model, opts", CP, ids=lambda c: str(c))
def test_a_resumed_cp_fit_is_the_uninterrupted_one(model, opts):
    """Split at 7, inside cp_gaussian's noise warm-up (10 iterations): before the state carried
    its iterations, a resumed fit skipped the rest of the warm-up (means 8e-3 to 3e-2 away);
    before it carried its posterior, the default sweeps' per-group sums left 8e-16."""
    T, _ = make_cp_tensor((12, 10, 8), rank=2, n_obs=500, noise_sd=0.1, seed=0)
    values = {
        "cp_gaussian": T.values,
        "cp_probit": (T.values > 0).astype(int),
        "cp_poisson": np.random.default_rng(0).poisson(np.exp(T.values)).astype(float),
    }[model]
    kw = dict(model=model, shape=T.shape, rank=2, seed=0, tol=0.0, **opts)
    full, part, rest = _three(lambda **more: fastcep.fit(T.coords, values, **kw, **more))
    for k in range(3):
        np.testing.assert_array_equal(rest.posterior.means[k], full.posterior.means[k])
        np.testing.assert_array_equal(rest.posterior.covs[k], full.posterior.covs[k])
    if opts.get("method") != "vmp":
        assert part.state.iterations == 7 and rest.state.iterations == 12
