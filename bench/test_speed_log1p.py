"""Speed of the counts' log-scale prediction (``predict(..., scale="log1p")``), with
pytest-benchmark.

    python -m pytest bench/test_speed_log1p.py --benchmark-columns=median,iqr,min,rounds -s

E[log(1 + y)] and Var[log(1 + y)] (``Likelihood.log1p_moments``) of N = 100,000 entries whose f
is N(m, v), m ~ N(1, 2^2), v ~ U(0, 2) (a typical fit's test entries), and the same with 5 % of
them wide (m = -170, v = 1e4: the zero slices of a count tensor). Beside them, in the same run:
the closed-form predictive mean and variance of y (``mean_var``, the cost floor) and the
predictive median of the count by bisection on its CDF (``bench.cp_counts.predictive_median``,
the log-scale point used before, on SMALL = 1,000 of the entries: compare the time an entry,
``us_per_entry``), for the negative binomial at dispersion 0.6 and the Poisson.
"""

import numpy as np
import pytest
from scipy import stats

from fastcep.likelihoods import NegativeBinomial, Poisson

from .cp_counts import negbin_cdf, predictive_median

N = 100_000
#: the entries of the median's run (its bisection evaluates the CDF at 401 x 48 points an entry)
SMALL = 1_000


def _moments(wide):
    rng = np.random.default_rng(0)
    m, v = rng.normal(1.0, 2.0, N), rng.uniform(0.0, 2.0, N)
    if wide:
        m[: N // 20], v[: N // 20] = -170.0, 1e4
    return m, v


LIKELIHOODS = {"negbin": NegativeBinomial(dispersion=0.6), "poisson": Poisson()}


@pytest.mark.parametrize("wide", [False, True], ids=["typical", "wide"])
@pytest.mark.parametrize("name", list(LIKELIHOODS))
def test_log1p_moments(benchmark, name, wide):
    lik, (m, v) = LIKELIHOODS[name], _moments(wide)
    lik.log1p_moments(m[:10], v[:10])  # (compile)
    mean, var = benchmark.pedantic(lik.log1p_moments, args=(m, v), rounds=7, warmup_rounds=1)
    assert np.all(np.isfinite(mean)) and np.all(var >= 0.0)
    benchmark.extra_info["us_per_entry"] = benchmark.stats.stats.median / N * 1e6


@pytest.mark.parametrize("name", list(LIKELIHOODS))
def test_mean_var_baseline(benchmark, name):
    lik, (m, v) = LIKELIHOODS[name], _moments(False)
    benchmark.pedantic(lik.mean_var, args=(m, v), rounds=7, warmup_rounds=1)


@pytest.mark.parametrize("name", list(LIKELIHOODS))
def test_predictive_median_baseline(benchmark, name):
    lik, (m, v) = LIKELIHOODS[name], _moments(False)
    cdf = negbin_cdf(lik.dispersion) if name == "negbin" else stats.poisson.cdf
    median = benchmark.pedantic(predictive_median, args=(m[:SMALL], v[:SMALL], cdf), rounds=3)
    assert np.all(median >= 0.0)
    benchmark.extra_info["us_per_entry"] = benchmark.stats.stats.median / SMALL * 1e6
