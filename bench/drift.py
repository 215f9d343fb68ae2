"""Forgetting on a drifting click log (issue 39): the log loss of the last 10 % of the log, each
batch predicted before it is absorbed (prequential), with and without ``forget``.

``python -m bench.drift --rows 500000 --drift 1.0``: ``make_click_log`` whose weights turn a
quarter (``--drift 1``: the last rows' weights independent of the first rows'), streamed in
batches of ``--batch`` rows by ``RegressionResult.update`` (probit EP, prior variance 1 / fields,
one sweep a batch: the click-log settings of the README), for each ``--forget``. Prints the
prequential log loss and AUC of the last 10 % and of the whole log, and the same for the truth.
"""

import argparse
import time
import warnings

import numpy as np

import fastcep
from fastcep import metrics
from fastcep.data_tools import make_click_log

FIELDS, BITS = 20, 20


def log_loss(y, p):
    p = np.clip(p, 1e-15, 1 - 1e-15)
    return float(-np.mean(np.where(y > 0, np.log(p), np.log1p(-p))))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=500_000)
    ap.add_argument("--drift", type=float, default=1.0)
    ap.add_argument("--batch", type=int, default=10_000)
    ap.add_argument("--forget", nargs="+", type=float, default=[0.0, 1e-7, 1e-6, 1e-5])
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    data = make_click_log(args.rows, FIELDS, BITS, drift=args.drift, seed=args.seed)
    X, y = data.X, data.y.astype(np.float64)
    tail = int(0.9 * args.rows)
    print(
        f"{args.rows:,} rows, drift {args.drift}, batches of {args.batch:,}, probit EP, prior variance "
        f"{1 / FIELDS:g}, one sweep a batch; prequential (each batch predicted before it is absorbed)\n"
    )
    print("| forget (per row) | log loss, last 10 % | AUC, last 10 % | log loss, whole log | seconds |")
    print("|---|---|---|---|---|")
    truth, last = data.p, slice(tail, None)
    print(
        f"| the truth | {log_loss(y[last], truth[last]):.4f} | {metrics.auc(y[last] > 0, truth[last]):.4f} "
        f"| {log_loss(y, truth):.4f} | |"
    )
    opts = dict(prior_var=1.0 / FIELDS, fit_intercept=True, intercept_var=100.0, tol=1e-5, n_threads=None)
    for forget in args.forget:
        res = fastcep.RegressionResult.prior("probit", "ep", X.shape[1], opts)
        p = np.empty(args.rows)
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", fastcep.ConvergenceWarning)
            for lo in range(0, args.rows, args.batch):
                rows = slice(lo, lo + args.batch)
                p[rows] = res.predict_proba(X[rows])
                res.update(X[rows], y[rows], forget=forget, max_iter=1)
        secs = time.perf_counter() - t0
        print(
            f"| {forget:g} | {log_loss(y[tail:], p[tail:]):.4f} | {metrics.auc(y[tail:] > 0, p[tail:]):.4f} "
            f"| {log_loss(y, p):.4f} | {secs:.0f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
