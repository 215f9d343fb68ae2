"""What a count model's CP iteration costs, and where (issue 40, "Count models").

    python -m bench.count_cost [--rank 8] [--iters 10] [--repeats 2]

Part 1, the iteration: seconds / (iterations x entries) of cp_gaussian (Alog's log1p values) and
cp_poisson (its counts) at ``--rank`` on fold 1's 21,076 training entries, each under both the
parallel and the sequential schedule (the count models' default is sequential: their parallel
sweeps run off, BENCHMARKS.md, "Count tensors"), ``--iters`` iterations with tol=0, the median of
``--repeats`` runs after a warm-up.

Part 2, the message: the one-dimensional tilted moments the count models' CEP messages take
(``kernels.likelihoods.adaptive.adaptive_tilted``), per call, on the (y, mean, variance) of every
training entry's predictive of f after a 10-iteration cp_poisson fit, for the Poisson and the
negative binomial (dispersion 0.5 and 20); the same calls' mode search alone; and the step h at
which the rule's halvings stopped (each halving doubles the nodes: the first level has about 19).

Skips cleanly without ../shared/data/alog.
"""

import argparse
import os
import pathlib
import time
import warnings

import numpy as np
from numba import njit

import fastcep
from fastcep.data_tools import load_paper_fold
from fastcep.data_tools.tensors import load_alog_counts
from fastcep.kernels.likelihoods.adaptive import (
    FD_STEP,
    _derivs,
    _offset,
    _sinh_rule,
    adaptive_tilted,
    tilted_mode,
)
from fastcep.kernels.likelihoods.negbin import NegativeBinomial
from fastcep.kernels.likelihoods.poisson import Poisson

SHARED = pathlib.Path(
    os.environ.get("FASTCEP_SHARED_DATA", pathlib.Path(__file__).resolve().parents[2] / "shared" / "data")
)


@njit(cache=True)
def _tilted_calls(lik, y, m, v):
    total = 0.0
    nodes = np.zeros(1)
    for i in range(len(y)):
        a, b, c = adaptive_tilted(lik, y[i], m[i], v[i], nodes, nodes)
        total += a + b + c
    return total


@njit(cache=True)
def _mode_calls(lik, y, m, v):
    total = 0.0
    for i in range(len(y)):
        d, s, ok = tilted_mode(lik, y[i], m[i], v[i], 0.0)
        total += d + s
    return total


@njit(cache=True)
def _final_steps(lik, y, m, v, out):
    for i in range(len(y)):
        d, s, ok = tilted_mode(lik, y[i], m[i], v[i], 0.0)
        c, d0 = _offset(m[i], d)
        g1c, g2c = _derivs(lik, y[i], c, FD_STEP * s)
        out[i] = _sinh_rule(lik, y[i], v[i], c, d0, s, False, g1c, g2c)[1]


def _median_time(run, repeats):
    run()  # (compiles)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        run()
        times.append(time.perf_counter() - t)
    return float(np.median(times)), times


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rank", type=int, default=8)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args(argv)
    if not (SHARED / "alog").is_dir():
        print(f"skipped: no data in {SHARED}")
        return
    counts, _ = load_alog_counts(1, SHARED)
    logs, _ = load_paper_fold("alog", 1, SHARED)
    n = len(counts.values)
    print(f"Part 1: us per entry and iteration, rank {args.rank}, {n} entries, median of {args.repeats}")
    base = None
    for model, values in (("cp_gaussian", logs.values), ("cp_poisson", counts.values)):
        for schedule in ("parallel", "sequential"):

            def run(model=model, values=values, schedule=schedule):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    fastcep.fit(
                        counts.coords, values, model=model, shape=counts.shape, rank=args.rank, seed=0,
                        max_iter=args.iters, tol=0.0, schedule=schedule,
                    )  # fmt: skip

            med, times = _median_time(run, args.repeats)
            us = med / (args.iters * n) * 1e6
            base = us if base is None else base
            runs = ", ".join(f"{t / (args.iters * n) * 1e6:.2f}" for t in times)
            print(
                f"  {model:12s} {schedule:10s} {us:6.2f} us ({runs}); {us / base:5.1f} x cp_gaussian parallel"
            )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = fastcep.fit(
            counts.coords, counts.values, model="cp_poisson", shape=counts.shape, rank=args.rank, seed=0,
            max_iter=10, tol=0.0,
        )  # fmt: skip
    m, v = res._f_moments(counts.coords)
    y = np.ascontiguousarray(counts.values, dtype=np.float64)
    print(f"Part 2: per tilted call, {n} calls, median of {args.repeats + 1}")
    for name, lik in (
        ("poisson", Poisson()),
        ("negbin r=0.5", NegativeBinomial(0.5)),
        ("negbin r=20", NegativeBinomial(20.0)),
    ):
        whole, _ = _median_time(lambda lik=lik: _tilted_calls(lik, y, m, v), args.repeats + 1)
        mode, _ = _median_time(lambda lik=lik: _mode_calls(lik, y, m, v), args.repeats + 1)
        steps = np.empty(n)
        _final_steps(lik, y, m, v, steps)
        h, c = np.unique(steps, return_counts=True)
        share = ", ".join(f"h={hh:g}: {cc / n:.1%}" for hh, cc in zip(h[::-1], c[::-1], strict=True))
        print(
            f"  {name:13s} {whole / n * 1e6:5.2f} us a call, the mode alone {mode / n * 1e6:5.2f} us; "
            f"last step {share}"
        )


if __name__ == "__main__":
    main()
