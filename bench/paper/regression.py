"""Reproduction of the paper's regression experiments (section 5.1): one command.

    python -m bench.paper.regression [--gold-samples 1000000] [--is-samples 2000] [--is-iters 40]
                                     [--uci-dir ../shared/data/uci/raw] [--skip-uci]

(a) KL(gold || q) against running time, iteration by iteration, for CEP-1, CEP-2, EP, LP and IS
on both simulations (10,000 samples, 4 weights) of both models (the paper's Figure 1), gold = a
Gaussian fitted to a large importance sample (bench/gold.py, its effective sample size stated);
(b) the UCI table of test log-likelihood and AUC (5 random halves) for every method beside the
paper's values; (c) mean running time per method and data set. Writes
bench/paper/sections/regression.md and the PNG figures, then assembles
bench/paper/REPRODUCTION.md from every section present.
"""

import argparse
import os
import pathlib
import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import fastcep  # noqa: E402
from fastcep.data_tools import load_uci, make_regression_simulation, uci_splits  # noqa: E402
from fastcep.glm.engine import METHODS as AVAILABLE  # noqa: E402
from fastcep.metrics import gaussian_kl  # noqa: E402

from ..gold import importance_gold  # noqa: E402
from ..regression_quality import machine  # noqa: E402
from .values import PAPER_AUC, PAPER_KJIT_SIMULATION, PAPER_LL, UCI  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
SECTIONS = HERE / "sections"
ROOT = HERE.parents[1]
NAMES = {
    "cep1": "CEP-1",
    "cep2": "CEP-2",
    "ep": "EP",
    "lp": "LP",
    "is": "IS",
    "vb": "VB",
    "kjit": "KJIT",
}
KL_METHODS = [m for m in ("cep1", "cep2", "ep", "lp", "is", "kjit") if m in AVAILABLE]
TABLE_METHODS = [m for m in ("cep1", "cep2", "lp", "ep", "vb", "kjit", "is") if m in AVAILABLE]


def method_options(method, model, args, schedule="parallel"):
    """Fit options per method: converged runs, except the sampling methods (fixed sweeps).

    IS and KJIT have a fixed budget of sweeps (damping 0.5) and run ``schedule``: the parallel
    one on the simulations (10,000 x 4), the sequential one on the UCI sets, where the damped
    parallel schedule diverges at damping 0.5 even with exact moments (analytic EP, 40 sweeps,
    measured: test log-likelihoods of -9 to -20 (logistic) and -1e11 to -4e15 (probit) on five
    of the six sets, pima alone fine; the sequential schedule reaches EP's values), and at 0.1 it
    is still far from converged after 40 sweeps.
    """
    # the paper's models have no intercept
    if method in ("is", "kjit"):
        return dict(
            n_samples=args.is_samples, max_iter=args.is_iters, damping=0.5, schedule=schedule, seed=0,
            fit_intercept=False,
        )  # fmt: skip
    out = dict(tol=1e-8, max_iter=5000, fit_intercept=False)
    if model == "logistic" and method == "ep":
        out["n_nodes"] = 9  # the paper's EP: two-dimensional Gauss-Hermite, 9 nodes a dimension
    return out


def trajectory(X, y, model, method, args):
    """(elapsed seconds, mean, var) after every iteration of one fit (compiled beforehand)."""
    warm = dict(method_options(method, model, args), max_iter=2)
    fastcep.fit(X[:50], y[:50], model=model, method=method, **warm)  # the JIT compile is not timed
    rows = []

    def cb(info):
        rows.append((info.elapsed, info.posterior.mean.copy(), info.posterior.var.copy()))

    fastcep.fit(X, y, model=model, method=method, callback=cb, **method_options(method, model, args))
    return rows


def figure_kl(args, finals):
    """The Figure 1 section; finals[(model, features, method)] receives (final KL, seconds)."""
    lines = [
        "### (a) KL(gold || q) against running time (Figure 1)",
        "",
        "Both simulations of the paper (10,000 samples, 4 weights, seed 0). Gold: a Gaussian fitted to "
        f"{args.gold_samples:,} importance samples of the exact posterior (Student-t proposal at the "
        "MAP, bench/gold.py). Each curve: one fit, KL after every iteration against the time since "
        "its start. IS: "
        f"{args.is_samples:,} draws per row and sweep, {args.is_iters} parallel sweeps, damping 0.5.",
        "",
        "| model | data | gold ESS | " + " | ".join(f"{NAMES[m]} KL (s)" for m in KL_METHODS) + " |",
        "|---|---|---|" + "---|" * len(KL_METHODS),
    ]
    fig, axes = plt.subplots(2, 2, figsize=(10, 8))
    for r, model in enumerate(("probit", "logistic")):
        for c, features in enumerate(("gaussian", "mixture")):
            X, y, _ = make_regression_simulation(model, features, n=10_000, d=4, seed=0)
            gold = importance_gold(X, y, model, n_samples=args.gold_samples, seed=0)
            ax = axes[r, c]
            cells = []
            for method in KL_METHODS:
                if method == "kjit" and model != "logistic":
                    cells.append("-")
                    continue
                rows = trajectory(X, y, model, method, args)
                t = np.array([e for e, _, _ in rows])
                kl = np.array([gaussian_kl(gold["mean"], gold["cov"], m, v) for _, m, v in rows])
                ax.loglog(np.maximum(t, 1e-5), kl, label=NAMES[method], marker=".", markersize=3)
                cells.append(f"{kl[-1]:.4g} ({t[-1]:.3g})")
                finals[(model, features, method)] = (kl[-1], t[-1])
                print(model, features, method, cells[-1], flush=True)
            ax.set_title(f"{model}, simu-{features}")
            ax.set_xlabel("seconds")
            ax.set_ylabel("KL(gold || q)")
            ax.legend(fontsize=8)
            lines.append(f"| {model} | simu-{features} | {gold['ess']:.0f} | " + " | ".join(cells) + " |")
    fig.suptitle(f"KL against running time; {machine()}", fontsize=9)
    fig.tight_layout()
    fig.savefig(HERE / "figure1-kl-vs-time.png", dpi=110)
    plt.close(fig)
    kj = PAPER_KJIT_SIMULATION
    lines += [
        "",
        "![KL against time](figure1-kl-vs-time.png)",
        "",
        "Final KL (seconds of the whole fit). The paper reports KJIT (its C# Infer.NET implementation) at "
        f"{kj['gaussian'][0]:.0f} s / KL {kj['gaussian'][1]} and {kj['mixture'][0]:.0f} s / KL "
        f"{kj['mixture'][1]:.1e} on the two logistic simulations.",
        "",
    ]
    return lines


def _cell(vals):
    return f"{np.mean(vals):.3f} ± {np.std(vals):.3f}"


def uci_table(args, scores):
    """The UCI tables; scores[(model, data, method)] receives (log-liks, AUCs, seconds) per split."""
    for name in UCI:
        ds = load_uci(name, args.uci_dir if pathlib.Path(args.uci_dir).is_dir() else None)
        for model in ("probit", "logistic"):
            for method in TABLE_METHODS:
                if method == "kjit" and model != "logistic":
                    continue
                warm = dict(method_options(method, model, args, "sequential"), max_iter=2)
                fastcep.fit(ds.X[:20], ds.y[:20], model=model, method=method, **warm)  # compile untimed
                lls, aucs, secs = [], [], []
                for tr, te in uci_splits(len(ds.y), 5, seed=0):
                    t0 = time.perf_counter()
                    res = fastcep.fit(
                        ds.X[tr],
                        ds.y[tr],
                        model=model,
                        method=method,
                        **method_options(method, model, args, "sequential"),
                    )
                    secs.append(time.perf_counter() - t0)
                    lls.append(res.log_likelihood(ds.X[te], ds.y[te]))
                    aucs.append(res.auc(ds.X[te], ds.y[te]))
                scores[(model, name, method)] = (lls, aucs, secs)
                print(model, name, method, _cell(lls), _cell(aucs), f"{np.mean(secs):.3f} s", flush=True)
    lines = [
        "### (b) UCI data sets: test log-likelihood and AUC (Table 1, supplement Table 1)",
        "",
        "5 random 50/50 splits (seed 0), mean ± std; each cell: ours / paper (— where the paper has no "
        "value). Converged fits (tol 1e-8) except IS and KJIT (draws as in (a), but "
        f"{args.is_iters} sequential sweeps: the parallel schedule diverges here, even for exact EP; "
        "see method_options in bench/paper/regression.py).",
        "",
    ]
    for k, metric in enumerate(("log-likelihood", "AUC")):
        paper = PAPER_LL if k == 0 else PAPER_AUC
        for model in ("probit", "logistic"):
            methods = [m for m in TABLE_METHODS if not (m == "kjit" and model != "logistic")]
            lines += [
                f"**{model}, test {metric}**",
                "",
                "| data | " + " | ".join(NAMES[m] for m in methods) + " |",
                "|---|" + "---|" * len(methods),
            ]
            for name in UCI:
                cells = []
                for m in methods:
                    ours = _cell(scores[(model, name, m)][k])
                    p = paper[model][name].get(m)
                    cells.append(f"{ours} / " + (f"{p[0]:.3f} ± {p[1]:.3f}" if p else "—"))
                lines.append(f"| {name} | " + " | ".join(cells) + " |")
            lines.append("")
    lines += [
        "### (c) Mean running time of one fit (seconds), same runs",
        "",
        "| data | model | " + " | ".join(NAMES[m] for m in TABLE_METHODS) + " |",
        "|---|---|" + "---|" * len(TABLE_METHODS),
    ]
    for name in UCI:
        for model in ("probit", "logistic"):
            cells = [
                f"{np.mean(scores[(model, name, m)][2]):.3f}" if (model, name, m) in scores else "-"
                for m in TABLE_METHODS
            ]
            lines.append(f"| {name} | {model} | " + " | ".join(cells) + " |")
    lines.append("")
    return lines


def _ratio_range(values):
    return f"{min(values):.2f} to {max(values):.2f}"


def differences(finals, scores, args):
    """What differs from the paper, stated from this run's measurements."""
    lines = ["### (d) Against the paper's findings", ""]
    cases = sorted({(m, f) for m, f, _ in finals})

    def ratios(method, base, k):  # final KL (k = 0) or seconds (k = 1) of method / base
        return [finals[c + (method,)][k] / finals[c + (base,)][k] for c in cases if c + (method,) in finals]

    if all(m in KL_METHODS for m in ("cep1", "cep2", "ep")):
        lines.append(
            f"- CEP reaches EP's KL: final KL / EP's is {_ratio_range(ratios('cep1', 'ep', 0))} for "
            f"CEP-1 and {_ratio_range(ratios('cep2', 'ep', 0))} for CEP-2 over the four simulations."
        )
    logistic = [c for c in cases if c[0] == "logistic"]
    if logistic and "ep" in KL_METHODS:
        t = [finals[c + ("ep",)][1] / finals[c + ("cep1",)][1] for c in logistic]
        lines.append(
            f"- Logistic: EP (2-D quadrature) takes {_ratio_range(t)} x the time of CEP-1 (1-D), "
            + ("as in the paper (CEP faster)." if min(t) > 1 else "unlike the paper (CEP not always faster).")
        )
    if "lp" in KL_METHODS:
        lines.append(
            f"- LP: KL / EP's {_ratio_range(ratios('lp', 'ep', 0))}, time / CEP-1's "
            f"{_ratio_range(ratios('lp', 'cep1', 1))}. The paper finds LP far slower than CEP; ours "
            "solves the tilted mode by an exact 1-D Newton reduction instead of a generic L-BFGS "
            "search over the d weights. The optimum is the same (tests/test_baselines.py)."
        )
    if "is" in KL_METHODS:
        others = [m for m in KL_METHODS if m not in ("is", "kjit")]
        worst = all(finals[c + ("is",)][0] >= max(finals[c + (m,)][0] for m in others) for c in cases)
        slowest = all(finals[c + ("is",)][1] >= max(finals[c + (m,)][1] for m in others) for c in cases)
        shape = {
            (True, True): "slowest and least accurate on every simulation, as in the paper",
            (True, False): "least accurate on every simulation but not always slowest",
            (False, True): "slowest on every simulation but not always least accurate",
            (False, False): "neither always slowest nor always least accurate, unlike the paper",
        }[(slowest, worst)]
        lines.append(
            f"- IS: KL / EP's {_ratio_range(ratios('is', 'ep', 0))}, time / CEP-1's "
            f"{_ratio_range(ratios('is', 'cep1', 1))}: {shape}, with {args.is_samples:,} draws "
            "against the paper's 500,000. Naive self-normalised moments did not work at all on "
            "10,000 rows (the posterior variance collapsed to 1e-38: a bias of about 1/S per site, "
            "summed over every row); ours Bessel-corrects the weighted variance and uses the draws' "
            "own moments as control variates, and estimates only the tilted moments of a = x.w, from "
            "which Gaussian conditioning gives every weight's (estimating each weight's variance "
            "from the draws made posterior variances collapse on small UCI sets, kernels/importance.py)."
        )
    if scores:
        within, total, beyond = 0, 0, []
        for (model, name, method), (lls, aucs, _) in sorted(scores.items()):
            for metric, vals, paper in (("log-lik", lls, PAPER_LL), ("AUC", aucs, PAPER_AUC)):
                p = paper[model][name].get(method)
                if p is None or name == "australian":
                    continue
                total += 1
                sd = max(np.std(vals), p[1])
                if abs(np.mean(vals) - p[0]) <= sd:
                    within += 1
                else:
                    ours = np.mean(vals)
                    beyond.append(f"{model} {name} {NAMES[method]} {metric} ({ours:.3f} vs {p[0]:.3f})")
        lines.append(
            f"- UCI (australian aside): {within} of the {total} cells with a paper value are within "
            "one standard deviation (the "
            "larger of ours and the paper's) of it. Australian is expected to differ: the paper used "
            "a faulty file (../shared/data/uci/SOURCE.md), so it is not counted. Beyond one "
            f"standard deviation ({len(beyond)}): " + ("; ".join(beyond) or "none") + ". "
            "Our splits are not the paper's, and the paper's stds are over its splits."
        )
    lines.append("")
    return lines


def assemble():
    """REPRODUCTION.md = a header + every section in bench/paper/sections/, in name order."""
    parts = [
        "# Reproduction of the paper's experiments",
        "",
        "Generated by the commands named in each section (`python -m bench.paper.<section>`); every "
        "figure states the machine and the date it was measured on. Differences from the paper are "
        "stated where they appear.",
        "",
    ]
    for path in sorted(SECTIONS.glob("*.md")):
        parts.append(path.read_text())
    (HERE / "REPRODUCTION.md").write_text("\n".join(parts))


def run_footer(seconds):
    """The closing line of a section: the run's wall time and the load of the machine at its end
    (a 1-minute load average above the core count means other jobs shared the cores)."""
    load, cores = os.getloadavg()[0], os.cpu_count()
    if load > cores:
        verdict = "above the core count: other jobs shared the machine and the times are inflated"
    else:
        verdict = "not above the core count (the run itself keeps up to all cores busy)"
    return (
        f"(whole run: {seconds:.0f} s; 1-minute load average at its end {load:.1f} on {cores} cores: "
        f"{verdict})\n"
    )


def write_section(name, lines, t0):
    """Ends a section's lines with ``run_footer`` (its run started at ``time.perf_counter()`` t0),
    writes them to bench/paper/sections/``name``, assembles REPRODUCTION.md and prints them."""
    lines.append(run_footer(time.perf_counter() - t0))
    SECTIONS.mkdir(exist_ok=True)
    (SECTIONS / name).write_text("\n".join(lines))
    assemble()
    print("\n".join(lines))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gold-samples", type=int, default=1_000_000)
    ap.add_argument("--is-samples", type=int, default=2000)
    ap.add_argument("--is-iters", type=int, default=40)
    ap.add_argument("--uci-dir", default=str(ROOT.parent / "shared" / "data" / "uci" / "raw"))
    ap.add_argument("--skip-uci", action="store_true")
    args = ap.parse_args()
    t0 = time.perf_counter()
    lines = [
        "## Regression (section 5.1)",
        "",
        f"`python -m bench.paper.regression --gold-samples {args.gold_samples} --is-samples "
        f"{args.is_samples} --is-iters {args.is_iters}`; machine: {machine()}.",
        "",
    ]
    finals, scores = {}, {}
    lines += figure_kl(args, finals)
    if not args.skip_uci:
        lines += uci_table(args, scores)
    lines += differences(finals, scores, args)
    write_section("1-regression.md", lines, t0)


if __name__ == "__main__":
    main()
