"""``fastcep demo``: Bayesian probit and logistic regression with CEP-1, CEP-2 and EP on the
paper's simulated data and on a UCI set, as a comparison table."""

import json
import sys
import time
import warnings

import numpy as np

from .._loop import ConvergenceWarning

#: the demo's methods, in the order of its table
DEMO_METHODS = ("cep1", "cep2", "ep")


def _warm_up(fit, quiet):
    """Compile the demo's kernels on a tiny problem first, so that the table's seconds are the
    fits' own (the first call of a Numba kernel in a process compiles it)."""
    if not quiet:
        print("(compiling the kernels on a tiny problem first; the seconds exclude it)", file=sys.stderr)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 3))
    y = (X[:, 0] > 0).astype(float)
    with warnings.catch_warnings():  # (two iterations on purpose)
        warnings.simplefilter("ignore", ConvergenceWarning)
        for model in ("probit", "logistic"):
            for method in DEMO_METHODS:
                fit(X, y, model=model, method=method, max_iter=2)


def _compare(data, model, Xtr, ytr, Xte, yte, fit):
    for method in DEMO_METHODS:
        t0 = time.perf_counter()
        res = fit(Xtr, ytr, model=model, method=method)
        secs = time.perf_counter() - t0
        yield {
            "data": data,
            "model": model,
            "method": method,
            "iterations": res.n_iter,
            "converged": res.converged,
            "seconds": secs,
            "test_log_likelihood": res.log_likelihood(Xte, yte),
            "test_auc": res.auc(Xte, yte),
        }


def cmd_demo(args):
    from .. import fit
    from ..data_tools import load_uci, make_regression_simulation, uci_splits

    rows = []
    out = sys.stdout
    _warm_up(fit, args.quiet)
    if not args.json:
        print(
            f"{'data':<28}{'model':<10}{'method':<7}{'iters':>6}{'seconds':>9}"
            f"{'test LL':>10}{'test AUC':>10}",
            file=out,
        )

    def emit(row):
        rows.append(row)
        if not args.json:
            print(
                f"{row['data']:<28}{row['model']:<10}{row['method']:<7}{row['iterations']:>6}"
                f"{row['seconds']:>9.3f}{row['test_log_likelihood']:>10.4f}{row['test_auc']:>10.4f}",
                file=out,
                flush=True,
            )

    for model in ("probit", "logistic"):
        X, y, _ = make_regression_simulation(model, "gaussian", n=10_000, d=4, seed=0)
        label = "simulation (n=10000, d=4)"
        for row in _compare(label, model, X[:5000], y[:5000], X[5000:], y[5000:], fit):
            emit(row)
    try:
        ds = load_uci(args.uci, args.uci_dir)
    except (ImportError, FileNotFoundError) as exc:
        if not args.quiet:
            print(f"(UCI part skipped: {exc})", file=sys.stderr)
    else:
        tr, te = uci_splits(len(ds.y), 1, seed=0)[0]
        label = f"{ds.name} (n={len(ds.y)}, d={ds.X.shape[1]})"
        for model in ("probit", "logistic"):
            for row in _compare(label, model, ds.X[tr], ds.y[tr], ds.X[te], ds.y[te], fit):
                emit(row)
    if args.json:
        json.dump(rows, out, indent=1)
        out.write("\n")
    return 0
