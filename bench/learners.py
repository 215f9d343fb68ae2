"""Click-log learners side by side (issue 39): fastcep's online pass and batch fit against Vowpal
Wabbit, scikit-learn and river, on a simulated click log (``make_click_log``: 20 hashed one-hot
fields, 2**20 columns, 5 % clicks), as a Markdown table.

``python -m bench.learners --rows 1000000``: the log in memory, a test set of ``--test`` rows after
the training rows. Learners (each timed on its training alone; warm-ups not timed):

- fastcep's online pass (``RegressionResult.update`` over batches of ``--batch`` rows, from the
  prior; the settings of ``ONLINE``);
- fastcep's batch fit (``fastcep.fit``, logistic CEP-1, prior variance 1 / FIELDS, sequential
  schedule, at most ``--batch-fit-max-iter`` sweeps; ``--batch-fit-rows`` rows);
- Vowpal Wabbit, one pass from its cache (``python -m vowpalwabbit``, logistic loss, -b 20; the
  cache is made by an untimed first run), predictions with ``--link logistic``;
- scikit-learn ``SGDClassifier(loss="log_loss").partial_fit``, one pass in batches;
- river ``AdPredictor`` and scikit-learn ``LogisticRegression(solver="liblinear")`` on the first
  ``--small`` rows (their speeds make more an hours' wait).

Figures: training rows/s, test AUC, log loss, ECE (10 bins) and the peak resident memory of the
run (fastcep's and scikit-learn's in this process, reset before each; VW's from its process).

``python -m bench.learners --stream-rows 10000000 --h5 clicks.h5``: the log written to a sparse-row
HDF5 file (once), then streamed by ``fastcep.glm.stream_file`` (read ahead, peak memory bounded by
a batch) and by Vowpal Wabbit from its cache, tested on ``--test`` rows after it.
"""

import argparse
import contextlib
import os
import resource
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np
import scipy.sparse as sp

import fastcep
from fastcep import metrics
from fastcep.data_tools import iter_click_log

from ._peak import peak, reset_peak

FIELDS, BITS, SEED = 20, 20, 0
NAMES = {"cep1": "CEP-1", "cep2": "CEP-2", "ep": "EP"}
PRIOR = dict(prior_var=1.0, fit_intercept=True, intercept_var=100.0, tol=1e-5, n_threads=None)


def scores(y, p):
    p = np.clip(p, 1e-15, 1 - 1e-15)
    return {
        "auc": metrics.auc(y > 0, p),
        "log_loss": float(-np.mean(np.where(y > 0, np.log(p), np.log1p(-p)))),
        "ece": metrics.expected_calibration_error(y > 0, p),
    }


def log(n_train, n_test):
    """(X_train, y_train, X_test, y_test, truth's test probabilities) of the click log."""
    parts = list(iter_click_log(n_train + n_test, FIELDS, BITS, seed=SEED, rows=max(n_train, 1)))
    X = int32_rows(sp.vstack([p.X for p in parts], format="csr"))
    y = np.concatenate([p.y for p in parts]).astype(np.float64)
    p = np.concatenate([p.p for p in parts])
    return X[:n_train], y[:n_train], X[n_train:], y[n_train:], p[n_train:]


def int32_rows(X):
    """CSR rows with 32-bit indices (scikit-learn's sparse learners refuse 64-bit ones)."""
    return sp.csr_array((X.data, X.indices.astype(np.int32), X.indptr.astype(np.int32)), shape=X.shape)


#: fastcep's online passes: (model, method, prior variance, sweeps a batch at most); the defaults
#: (probit CEP-1, prior variance 1, up to 50 sweeps), and the click-log settings: a prior variance
#: of 1 / FIELDS (a row of FIELDS one-hot fields then has a prior variance of f of 1: a rule, not
#: a fit to the test rows), one sweep a batch as AdPredictor takes one step a row, probit by EP
#: (its moments are closed forms) and logistic by CEP-1
ONLINE = (
    ("probit", "cep1", 1.0, 50),
    ("probit", "ep", 1.0 / FIELDS, 1),
    ("probit", "ep", 1.0 / FIELDS, 5),
    ("logistic", "cep1", 1.0 / FIELDS, 1),
)


def fastcep_online(X, y, model, method, prior_var, batch, max_iter):
    res = fastcep.RegressionResult.prior(model, method, X.shape[1], dict(PRIOR, prior_var=prior_var))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fastcep.ConvergenceWarning)
        for lo in range(0, X.shape[0], batch):
            res.update(X[lo : lo + batch], y[lo : lo + batch], max_iter=max_iter)
    return res


def timed(train, predict, n):
    """(seconds, peak bytes, test probabilities) of train() (peak over its run) and predict(model)."""
    base = reset_peak()
    t0 = time.perf_counter()
    model = train()
    secs = time.perf_counter() - t0
    return secs, peak() - base, predict(model)


def vw_text(X, y):
    """Rows in Vowpal Wabbit's text format (label -1/1, one namespace, a column's number its name)."""
    lines = []
    for i in range(X.shape[0]):
        cols = X.indices[X.indptr[i] : X.indptr[i + 1]]
        vals = X.data[X.indptr[i] : X.indptr[i + 1]]
        feats = " ".join(f"{j}:{v:g}" if v != 1.0 else str(j) for j, v in zip(cols, vals, strict=True))
        lines.append(f"{1 if y[i] > 0 else -1} |f {feats}\n")
    return "".join(lines)


def vw_lines(path, X, y):
    with open(path, "w") as fh:
        for lo in range(0, X.shape[0], 1 << 16):
            fh.write(vw_text(X[lo : lo + (1 << 16)], y[lo : lo + (1 << 16)]))


def vw(folder, train_rows, Xte, yte):
    """(seconds, peak bytes, test probabilities) of Vowpal Wabbit's pass from its cache."""
    train, test = os.path.join(folder, "train.vw"), os.path.join(folder, "test.vw")
    cache, model, preds = (os.path.join(folder, name) for name in ("train.cache", "model.vw", "preds.txt"))
    vw_lines(test, Xte, yte)
    base = [sys.executable, "-m", "vowpalwabbit", "--quiet", "--loss_function", "logistic", "-b", str(BITS)]
    subprocess.run([*base, "-d", train, "-c", "--cache_file", cache, "-f", model], check=True)  # (the cache)
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    subprocess.run([*base, "-d", train, "--cache_file", cache, "-f", model], check=True)
    secs = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    subprocess.run([*base, "-t", "-i", model, "-d", test, "-p", preds, "--link", "logistic"], check=True)
    p = np.loadtxt(preds, usecols=0)
    return secs, rss if rss > before * 1024 else float("nan"), p


def river_rows(X):
    for i in range(X.shape[0]):
        yield {int(j): 1.0 for j in X.indices[X.indptr[i] : X.indptr[i + 1]]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--test", type=int, default=100_000)
    ap.add_argument("--batch", type=int, default=10_000)
    ap.add_argument("--small", type=int, default=20_000)
    ap.add_argument("--batch-fit-rows", type=int, default=None, help="default: --rows")
    ap.add_argument("--batch-fit-max-iter", type=int, default=100, help="sweeps of the batch fit at most")
    ap.add_argument("--stream-rows", type=int, default=None, help="stream this many rows from --h5 instead")
    ap.add_argument("--h5", default="clicks.h5", help="the sparse-row file of --stream-rows (made if absent)")
    ap.add_argument(
        "--skip", nargs="*", default=[], help="learners to leave out (fastcep-batch, vw, river, ...)"
    )
    ap.add_argument(
        "--speed-rounds", type=int, default=0,
        help="only time fastcep's click-log pass against VW's, alternating, this many rounds each",
    )  # fmt: skip
    args = ap.parse_args(argv)
    if args.stream_rows:
        return streamed(args)
    if args.speed_rounds:
        return speed_rounds(args)
    Xtr, ytr, Xte, yte, p_true = log(args.rows, args.test)
    table = []

    def row(name, rows, secs, mem, p, note=""):
        s = scores(yte, p)
        table.append((name, rows, rows / secs, s, mem, note))
        print(f"{name}: {rows / secs:,.0f} rows/s, {s}", file=sys.stderr, flush=True)

    row("the truth (the simulation's probabilities)", 1, 1.0, float("nan"), p_true)
    warm = Xtr[:2_000]
    for model, method, prior_var, max_iter in ONLINE:
        fastcep_online(warm, ytr[:2_000], model, method, prior_var, 1_000, max_iter)  # (compile)
        secs, mem, p = timed(
            lambda a=(model, method, prior_var, args.batch, max_iter): fastcep_online(Xtr, ytr, *a),
            lambda res: res.predict_proba(Xte),
            args.rows,
        )
        how = f"prior_var={prior_var:g}, max_iter={max_iter}, batches of {args.batch:,}"
        row(f"fastcep online pass, {model} {NAMES[method]} ({how})", args.rows, secs, mem, p)
    if "fastcep-batch" not in args.skip:
        m = args.batch_fit_rows or args.rows
        fastcep.fit(warm, ytr[:2_000], model="logistic", schedule="sequential", max_iter=5)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", fastcep.ConvergenceWarning)
            fitted = []
            secs, mem, p = timed(
                lambda: fastcep.fit(
                    Xtr[:m],
                    ytr[:m],
                    model="logistic",
                    schedule="sequential",
                    max_iter=args.batch_fit_max_iter,
                ),
                lambda res: fitted.append(res) or res.predict_proba(Xte),
                m,
            )
        res = fitted[0]
        how = f"prior_var={1 / FIELDS:g}, sequential; {res.n_iter} sweeps, {res.stop_reason}"
        name = f"fastcep batch fit, logistic CEP-1 ({how})"
        row(name + ("" if m == args.rows else f" ({m:,} rows)"), m, secs, mem, p)
    if "vw" not in args.skip:
        with tempfile.TemporaryDirectory() as folder:
            vw_lines(os.path.join(folder, "train.vw"), Xtr, ytr)
            secs, mem, p = vw(folder, args.rows, Xte, yte)
        row("Vowpal Wabbit, one pass from its cache", args.rows, secs, mem, p)
    from sklearn.linear_model import LogisticRegression, SGDClassifier

    if "sgd" not in args.skip:

        def sgd():
            model = SGDClassifier(loss="log_loss", random_state=0)
            for lo in range(0, args.rows, args.batch):
                model.partial_fit(Xtr[lo : lo + args.batch], ytr[lo : lo + args.batch], classes=[0.0, 1.0])
            return model

        secs, mem, p = timed(sgd, lambda m: m.predict_proba(Xte)[:, 1], args.rows)
        row('scikit-learn SGDClassifier(loss="log_loss").partial_fit, one pass', args.rows, secs, mem, p)
    k = args.small
    if "river" not in args.skip:
        from river.linear_model import AdPredictor

        def river():
            model = AdPredictor()
            for x, t in zip(river_rows(Xtr[:k]), ytr[:k], strict=True):
                model.learn_one(x, bool(t))
            return model

        def river_p(model):
            return np.array([model.predict_proba_one(x).get(True, 0.0) for x in river_rows(Xte)])

        secs, mem, p = timed(river, river_p, k)
        row(f"river AdPredictor ({k:,} rows)", k, secs, mem, p)
    if "liblinear" not in args.skip:
        Xk = Xtr[:k]
        secs, mem, p = timed(
            lambda: LogisticRegression(solver="liblinear").fit(Xk, ytr[:k]),
            lambda m: m.predict_proba(Xte)[:, 1],
            k,
        )
        row(f'scikit-learn LogisticRegression(solver="liblinear") ({k:,} rows)', k, secs, mem, p)
    print(f"\n{args.rows:,} training rows, {args.test:,} test rows, {FIELDS} fields, 2^{BITS} columns\n")
    print_table(table)


def speed_rounds(args):
    """fastcep's online pass (probit EP, the click-log settings, one sweep a batch) and Vowpal
    Wabbit's pass from its cache, alternating, ``--speed-rounds`` rounds each: medians, IQRs and
    the ratio of the medians (a shared machine: one sitting, interleaved)."""
    Xtr, ytr, Xte, yte, _ = log(args.rows, args.test)
    model, method, prior_var, max_iter = ONLINE[1]
    fastcep_online(Xtr[:20_000], ytr[:20_000], model, method, prior_var, args.batch, max_iter)  # (compile)
    ours, theirs = [], []
    with tempfile.TemporaryDirectory() as folder:
        vw_lines(os.path.join(folder, "train.vw"), Xtr, ytr)
        vw(folder, args.rows, Xte[:1000], yte[:1000])  # (the cache)
        for _ in range(args.speed_rounds):
            t0 = time.perf_counter()
            fastcep_online(Xtr, ytr, model, method, prior_var, args.batch, max_iter)
            ours.append(args.rows / (time.perf_counter() - t0))
            theirs.append(args.rows / vw(folder, args.rows, Xte[:1000], yte[:1000])[0])
    print(f"{args.rows:,} rows, {args.speed_rounds} rounds each, alternating (rows/s):\n")
    print("| learner | median | IQR | rounds |")
    print("|---|---|---|---|")
    for name, got in (
        ("fastcep online pass, probit EP, one sweep a batch", ours),
        ("Vowpal Wabbit from its cache", theirs),
    ):
        q1, q2, q3 = np.percentile(got, [25, 50, 75])
        print(f"| {name} | {q2:,.0f} | {q3 - q1:,.0f} | {', '.join(f'{g:,.0f}' for g in got)} |")
    print(f"\nfastcep / VW, ratio of the medians: {np.median(ours) / np.median(theirs):.2f}")


def print_table(table):
    print("| learner | training rows/s | test AUC | log loss | ECE | peak memory |")
    print("|---|---|---|---|---|---|")
    for name, _, speed, s, mem, _ in table:
        speed_text = "" if name.startswith("the truth") else f"{speed:,.0f}"
        mem_text = "" if not np.isfinite(mem) else f"{mem / 2**20:,.0f} MB"
        print(
            f"| {name} | {speed_text} | {s['auc']:.4f} | {s['log_loss']:.4f} | {s['ece']:.4f} | {mem_text} |"
        )


def streamed(args):
    """The log streamed from a sparse-row file: fastcep's ``stream_file`` and VW from its cache."""
    from fastcep.io.csr import CSRReader, CSRWriter

    n, k = args.stream_rows, args.test
    test_parts = []
    made = not os.path.exists(args.h5)
    t0 = time.perf_counter()
    writer = CSRWriter(args.h5, 1 << BITS, source="make_click_log") if made else None
    with writer if made else contextlib.nullcontext():
        done = 0
        for part in iter_click_log(n + k, FIELDS, BITS, seed=SEED, rows=1 << 16):
            keep = min(part.y.size, max(n - done, 0))
            if keep and made:
                writer.append(part.X[:keep], part.y[:keep].astype(np.float64))
            if keep < part.y.size:
                test_parts.append(part._replace(X=part.X[keep:], y=part.y[keep:], p=part.p[keep:]))
            done += part.y.size
    if made:
        print(f"wrote {args.h5} in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    Xte = int32_rows(sp.vstack([p.X for p in test_parts], format="csr"))
    yte = np.concatenate([p.y for p in test_parts]).astype(np.float64)
    with CSRReader(args.h5) as r:
        if r.n != n:
            raise SystemExit(f"{args.h5} holds {r.n} rows, not {n}")
    table = []

    def row(name, rows, secs, mem, p):
        s = scores(yte, p)
        table.append((name, rows, rows / secs, s, mem, ""))
        print(f"{name}: {rows / secs:,.0f} rows/s, {s}", file=sys.stderr, flush=True)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fastcep.ConvergenceWarning)
        for model, method, prior_var, max_iter in ONLINE[1:]:
            fastcep_online(Xte[:2_000], yte[:2_000], model, method, prior_var, 1_000, max_iter)  # (compile)
            secs, mem, p = timed(
                lambda a=(model, method, prior_var, max_iter): fastcep.glm.stream_file(
                    args.h5, a[0], a[1], batch_rows=args.batch, prior_var=a[2], max_iter=a[3]
                ),
                lambda res: res.predict_proba(Xte),
                n,
            )
            how = f"prior_var={prior_var:g}, max_iter={max_iter}, batches of {args.batch:,}"
            row(f"fastcep glm stream from HDF5, {model} {NAMES[method]} ({how})", n, secs, mem, p)
    if "vw" not in args.skip:
        with tempfile.TemporaryDirectory(dir=os.path.dirname(os.path.abspath(args.h5))) as folder:
            with open(os.path.join(folder, "train.vw"), "w") as fh, CSRReader(args.h5) as r:
                for part in r.blocks(1 << 16):
                    fh.write(vw_text(part.X, part.y))
            secs, mem, p = vw(folder, n, Xte, yte)
        row("Vowpal Wabbit, one pass from its cache", n, secs, mem, p)
    print(f"\n{n:,} rows streamed from {args.h5}, {k:,} test rows, {FIELDS} fields, 2^{BITS} columns\n")
    print_table(table)


if __name__ == "__main__":
    main()
