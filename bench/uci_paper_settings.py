"""The paper's UCI settings (tol 1e-8, max_iter 5000, no intercept) on the installed fastcep:
test LL, AUC, sweeps and converged folds per set, model and method (CEP-1, CEP-2, EP), 5 folds,
into a JSON file. Run it with two versions of fastcep to compare them (it also runs on code
from before the intercept existed): ``python bench/uci_paper_settings.py OUT.json``."""

import json
import os
import pathlib
import sys
import warnings

import numpy as np

import fastcep
from fastcep.data_tools import load_uci, uci_splits

SHARED = pathlib.Path(
    os.environ.get("FASTCEP_SHARED_DATA", pathlib.Path(__file__).resolve().parents[2] / "shared" / "data")
)


def extra_options():
    """No intercept (the paper's model), on code with and without the option."""
    try:
        from fastcep._options import BY_NAME
    except ImportError:
        return {}
    return {"fit_intercept": False} if "fit_intercept" in BY_NAME else {}


def main(out_path):
    warnings.simplefilter("ignore")
    kw = dict(tol=1e-8, max_iter=5000, **extra_options())
    out = {}
    for name in ("australian", "breast", "crabs", "ionos", "pima", "sonar"):
        ds = load_uci(name, str(SHARED / "uci" / "raw"))
        for model in ("probit", "logistic"):
            for method in ("cep1", "cep2", "ep"):
                ll, auc, its, conv = [], [], [], []
                for tr, te in uci_splits(len(ds.y), 5, seed=0):
                    two_d = {"n_nodes": 9} if (model, method) == ("logistic", "ep") else {}  # the paper's EP
                    res = fastcep.fit(ds.X[tr], ds.y[tr], model=model, method=method, **kw, **two_d)
                    ll.append(res.log_likelihood(ds.X[te], ds.y[te]))
                    auc.append(res.auc(ds.X[te], ds.y[te]))
                    its.append(res.n_iter)
                    conv.append(bool(res.converged))
                cell = dict(ll=float(np.mean(ll)), auc=float(np.mean(auc)), its=its, conv=conv)
                out[f"{name}/{model}/{method}"] = cell
                print(name, model, method, f"{cell['ll']:.4f} {cell['auc']:.4f}", its, conv, flush=True)
    with open(out_path, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main(sys.argv[1])
