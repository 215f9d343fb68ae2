"""Outliers in a CP tensor whose truth is known (issue 22): cp_student_t against cp_gaussian.

    python -m bench.cp_outliers [--seeds 0 1 2 3 4] [--settings defaults sequential diag ...]
                                [--tag SUFFIX]

A rank-3 CP tensor of shape 20 x 15 x 12 (factors N(0, 1 / 1.44)), 1,500 observed entries
f + 0.2 t_4 (Student-t noise, 4 degrees of freedom), 10 % of them moved by +-6 (outliers); 500
other entries, drawn alike, score the fits. Each setting fits cp_student_t (its scale learned)
from every seed of ``--seeds`` and reports the RMSE of the predictive mean of f against the true
f on the 500 entries, the learned scale and the iterations; cp_gaussian's (seed 0) gives the
scale of a fit that takes the outliers at their word. The same file run from an older checkout
(its root first on the path) measures that code on the same tensor. Rows are printed and saved
to bench/results/cp-outliers{SUFFIX}.json.
"""

import argparse
import json
import pathlib
import time
import warnings

import numpy as np

import fastcep

RESULTS = pathlib.Path(__file__).resolve().parent / "results"
SHAPE, RANK, N_OBS, N_TEST = (20, 15, 12), 3, 1500, 500
NOISE_SCALE, NOISE_DF, OUTLIER = 0.2, 4, 6.0
SETTINGS = {
    "defaults": {},
    "sequential": {"schedule": "sequential"},
    "diag": {"covariance": "diag"},
    "fixed-prior": {"prior": "fixed"},
    "cavity": {"expect_under": "cavity"},
}


def outlier_tensor(seed=0):
    """(coords (N_OBS, 3), values, shape, (test coords (N_TEST, 3), their f)): the tensor of the
    module's text, drawn from one generator of ``seed``."""
    rng = np.random.default_rng(seed)
    U = [rng.normal(size=(d, RANK)) / 1.2 for d in SHAPE]

    def draw(n):
        coords = np.stack([rng.integers(0, d, n) for d in SHAPE], axis=1)
        return coords, np.sum(np.prod([U[k][coords[:, k]] for k in range(len(SHAPE))], axis=0), axis=1)

    coords, f = draw(N_OBS)
    y = f + NOISE_SCALE * rng.standard_t(NOISE_DF, f.size)
    out = rng.choice(f.size, f.size // 10, replace=False)
    y[out] += rng.choice([-OUTLIER, OUTLIER], out.size)
    return coords, y, SHAPE, draw(N_TEST)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    ap.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    ap.add_argument("--tag", default="")
    args = ap.parse_args(argv)
    coords, y, shape, (test, f_test) = outlier_tensor()
    rows = []

    def fit(model, seed, options):
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", fastcep.ConvergenceWarning)
            res = fastcep.fit(coords, y, model=model, shape=shape, rank=RANK, seed=seed, **options)
        rmse = float(np.sqrt(np.mean((res.predict(test) - f_test) ** 2)))
        scale = getattr(res.likelihood, "scale", None) if model == "cp_student_t" else None
        return dict(
            rmse_f=rmse, scale=scale, n_iter=res.n_iter, converged=res.converged,
            seconds=time.perf_counter() - start,
        )  # fmt: skip

    rows.append(dict(model="cp_gaussian", setting="defaults", seed=0, **fit("cp_gaussian", 0, {})))
    print(json.dumps(rows[-1]), flush=True)
    for name in args.settings:
        for seed in args.seeds:
            try:
                cell = fit("cp_student_t", seed, SETTINGS[name])
            except Exception as exc:  # (recorded: the point of the table)
                cell = dict(error=f"{type(exc).__name__}: {exc}")
            rows.append(dict(model="cp_student_t", setting=name, seed=seed, **cell))
            print(json.dumps(rows[-1]), flush=True)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"cp-outliers{args.tag}.json").write_text(json.dumps(rows, indent=1))
    print("\n| model, setting | RMSE of f per seed | median |\n|---|---|---|")
    for name in ["gaussian", *args.settings]:
        sel = [r for r in rows if (r["model"] == "cp_gaussian") == (name == "gaussian") and
               (name == "gaussian" or r["setting"] == name)]  # fmt: skip
        vals = [r.get("rmse_f") for r in sel]
        cells = " / ".join("failed" if v is None else f"{v:.3f}" for v in vals)
        ok = [v for v in vals if v is not None]
        label = "cp_gaussian" if name == "gaussian" else f"cp_student_t, {name}"
        print(f"| {label} | {cells} | {np.median(ok):.3f} |" if ok else f"| {label} | {cells} | |")


if __name__ == "__main__":
    main()
