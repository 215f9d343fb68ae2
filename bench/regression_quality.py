"""Inference quality of the regression methods (issue 2): KL to a gold standard, UCI table.

    python -m bench.regression_quality kl  [--samples 1000000]
    python -m bench.regression_quality uci [--uci-dir ../shared/data/uci/raw]

Prints markdown tables (also written to bench/results/) with the machine and date.
"""

import argparse
import datetime
import os
import pathlib
import platform
import time

import numpy as np

import fastcep
from fastcep.data_tools import load_uci, make_regression_simulation, uci_splits
from fastcep.metrics import gaussian_kl

from .gold import RESULTS, importance_gold

METHODS = ("cep1", "cep2", "ep")
ROOT = pathlib.Path(__file__).resolve().parents[1]

# Paper, main Table 1 (test log-likelihood) and supplement Table 1 (AUC): CEP-1, CEP-2, EP.
PAPER_LL = {
    "logistic": {
        "australian": (-0.449, 0.012, -0.450, 0.015, -0.450, 0.015),
        "breast": (-0.579, 0.020, -0.565, 0.020, -0.585, 0.024),
        "crabs": (-0.316, 0.004, -0.315, 0.003, -0.313, 0.003),
        "ionos": (-0.316, 0.022, -0.302, 0.023, -0.309, 0.025),
        "pima": (-0.541, 0.007, -0.540, 0.006, -0.541, 0.007),
        "sonar": (-0.522, 0.017, -0.513, 0.027, -0.531, 0.026),
    },
    "probit": {
        "australian": (-0.428, 0.012, -0.431, 0.015, -0.435, 0.015),
        "breast": (-0.583, 0.018, -0.592, 0.023, -0.615, 0.032),
        "crabs": (-0.228, 0.009, -0.226, 0.009, -0.250, 0.008),
        "ionos": (-0.286, 0.012, -0.277, 0.015, -0.307, 0.010),
        "pima": (-0.553, 0.009, -0.554, 0.009, -0.554, 0.009),
        "sonar": (-0.533, 0.032, -0.528, 0.032, -0.553, 0.039),
    },
}
PAPER_AUC = {
    "probit": {
        "australian": (0.883, 0.009, 0.883, 0.009, 0.880, 0.009),
        "breast": (0.686, 0.016, 0.690, 0.016, 0.677, 0.020),
        "crabs": (0.995, 0.002, 0.995, 0.002, 0.995, 0.002),
        "ionos": (0.926, 0.006, 0.929, 0.006, 0.903, 0.005),
        "pima": (0.825, 0.004, 0.825, 0.004, 0.825, 0.004),
        "sonar": (0.813, 0.023, 0.831, 0.022, 0.813, 0.022),
    },
    "logistic": {
        "australian": (0.873, 0.008, 0.873, 0.010, 0.873, 0.010),
        "breast": (0.675, 0.021, 0.683, 0.020, 0.677, 0.020),
        "crabs": (0.993, 0.001, 0.992, 0.001, 0.993, 0.001),
        "ionos": (0.912, 0.011, 0.925, 0.010, 0.914, 0.010),
        "pima": (0.830, 0.005, 0.831, 0.005, 0.830, 0.005),
        "sonar": (0.820, 0.015, 0.831, 0.016, 0.827, 0.016),
    },
}


def machine():
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, {datetime.date.today()}"


def run_kl(n_samples, seed=0):
    lines = [
        f"Machine: {machine()}",
        "",
        "| model | data | gold ESS / samples | KL_min | CEP-1 KL | CEP-2 KL | EP KL "
        "| CEP-1 / EP | CEP-2 / EP |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for model in ("probit", "logistic"):
        for features in ("gaussian", "mixture"):
            X, y, _ = make_regression_simulation(model, features, n=10_000, d=4, seed=seed)
            gold = importance_gold(X, y, model, n_samples=n_samples, seed=seed)
            kl = {}
            for method in METHODS:
                res = fastcep.fit(X, y, model=model, method=method, tol=1e-10, max_iter=5000)
                assert res.converged, (model, features, method)
                kl[method] = gaussian_kl(gold["mean"], gold["cov"], res.posterior.mean, res.posterior.var)
            kl_min = gaussian_kl(gold["mean"], gold["cov"], gold["mean"], np.diag(gold["cov"]))
            lines.append(
                f"| {model} | simu-{features} | {gold['ess']:.0f} / {gold['n_samples']:.0f} | {kl_min:.5f} "
                f"| {kl['cep1']:.5f} | {kl['cep2']:.5f} | {kl['ep']:.5f} "
                f"| {kl['cep1'] / kl['ep']:.4f} | {kl['cep2'] / kl['ep']:.4f} |"
            )
            print(lines[-1], flush=True)
    return lines


def _uci_cell(vals):
    return f"{np.mean(vals):.3f} ± {np.std(vals):.3f}"


def run_uci(uci_dir, names):
    configs = {
        "converged": dict(),
        "paper rule": dict(damping=0.02, stopping="paper", tol=1e-5),
    }
    scores = {}  # (model, name, config, method) -> (lls, aucs, seconds, iterations)
    for name in names:
        ds = load_uci(name, None if name == "pima.te" else uci_dir)
        for model in ("probit", "logistic"):
            for label, kw in configs.items():
                for method in METHODS:
                    lls, aucs, secs, its = [], [], [], []
                    for tr, te in uci_splits(len(ds.y), 5, seed=0):
                        t0 = time.perf_counter()
                        res = fastcep.fit(ds.X[tr], ds.y[tr], model=model, method=method, **kw)
                        secs.append(time.perf_counter() - t0)
                        its.append(res.n_iter)
                        lls.append(res.log_likelihood(ds.X[te], ds.y[te]))
                        aucs.append(res.auc(ds.X[te], ds.y[te]))
                    scores[(model, name, label, method)] = (lls, aucs, secs, its)
                    print(model, name, label, method, _uci_cell(lls), _uci_cell(aucs), flush=True)
    lines = [f"Machine: {machine()}", ""]
    for k_metric, metric in enumerate(("log-likelihood", "AUC")):
        for model in ("probit", "logistic"):
            lines += [
                f"**{model}, test {metric}** (5 random halves, seed 0; mean ± std)",
                "",
                "| data | stopping | CEP-1 | CEP-2 | EP | paper CEP-1 | paper CEP-2 | paper EP |",
                "|---|---|---|---|---|---|---|---|",
            ]
            for name in names:
                paper_key = "pima" if name in ("pima", "pima.te") else name
                pv = (PAPER_LL if metric == "log-likelihood" else PAPER_AUC)[model][paper_key]
                paper_cells = [f"{pv[2 * k]:.3f} ± {pv[2 * k + 1]:.3f}" for k in range(3)]
                for label in configs:
                    cells = [_uci_cell(scores[(model, name, label, m)][k_metric]) for m in METHODS]
                    lines.append(f"| {name} | {label} | " + " | ".join(cells + paper_cells) + " |")
            lines.append("")
    lines += [
        "**Mean fit time in seconds (mean iterations)**, same runs",
        "",
        "| data | model | stopping | CEP-1 | CEP-2 | EP |",
        "|---|---|---|---|---|---|",
    ]
    for name in names:
        for model in ("probit", "logistic"):
            for label in configs:
                cells = []
                for m in METHODS:
                    _, _, secs, its = scores[(model, name, label, m)]
                    cells.append(f"{np.mean(secs):.3f} ({np.mean(its):.0f})")
                lines.append(f"| {name} | {model} | {label} | " + " | ".join(cells) + " |")
    return lines


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="what", required=True)
    k = sub.add_parser("kl")
    k.add_argument("--samples", type=int, default=1_000_000)
    u = sub.add_parser("uci")
    u.add_argument("--uci-dir", default=str(ROOT.parent / "shared" / "data" / "uci" / "raw"))
    u.add_argument("--names", default="australian,breast,crabs,ionos,pima,pima.te,sonar")
    args = p.parse_args()
    t0 = time.perf_counter()
    if args.what == "kl":
        lines = run_kl(args.samples)
    else:
        lines = run_uci(args.uci_dir, args.names.split(","))
    lines.append(f"\n({time.perf_counter() - t0:.0f} s)")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"regression-{args.what}.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
