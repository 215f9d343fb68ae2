"""The evidence behind the CP defaults (issue 21): settings over folds, ranks and seeds.

    python -m bench.cp_defaults [--datasets alog enron] [--folds 1 2 3 4 5] [--ranks 3 5 8 10]
        [--seeds 0 1 2 3 4] [--split validation | test]
        [--setting NAME:opt=value,opt=value ...] [--model DATA:MODEL] [--best-of K]
        [--svd-noise X] [--wishart-scale X] [--tag SUFFIX]

Each ``--setting`` is a name and the options it passes to ``fastcep.fit`` beside ``model``,
``shape``, ``rank`` and ``seed`` ("defaults:" passes none). Values are parsed as Python
literals where they can be (``prior_mean=0.3``), else kept as strings (``prior=ard``).

``--split validation`` (the default) chooses without looking at a test fold: each training fold
is split (seeded by the fold, the same for every setting and seed) into 80 % fitted and 20 %
scored. ``--split test`` fits the whole training fold and scores its test fold: the figures of
the defaults once they are chosen.

The metric is Alog's RMSE (cp_gaussian, lower is better) and Enron's AUC under fastcep's exact
predictive (cp_probit, higher is better). Prints, per data set, setting and rank, the mean over
folds and seeds, the mean over folds of the std over seeds (how much the seed moves a figure),
the std over folds, and the median time and iterations of a fit; then the cells of every fit
as JSON in bench/results/cp-defaults{SUFFIX}.json.
"""

import argparse
import ast
import json
import os
import pathlib
import time
import warnings

import numpy as np

import fastcep
from fastcep.data_tools import load_paper_fold

SHARED = pathlib.Path(
    os.environ.get("FASTCEP_SHARED_DATA", pathlib.Path(__file__).resolve().parents[2] / "shared" / "data")
)
RESULTS = pathlib.Path(__file__).resolve().parent / "results"
MODELS = {"alog": "cp_gaussian", "enron": "cp_probit"}
#: the authors' figures (paper, Figure 3): Alog RMSE and Enron AUC at ranks 3, 5, 8, 10
AUTHORS = {
    "alog": {3: 0.919, 5: 0.879, 8: 0.830, 10: 0.820},
    "enron": {3: 0.855, 5: 0.874, 8: 0.874, 10: 0.874},
}
#: the share of a training fold scored with --split validation
VALIDATION_SHARE = 0.2


def parse_setting(text):
    """``"name:opt=value,opt=value"`` -> (name, options)."""
    name, _, rest = text.partition(":")
    options = {}
    for item in filter(None, rest.split(",")):
        key, _, value = item.partition("=")
        try:
            options[key.strip()] = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):
            options[key.strip()] = value.strip()
    return name, options


def split(train, fold, share=VALIDATION_SHARE):
    """A seeded split of a training fold into (fitted, scored) coordinate/value pairs."""
    rng = np.random.default_rng(1000 + fold)
    n = len(train.values)
    scored = np.zeros(n, dtype=bool)
    scored[rng.permutation(n)[: int(round(share * n))]] = True
    fit = (train.coords[~scored], train.values[~scored])
    return fit, (train.coords[scored], train.values[scored])


def score(res, name, coords, values):
    return res.rmse(coords, values) if name == "alog" else res.auc(coords, values)


def run(datasets, folds, ranks, seeds, settings, which):
    cells = []
    for name in datasets:
        model = MODELS[name]
        for fold in folds:
            train, test = load_paper_fold(name, fold, SHARED)
            if which == "validation":
                (fc, fv), (sc, sv) = split(train, fold)
            else:
                (fc, fv), (sc, sv) = (train.coords, train.values), (test.coords, test.values)
            for rank in ranks:
                for label, options in settings:
                    for seed in seeds:
                        start = time.perf_counter()
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore", fastcep.ConvergenceWarning)
                            res = fastcep.fit(
                                fc, fv, model=model, shape=train.shape, rank=rank, seed=seed, **options
                            )
                        seconds = time.perf_counter() - start
                        cell = dict(
                            data=name, fold=fold, rank=rank, setting=label, seed=seed,
                            metric=float(score(res, name, sc, sv)), n_iter=res.n_iter, seconds=seconds,
                            effective_rank=getattr(res, "effective_rank", None), rank_fitted=res.rank,
                            train_log_likelihood=float(res.log_likelihood(fc, fv)),
                        )  # fmt: skip
                        cells.append(cell)
                        print(json.dumps(cell), flush=True)
    return cells


def table(cells, datasets, ranks, settings, which):
    lines = []
    for name in datasets:
        metric = "RMSE" if name == "alog" else "AUC"
        head = "mean over folds and seeds (s: seed std, f: fold std; median time and iterations)"
        lines.append(f"\n{name} ({which}, {metric}: {head})\n")
        lines.append("| setting | " + " | ".join(f"rank {r}" for r in ranks) + " |")
        lines.append("|---|" + "---|" * len(ranks))
        for label, _ in settings:
            row = []
            for rank in ranks:
                mine = [c for c in cells if c["data"] == name and c["rank"] == rank and c["setting"] == label]
                if not mine:
                    row.append("")
                    continue
                folds = sorted({c["fold"] for c in mine})
                by_fold = [np.array([c["metric"] for c in mine if c["fold"] == f]) for f in folds]
                seed_std = np.mean([v.std() for v in by_fold])
                fold_std = np.std([v.mean() for v in by_fold])
                t = np.median([c["seconds"] for c in mine])
                it = np.median([c["n_iter"] for c in mine])
                mean = np.mean([c["metric"] for c in mine])
                row.append(f"{mean:.4f} (s {seed_std:.4f}, f {fold_std:.4f}; {t:.2f} s, {it:.0f} it)")
            lines.append(f"| {label} | " + " | ".join(row) + " |")
        if which == "test":
            theirs = [f"{AUTHORS[name][r]:.3f}" if r in AUTHORS[name] else "" for r in ranks]
            lines.append("| authors | " + " | ".join(theirs) + " |")
    return "\n".join(lines)


def best_of(cells, k):
    """Per (data, setting, rank, fold): the metric of one seed against the best of k seeds by the
    training log-likelihood (the evidence ``n_starts`` ranks by), over every k-subset of the
    seeds: means and stds, and the rank correlation of training log-likelihood and metric."""
    import itertools

    from scipy.stats import spearmanr

    lines = ["\n| data, setting, rank, fold | one seed: mean (std) | best of k: mean (std) | rank corr. |"]
    lines.append("|---|---|---|---|")
    keys = sorted({(c["data"], c["setting"], c["rank"], c["fold"]) for c in cells})
    for key in keys:
        mine = [c for c in cells if (c["data"], c["setting"], c["rank"], c["fold"]) == key]
        metric = np.array([c["metric"] for c in mine])
        ll = np.array([c["train_log_likelihood"] for c in mine])
        if len(mine) <= k:
            continue
        picks = [metric[max(sub, key=lambda i: ll[i])] for sub in itertools.combinations(range(len(mine)), k)]
        sign = -1.0 if key[0] == "alog" else 1.0  # (higher training LL should mean a better metric)
        corr = spearmanr(ll, sign * metric)[0]
        lines.append(
            f"| {', '.join(map(str, key))} | {metric.mean():.4f} ({metric.std():.4f}) | "
            f"{np.mean(picks):.4f} ({np.std(picks):.4f}) | {corr:.2f} |"
        )
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", nargs="+", default=["alog", "enron"], choices=sorted(MODELS))
    ap.add_argument("--folds", nargs="+", type=int, default=[1, 2, 3, 4, 5])
    ap.add_argument(
        "--ranks",
        nargs="+",
        type=lambda v: None if v == "none" else int(v),
        default=[3, 5, 8, 10],
        help="ranks; 'none': the fit's own choice (rank=None, layout.default_rank)",
    )
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    ap.add_argument("--split", choices=("validation", "test"), default="validation")
    ap.add_argument("--setting", action="append", default=None)
    ap.add_argument(
        "--model", action="append", default=None, metavar="DATA:MODEL",
        help="another model for a data set (enron:cp_logistic); the metric stays the data set's",
    )  # fmt: skip
    ap.add_argument("--best-of", type=int, default=None, help="also the best-of-k table (see best_of)")
    ap.add_argument(
        "--svd-noise", type=float, default=None,
        help="the SVD start's noise (fastcep.tensor.init.NOISE; not an option of fit)",
    )  # fmt: skip
    ap.add_argument(
        "--wishart-scale", type=float, default=None,
        help="W0^-1 / I of the Wishart hyperprior (fastcep.tensor.hyper.NW_W0_INV; not an option of fit)",
    )  # fmt: skip
    ap.add_argument("--tag", default="")
    args = ap.parse_args(argv)
    if args.svd_noise is not None:
        import fastcep.tensor.init

        fastcep.tensor.init.NOISE = args.svd_noise
    if args.wishart_scale is not None:
        import fastcep.tensor.hyper

        fastcep.tensor.hyper.NW_W0_INV = args.wishart_scale
    if not (SHARED / "alog").is_dir():
        print(f"skipped: no data in {SHARED}")
        return
    settings = [parse_setting(s) for s in (args.setting or ["defaults:"])]
    for item in args.model or ():
        name, _, model = item.partition(":")
        MODELS[name] = model
    cells = run(args.datasets, args.folds, args.ranks, args.seeds, settings, args.split)
    text = table(cells, args.datasets, args.ranks, settings, args.split)
    if args.best_of:
        text += best_of(cells, args.best_of)
    print(text)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"cp-defaults{args.tag}.json").write_text(json.dumps(cells, indent=1))


if __name__ == "__main__":
    main()
