"""fastcep on default threads against one thread, with and without a busy core (issue 19).

    python -m pytest bench/test_speed_contention.py --benchmark-columns=median,rounds -s

On a machine with few cores another process that keeps a core busy can make numba's default
thread count slower than one thread (a parallel region waits for its slowest thread). Two cases:
a 10,000 x 4 probit CEP-1 regression with the default options, and a rank-8 ``cp_gaussian``
decomposition of a (200, 150, 100) tensor with 20,000 observed entries (30 iterations); each
parametrised by ``load``: "quiet", or "busy" with a separate ``python -c "while True: pass"``
process running for the tests of that parametrisation (killed afterwards, also on failure).
A benchmark round is one default-thread fit and one ``n_threads=1`` fit, alternating which goes
first; the medians over rounds of each and their ratio default / one-thread are printed and
stored in ``extra_info`` (with ``numba.get_num_threads()`` and ``os.cpu_count()``).
"""

import os
import subprocess
import sys
import time

import numba
import numpy as np
import pytest

import fastcep
from fastcep.data_tools import make_cp_tensor, make_regression_simulation

ROUNDS = int(os.environ.get("FASTCEP_BENCH_CONTENTION_ROUNDS", 5))
CP_SHAPE = (200, 150, 100)


@pytest.fixture(scope="module", params=["quiet", "busy"])
def load(request):
    """The load: "quiet", or "busy" (a separate process spinning on one core meanwhile)."""
    if request.param == "quiet":
        yield {"load": "quiet", "proc": None}
        return
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.2)  # let it start spinning
        assert proc.poll() is None, "the busy-loop process did not start"
        yield {"load": "busy", "proc": proc}
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def regression():
    X, y, _ = make_regression_simulation("probit", "gaussian", n=10_000, d=4, seed=0)
    return X, y


@pytest.fixture(scope="module")
def cp_tensor():
    T, _ = make_cp_tensor(CP_SHAPE, rank=8, n_obs=20_000, noise_sd=0.1, seed=0)
    return T


def _regression_fit(data):
    X, y = data

    def fit(n_threads):
        return fastcep.fit(X, y, model="probit", method="cep1", n_threads=n_threads)

    def check(res):
        assert res.converged
        assert np.all(np.isfinite(res.posterior.mean)) and np.all(res.posterior.var > 0)
        return res.posterior.mean, res.posterior.var

    return fit, check


def _cp_fit(T):
    kw = dict(model="cp_gaussian", shape=T.shape, rank=8, max_iter=30, tol=0.0, seed=0)

    def fit(n_threads):
        return fastcep.fit(T.coords, T.values, n_threads=n_threads, **kw)

    def check(res):
        assert res.n_iter == 30
        rmse = res.rmse(T.coords, T.values)
        assert np.isfinite(rmse) and rmse < np.std(T.values)
        return res.posterior.means[0], res.posterior.covs[0]

    return fit, check


@pytest.mark.parametrize("case", ["probit_regression_10000x4", "cp_gaussian_rank8_20000"])
def test_threads_under_contention(benchmark, load, regression, cp_tensor, case):
    fit, check = _regression_fit(regression) if case.startswith("probit") else _cp_fit(cp_tensor)
    # compile (and check) both thread settings; same answer on 1 and N threads
    a, b = check(fit(None)), check(fit(1))
    for u, v in zip(a, b, strict=True):
        np.testing.assert_allclose(u, v, rtol=1e-10, atol=0.0)
    bitwise = all(np.array_equal(u, v) for u, v in zip(a, b, strict=True))

    times = {"default": [], "one": []}
    state = {"round": 0}

    def one_round():
        order = ("default", "one") if state["round"] % 2 == 0 else ("one", "default")
        state["round"] += 1
        for which in order:
            t0 = time.perf_counter()
            fit(None if which == "default" else 1)
            times[which].append(time.perf_counter() - t0)

    benchmark.pedantic(one_round, rounds=ROUNDS, iterations=1, warmup_rounds=0)
    proc = load["proc"]
    if proc is not None:
        assert proc.poll() is None, "the busy-loop process died during the measurement"
    med_d, med_1 = float(np.median(times["default"])), float(np.median(times["one"]))
    info = benchmark.extra_info
    info["load"] = load["load"]
    info["numba_threads"] = numba.get_num_threads()
    info["cpu_count"] = os.cpu_count()
    info["rounds"] = len(times["one"])
    info["default_threads_median_s"] = med_d
    info["one_thread_median_s"] = med_1
    info["default_over_one_thread"] = med_d / med_1
    info["same_result_bitwise"] = bitwise
    print(
        f"\n{case} [{load['load']}, {numba.get_num_threads()} numba threads, {os.cpu_count()} CPUs, "
        f"{len(times['one'])} rounds]: default {med_d * 1e3:.1f} ms, one thread {med_1 * 1e3:.1f} ms, "
        f"default / one = {med_d / med_1:.2f}"
    )
