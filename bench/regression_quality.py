"""Inference quality of the regression methods (issue 2): KL to a gold standard, UCI table.

    python -m bench.regression_quality kl  [--samples 1000000]
    python -m bench.regression_quality uci [--uci-dir ../shared/data/uci/raw]
    python -m bench.regression_quality fixed-point [--samples 1000000]

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
from .paper.values import PAPER_AUC as _PAPER_AUC
from .paper.values import PAPER_LL as _PAPER_LL

#: the paper's models have no intercept
PAPER = {"fit_intercept": False}
METHODS = ("cep1", "cep2", "ep")
ROOT = pathlib.Path(__file__).resolve().parents[1]

# Paper, main Table 1 (test log-likelihood) and supplement Table 1 (AUC): CEP-1, CEP-2, EP as
# flat (mean, std, mean, std, mean, std) tuples (bench/paper/values.py has every method).
PAPER_LL, PAPER_AUC = (
    {
        model: {name: sum((v[m] for m in METHODS), ()) for name, v in table.items()}
        for model, table in full.items()
    }
    for full in (_PAPER_LL, _PAPER_AUC)
)


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


def report_head(title):
    """The first lines of a bench report: its title and the machine it ran on."""
    return [f"# {title}", "", f"Machine: {machine()}", ""]


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
                res = fastcep.fit(X, y, model=model, method=method, tol=1e-10, max_iter=5000, **PAPER)
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


def run_fixed_point(n_samples, seed=0):
    """Logistic CEP-1 and CEP-2 against EP on the paper's Gaussian simulation, in both schedules,
    with damping 0.3 / 1 and 9 / 40 Gauss-Hermite nodes, each to tol 1e-12: if the KL ratio and
    the posterior do not move, the gap to EP is the method's fixed point, not its solver."""
    X, y, _ = make_regression_simulation("logistic", "gaussian", n=10_000, d=4, seed=seed)
    gold = importance_gold(X, y, "logistic", n_samples=n_samples, seed=seed)
    sd = np.sqrt(np.diag(gold["cov"]))
    ep = fastcep.fit(X, y, model="logistic", method="ep", tol=1e-12, max_iter=20_000, **PAPER)
    kl_ep = gaussian_kl(gold["mean"], gold["cov"], ep.posterior.mean, ep.posterior.var)
    lines = [
        f"Machine: {machine()}",
        "",
        f"Logistic, simu-gaussian; gold ESS {gold['ess']:.0f} / {gold['n_samples']:.0f}; EP KL {kl_ep:.6f}",
        "",
        "| method | schedule | damping | nodes | KL | KL / EP | mean - EP's (gold sd) | var / EP's |",
        "|---|---|---|---|---|---|---|---|",
    ]
    settings = (("parallel", "auto"), ("parallel", 0.3), ("sequential", "auto"), ("sequential", 1.0))
    for method in ("cep1", "cep2"):
        for schedule, damping in settings:
            for nodes in (9, 40):
                kw = {} if damping == "auto" else {"damping": damping}
                res = fastcep.fit(
                    X, y, model="logistic", method=method, schedule=schedule, n_nodes=nodes, tol=1e-12,
                    max_iter=20_000, **kw, **PAPER,
                )  # fmt: skip
                assert res.converged, (method, schedule, damping, nodes)
                kl = gaussian_kl(gold["mean"], gold["cov"], res.posterior.mean, res.posterior.var)
                shift = (res.posterior.mean - ep.posterior.mean) / sd
                ratio = res.posterior.var / ep.posterior.var
                lines.append(
                    f"| {method} | {schedule} | {damping} | {nodes} | {kl:.6f} | {kl / kl_ep:.4f} "
                    f"| {np.array2string(shift, precision=3)} | {np.array2string(ratio, precision=4)} |"
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
                        res = fastcep.fit(ds.X[tr], ds.y[tr], model=model, method=method, **kw, **PAPER)
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
    f = sub.add_parser("fixed-point")
    f.add_argument("--samples", type=int, default=1_000_000)
    args = p.parse_args()
    t0 = time.perf_counter()
    if args.what == "kl":
        lines = run_kl(args.samples)
    elif args.what == "fixed-point":
        lines = run_fixed_point(args.samples)
    else:
        lines = run_uci(args.uci_dir, args.names.split(","))
    lines.append(f"\n({time.perf_counter() - t0:.0f} s)")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"regression-{args.what}.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
