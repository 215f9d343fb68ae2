"""The NumPy reference of ``bench.numpy_reference`` against ``fastcep.fit`` (a check, not a benchmark).

    python -m pytest bench/test_numpy_reference.py -s

20 damped (0.5) parallel CEP-1 sweeps from the flat start on the paper's 10,000 x 4 simulation
give the same posterior as fastcep to about 1e-8 relative (measured: about 1e-14), in both forms
of the new message; and on features with exact zeros. On a well-separated data set (features
scaled by 30) DESIGN.md's literal ``tau* = 1/var - tc`` loses weak messages to cancellation and
skips them (the stale messages stay); the kernels' cancellation-free form avoids that, and that
test prints both.
"""

import numpy as np
import pytest

import fastcep
from fastcep.data_tools import make_regression_simulation

from . import numpy_reference as ref

RTOL = 1e-8


def _fastcep(X, y, model, sweeps):
    return fastcep.fit(
        X,
        y,
        model=model,
        method="cep1",
        damping=0.5,
        max_iter=sweeps,
        tol=0.0,
        schedule="parallel",
        fit_intercept=False,
    )


def _rel(a, b):
    return float(np.max(np.abs(a - b) / np.abs(b)))


@pytest.mark.parametrize("message", ["design", "cancellation_free"])
@pytest.mark.parametrize("model", ["probit", "logistic"])
def test_matches_fastcep_on_simulation(model, message):
    X, y, _ = make_regression_simulation(model, "gaussian", n=10_000, d=4, seed=0)
    mean, var, st = ref.sweeps(X, y, model, 20, 0.5, message=message, return_state=True)
    res = _fastcep(X, y, model, 20)
    em, ev = _rel(mean, res.posterior.mean), _rel(var, res.posterior.var)
    print(f"\n{model} ({message}): max relative difference, mean {em:.2e}, var {ev:.2e}")
    assert sum(st["skipped"]) == int(np.sum(res.trace.skipped)) == 0
    assert em < RTOL and ev < RTOL


@pytest.mark.parametrize("model", ["probit", "logistic"])
def test_matches_fastcep_with_zero_features(model):
    """x_im = 0: the site starts at precision 0 and its message stays exactly flat."""
    X, y, _ = make_regression_simulation(model, "gaussian", n=2000, d=6, seed=1)
    X[np.random.default_rng(1).random(X.shape) < 0.3] = 0.0
    mean, var, st = ref.sweeps(X, y, model, 20, 0.5, return_state=True)
    res = _fastcep(X, y, model, 20)
    assert np.array_equal(st["tau"] == 0.0, X == 0.0)
    assert np.array_equal(res.state.sites.tau == 0.0, X == 0.0)
    assert _rel(mean, res.posterior.mean) < RTOL and _rel(var, res.posterior.var) < RTOL


@pytest.mark.parametrize("model", ["probit", "logistic"])
def test_weak_messages_on_separated_data(model):
    """Features x 30: many sites whose message is nearly flat (a ~ 1e-16 and below)."""
    X, y, _ = make_regression_simulation(model, "gaussian", n=2000, d=6, seed=1)
    X *= 30.0
    res = _fastcep(X, y, model, 20)
    skipped = int(np.sum(res.trace.skipped))
    out = {}
    for message in ("design", "cancellation_free"):
        mean, var, st = ref.sweeps(X, y, model, 20, 0.5, message=message, return_state=True)
        out[message] = (_rel(mean, res.posterior.mean), _rel(var, res.posterior.var), sum(st["skipped"]))
        print(
            f"\n{model} x 30 ({message}): mean {out[message][0]:.2e}, var {out[message][1]:.2e}, "
            f"skipped {out[message][2]} (fastcep {skipped})"
        )
    assert max(out["cancellation_free"][:2]) < 1e-3
