"""A regression fit that learns its likelihood's parameter, with and without a busy core.

    python -m pytest bench/test_speed_learned.py --benchmark-columns=median,iqr,rounds -s

The learned dispersion of a negative binomial is searched every sweep (``glm.learn.em_step``:
about 35 evaluations of the expected log-likelihood, ``kernels.glm.generic.expected_log_lik``).
Two cases of ``fastcep.fit(X, y, model="negbin")`` with every default: 2,000 x 5 counts of
dispersion 2, and the all-zero counts of 150 rows that ``tests/test_extreme_values.py`` fits (its
dispersion runs to the end of its range, 221 sweeps). Each parametrised by ``load`` (quiet, or a
spinning process on one core: ``test_speed_contention``'s fixture). The fit's sweeps and learned
dispersion are stored in ``extra_info``.
"""

import os

import numpy as np
import pytest

import fastcep

from .test_speed_contention import load  # noqa: F401 (the fixture)

ROUNDS = int(os.environ.get("FASTCEP_BENCH_LEARNED_ROUNDS", 5))


def _counts(case):
    rng = np.random.default_rng(0)
    if case == "zeros":
        return rng.standard_normal((150, 3)), np.zeros(150)
    X = rng.standard_normal((2000, 5))
    mean = np.exp(X @ [0.4, -0.3, 0.2, 0.1, 0.0] + 0.5)
    return X, rng.negative_binomial(2.0, 2.0 / (2.0 + mean)).astype(float)


@pytest.mark.parametrize("case", ["counts", "zeros"])
def test_negbin_fit_learning_its_dispersion(benchmark, load, case):  # noqa: F811
    X, y = _counts(case)
    fastcep.fit(X, y, model="negbin", max_iter=3)  # (compiled before the timing)
    res = benchmark.pedantic(lambda: fastcep.fit(X, y, model="negbin"), rounds=ROUNDS, iterations=1)
    benchmark.extra_info.update(
        load=load["load"], sweeps=res.n_iter, dispersion=float(res.likelihood.dispersion)
    )
    assert np.all(np.isfinite(res.posterior.mean))
