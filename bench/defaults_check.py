"""The evidence behind two defaults of issue 20, as Markdown tables (accuracy, not time).

``python -m bench.defaults_check intercept``: the UCI sets (5 folds, CEP-1), test log-likelihood
and AUC without an intercept, with the default one (prior variance 100) and with prior variance 1.

``python -m bench.defaults_check standardize``: Alog folds 1-3, ranks 3 and 8, seed 0, test RMSE
of cp_gaussian with ``standardize`` "none" (the paper's model), "scale" (the default) and
"center".
"""

import argparse
import os
import pathlib
import warnings

import numpy as np

import fastcep
from fastcep.data_tools import load_paper_fold, load_uci, uci_splits

SHARED = pathlib.Path(
    os.environ.get("FASTCEP_SHARED_DATA", pathlib.Path(__file__).resolve().parents[2] / "shared" / "data")
)
UCI_SETS = ("australian", "breast", "crabs", "ionos", "pima", "sonar")


def intercept_table():
    root = SHARED / "uci" / "raw"
    settings = {
        "no intercept": dict(fit_intercept=False),
        "intercept, prior var 100 (default)": {},
        "intercept, prior var 1": dict(intercept_var=1.0),
    }
    print("| set | model | " + " | ".join(f"{k}: test LL / AUC" for k in settings) + " |")
    print("|---|---|" + "---|" * len(settings))
    for name in UCI_SETS:
        ds = load_uci(name, str(root) if root.is_dir() else None)
        for model in ("probit", "logistic"):
            cells = []
            for kw in settings.values():
                ll, auc = [], []
                for tr, te in uci_splits(len(ds.y), 5, seed=0):
                    res = fastcep.fit(ds.X[tr], ds.y[tr], model=model, method="cep1", **kw)
                    ll.append(res.log_likelihood(ds.X[te], ds.y[te]))
                    auc.append(res.auc(ds.X[te], ds.y[te]))
                cells.append(f"{np.mean(ll):.4f} / {np.mean(auc):.4f}")
            print(f"| {name} | {model} | " + " | ".join(cells) + " |", flush=True)


def standardize_table(folds=(1, 2, 3), ranks=(3, 8)):
    modes = ("none", "scale", "center")
    print("| fold | rank | " + " | ".join(f"{m}: test RMSE" for m in modes) + " |")
    print("|---|---|" + "---|" * len(modes))
    for fold in folds:
        train, test = load_paper_fold("alog", fold, SHARED)
        for rank in ranks:
            cells = []
            for mode in modes:
                res = fastcep.fit(
                    train.coords, train.values, model="cp_gaussian", shape=train.shape, rank=rank, seed=0,
                    standardize=mode,
                )  # fmt: skip
                cells.append(f"{res.rmse(test.coords, test.values):.4f}")
            print(f"| {fold} | {rank} | " + " | ".join(cells) + " |", flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("table", choices=("intercept", "standardize"))
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore", fastcep.ConvergenceWarning)
    intercept_table() if args.table == "intercept" else standardize_table()


if __name__ == "__main__":
    main()
