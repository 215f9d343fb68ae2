"""The damping of an online update (``RegressionResult.update``), undamped (1.0, the default before
2026-11-29) against "auto" (the fit's rule), on real data over splits, orders and batch sizes.

``python -m bench.online_damping``: for each data set, split (or order) and batch size, a stream
from the prior absorbs the training rows batch by batch (probit and logistic CEP-1, the fit's
defaults otherwise), once per damping. Reported per damping: the batches whose sweeps stopped at
``max_iter`` (50) unconverged, the mean sweeps a batch, the test AUC and log loss (mean -log
predictive probability) and the seconds; and for reference the batch fit's (``fastcep.fit``,
every default but ``--fit-max-iter``). Data: the paper's six UCI sets (5 random halves each,
``../shared/data/uci/raw`` or the PyPI loaders), the RCV1 sample (``../shared/data/rcv1``, 3
orders of its training rows) and a simulated click log (``make_click_log``, 3 seeds). Markdown
on stdout.
"""

import argparse
import time
import warnings

import numpy as np

import fastcep
from fastcep import _options as O
from fastcep.data_tools import load_uci, make_click_log, uci_splits
from fastcep.glm.result import RegressionResult

from .defaults_check import SHARED, UCI_SETS

DAMPINGS = (1.0, "auto")


def _log_loss(res, X, y):
    return -res.log_likelihood(X, y)


def stream(model, X, y, batch, damping, width):
    """(result, batches at max_iter, mean sweeps a batch, seconds) of one stream from the prior."""
    opts = dict(O.defaults("regression", "cep1"), n_threads=None)
    res = RegressionResult.prior(model, "cep1", width, opts)
    stopped = 0
    t0 = time.perf_counter()
    n_batches = 0
    for lo in range(0, X.shape[0], batch):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", fastcep.ConvergenceWarning)
            res.update(X[lo : lo + batch], y[lo : lo + batch], damping=damping)
        stopped += sum(issubclass(w.category, fastcep.ConvergenceWarning) for w in caught)
        n_batches += 1
    secs = time.perf_counter() - t0
    return res, stopped, n_batches, res.options["update_sweeps"] / n_batches, secs


def cases(which):
    """(data set, split, X_train, y_train, X_test, y_test) of the chosen data."""
    if "uci" in which:
        raw = SHARED / "uci" / "raw"
        for name in UCI_SETS:
            data = load_uci(name, raw if raw.exists() else None)
            for k, (tr, te) in enumerate(uci_splits(len(data.y), 5, seed=0)):
                yield name, k, data.X[tr], data.y[tr], data.X[te], data.y[te]
    if "rcv1" in which and (SHARED / "rcv1").exists():
        train = fastcep.io.read_svmlight(SHARED / "rcv1" / "rcv1-small-train.svm", 47_118)
        test = fastcep.io.read_svmlight(SHARED / "rcv1" / "rcv1-small-test.svm", 47_118)
        for k in range(3):
            order = np.random.default_rng(k).permutation(train.y.size)
            yield "rcv1", k, train.X[order], train.y[order], test.X, test.y
    if "clicks" in which:
        for k in range(3):
            log = make_click_log(60_000, fields=20, bits=18, seed=k)
            yield "clicks", k, log.X[:50_000], log.y[:50_000], log.X[50_000:], log.y[50_000:]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", nargs="+", default=["uci", "rcv1", "clicks"])
    ap.add_argument("--batches", nargs="+", type=int, default=[1, 10, 100])
    ap.add_argument("--models", nargs="+", default=["probit", "logistic"])
    ap.add_argument("--fit-max-iter", type=int, default=5000, help="of the reference batch fit")
    args = ap.parse_args(argv)
    rows = {}
    for name, k, Xtr, ytr, Xte, yte in cases(args.data):
        for model in args.models:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", fastcep.ConvergenceWarning)
                batch_fit = fastcep.fit(
                    Xtr, ytr, model=model, schedule="sequential", max_iter=args.fit_max_iter
                )
            ref = (batch_fit.auc(Xte, yte), _log_loss(batch_fit, Xte, yte))
            for batch in args.batches:
                if name == "clicks" and batch < 100:
                    continue  # (50,000 one-row updates: minutes, and the click log's point is volume)
                for damping in DAMPINGS:
                    res, stopped, n_batches, sweeps, secs = stream(
                        model, Xtr, ytr, batch, damping, Xtr.shape[1]
                    )
                    key = (name, model, batch, str(damping))
                    rows.setdefault(key, []).append(
                        (stopped, n_batches, sweeps, res.auc(Xte, yte), _log_loss(res, Xte, yte), secs, *ref)
                    )
            print(f"done {name} {k} {model}", flush=True)
    print("\n| data | model | batch rows | damping | batches at max_iter | sweeps a batch | test AUC | "
          "test log loss | batch fit's AUC | batch fit's log loss | seconds |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for (name, model, batch, damping), got in rows.items():
        a = np.array(got)
        print(
            f"| {name} ({len(got)}) | {model} | {batch} | {damping} | "
            f"{int(a[:, 0].sum())} of {int(a[:, 1].sum())} | {a[:, 2].mean():.1f} | {a[:, 3].mean():.4f} | "
            f"{a[:, 4].mean():.4f} | {a[:, 6].mean():.4f} | "
            f"{a[:, 7].mean():.4f} | {a[:, 5].sum():.1f} |"
        )


if __name__ == "__main__":
    main()
