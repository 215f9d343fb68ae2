"""The ``fastcep`` command line.

``fastcep demo``: fit Bayesian probit and logistic regression with CEP-1, CEP-2 and EP on the
paper's simulated data and on a UCI set, and print a comparison table.

User errors (bad arguments, missing files) exit with status 2 and a one-line message.
"""

import argparse
import json
import sys
import time


class UserError(Exception):
    """An error caused by the user's input: reported in one line, exit status 2."""


def _compare(data, model, Xtr, ytr, Xte, yte, fit):
    for method in ("cep1", "cep2", "ep"):
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
    from . import fit
    from .data_tools import load_uci, make_regression_simulation, uci_splits

    rows = []
    out = sys.stdout
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


def build_parser():
    p = argparse.ArgumentParser(prog="fastcep", description="Conditional expectation propagation.")
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("demo", help="CEP-1, CEP-2 and EP on simulated and UCI data: a comparison table")
    d.add_argument("--uci", default="ionos", help="UCI set for the second part (default: ionos)")
    d.add_argument("--uci-dir", default=None, help="folder of the UCI files (default: PyPI packages)")
    d.add_argument("--json", action="store_true", help="print the table as JSON")
    d.add_argument("--quiet", action="store_true", help="no notes on stderr")
    d.set_defaults(func=cmd_demo)
    return p


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)  # argparse exits with status 2 on bad arguments
    try:
        return args.func(args)
    except (UserError, ValueError, TypeError, FileNotFoundError) as exc:
        print(f"fastcep {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
