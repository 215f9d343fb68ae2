"""CP count models on a small synthetic tensor whose truth is known (issue 22).

    python -m bench.cp_count_synthetic [--max-iter 300] [--settings defaults sequential ...]

A rank-3 CP tensor of shape 30 x 25 x 20 (``make_cp_tensor``, seed 1, 4,000 distinct entries,
Var f = 1), counts y ~ Poisson(exp(f)); 3,500 entries train, 500 test (a seeded permutation).
Each setting fits cp_poisson (seed 0; "defaults" is the sequential schedule since issue 22's
evidence here, "parallel" the default before) and reports the RMSE of the posterior mean of f against the
true f on the test entries, the iterations, whether it stopped converged, the messages refused,
and the largest |posterior mean|. For scale, the same tensor under cp_gaussian with noise sd 0.3
(``--gaussian``). Rows are printed as JSON lines and saved to
bench/results/cp-count-synthetic.json.
"""

import argparse
import json
import pathlib
import time
import warnings

import numpy as np

import fastcep
from fastcep.data_tools import make_cp_tensor

RESULTS = pathlib.Path(__file__).resolve().parent / "results"
SHAPE, RANK, N_OBS, N_TRAIN = (30, 25, 20), 3, 4000, 3500
SETTINGS = {
    "defaults": {},
    "parallel": {"schedule": "parallel"},
    "parallel-damping0.2": {"schedule": "parallel", "damping": 0.2},
    "block": {"schedule": "block"},
    "sequential": {"schedule": "sequential"},
    "sequential-damping0.1": {"schedule": "sequential", "damping": 0.1},
    "posterior": {"expect_under": "posterior"},
    "fixed-prior": {"prior": "fixed"},
}


def problem():
    T, _ = make_cp_tensor(SHAPE, RANK, N_OBS, noise_sd=0.0, seed=1)
    rng = np.random.default_rng(0)
    f = T.values
    perm = np.random.default_rng(5).permutation(N_OBS)
    return T.coords, f, rng, perm[:N_TRAIN], perm[N_TRAIN:]


def one(model, coords, y, f, train, test, max_iter, **options):
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fastcep.ConvergenceWarning)
        try:
            res = fastcep.fit(
                coords[train], y[train], model=model, shape=SHAPE, rank=RANK, seed=0, max_iter=max_iter,
                **options,
            )  # fmt: skip
        except FloatingPointError as exc:
            return dict(status="failed", error=str(exc), seconds=time.perf_counter() - start)
    mean, _ = res._f_moments(coords[test])
    return dict(
        status="ok",
        rmse_f=float(np.sqrt(np.mean((mean - f[test]) ** 2))),
        corr_f=float(np.corrcoef(mean, f[test])[0, 1]),
        n_iter=res.n_iter,
        converged=bool(res.converged),
        refused=int(res.trace.skipped.sum()),
        max_abs_mean=float(max(np.abs(m).max() for m in res.posterior.means)),
        seconds=time.perf_counter() - start,
    )


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-iter", type=int, default=300)
    ap.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    ap.add_argument("--gaussian", action="store_true", help="also cp_gaussian on f + N(0, 0.3^2)")
    args = ap.parse_args(argv)
    coords, f, rng, train, test = problem()
    y = rng.poisson(np.exp(f)).astype(float)
    rows = []
    if args.gaussian:
        yg = f + 0.3 * np.random.default_rng(7).standard_normal(f.size)
        fit = one("cp_gaussian", coords, yg, f, train, test, 300)
        row = dict(model="cp_gaussian", setting="defaults", **fit)
        rows.append(row)
        print(json.dumps(row), flush=True)
    for name in args.settings:
        row = dict(model="cp_poisson", setting=name, options=SETTINGS[name])
        row.update(one("cp_poisson", coords, y, f, train, test, args.max_iter, **SETTINGS[name]))
        rows.append(row)
        print(json.dumps(row), flush=True)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "cp-count-synthetic.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
