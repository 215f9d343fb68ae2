"""Count tensors (issue 22): Alog's counts under count likelihoods against the paper's Gaussian.

    python -m bench.cp_counts [--folds 1 2 3 4 5] [--ranks 3 5 8 10] [--seed 0]
        [--methods cp_poisson cp_negbin cp_apr cp_gaussian] [--fallback-damping 0.1] [--schedule S]
        [--cost-rank 8] [--cost-iters 20] [--cost-repeats 3] [--no-cost] [--tag SUFFIX]

Alog's counts are round(expm1(value)) of the files' log(1 + count) values
(``data_tools.tensors.load_alog_counts``); about half of them are 0, the largest about 2.5e7.
Every method fits a training fold and is scored on its test fold, with the same metrics:

- ``lpd``: the mean test log predictive density of the COUNTS. fastcep's count models:
  ``res.log_likelihood`` (log int p(y | f) N(f | mean, var) df, a probability mass); pyttb's
  ``cp_apr`` (a point estimate): the Poisson log pmf at its model value m; cp_gaussian (fitted on
  log(1 + count)): log N(log1p(y); mean, var) - log(1 + y), the density of y by the change of
  variables (a density of a continuous y, not a probability mass: not strictly comparable).
- ``rmse_log``: sqrt(mean((log1p(y) - log1p(E[y]))^2)), E[y] the model's predictive mean of the
  count (cp_poisson: exp(mean + var / 2) of its f; cp_apr: m); cp_gaussian: the RMSE of its
  predictive mean on the log1p values directly (the paper's metric).
- ``rmse_log_median``: the same with the predictive MEDIAN of the count in place of E[y]
  (``predictive_median``; cp_apr: the median of Poisson(m); cp_gaussian: its predictive mean,
  the median of its Gaussian). E[y] = E[exp f] overflows for a wide predictive of f, and a mean
  is no fair point on the log scale; the median is (log1p keeps it the median).
- ``rmse_log_mean``: the same with the predictive mean of log(1 + y), the point that minimises
  the square error on the log scale (``res.predict(coords, scale="log1p")``; cp_apr: under
  Poisson(m); cp_gaussian: its predictive mean).
- ``seconds``: the fit's wall time (the machine is shared: indicative only).

A fit that fails is recorded with its exception and the iterations it had done; with
``--fallback-damping D`` a failed cp_poisson is fitted again with ``damping=D`` (a labelled,
non-default setting). cp_negbin is tried and recorded as refused if fit does not take it.

The per-entry cost: cp_poisson and cp_negbin against cp_gaussian at rank ``--cost-rank`` on the
same training entries (fold 1), each with its default schedule, ``--cost-iters`` iterations each
(tol=0), time / (iterations x entries), the median of ``--cost-repeats`` alternating runs after a
warm-up of each.

Raw cells in bench/results/cp-counts{SUFFIX}.json.
"""

import argparse
import json
import math
import os
import pathlib
import time
import warnings

import numpy as np
from scipy import stats
from scipy.special import gammaln

import fastcep
from fastcep.data_tools import load_paper_fold
from fastcep.data_tools.tensors import load_alog_counts
from fastcep.likelihoods import Poisson

SHARED = pathlib.Path(
    os.environ.get("FASTCEP_SHARED_DATA", pathlib.Path(__file__).resolve().parents[2] / "shared" / "data")
)
RESULTS = pathlib.Path(__file__).resolve().parent / "results"
METHODS = ("cp_poisson", "cp_negbin", "cp_apr", "cp_gaussian")


def poisson_logpmf(y, m):
    """log Poisson(y; m), -inf where m = 0 < y, 0 where m = y = 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out = y * np.log(m) - m - gammaln(y + 1.0)
    out[(y == 0) & (m == 0)] = 0.0
    out[(y > 0) & (m <= 0)] = -np.inf
    return out


def strict_json(obj, **kwargs):
    """``json.dumps`` in standard JSON: a float that is not finite (an overflowed predictive mean,
    an lpd of -inf) is written as the string "inf", "-inf" or "nan", not as json's Infinity or
    NaN, which standard JSON readers refuse; anything else not finite raises ValueError."""

    def clean(x):
        if isinstance(x, float) and not math.isfinite(x):
            return repr(float(x))
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items()}
        if isinstance(x, list | tuple):
            return [clean(v) for v in x]
        return x

    return json.dumps(clean(obj), allow_nan=False, **kwargs)


def rmse_log(y, log1p_ey):
    return float(np.sqrt(np.mean((np.log1p(y) - log1p_ey) ** 2)))


def summary(lp):
    """Mean, median and the count of non-finite values of per-entry log densities."""
    finite = np.isfinite(lp)
    return dict(
        lpd=float(np.mean(lp)),
        lpd_median=float(np.median(lp)),
        lpd_finite_mean=float(np.mean(lp[finite])) if finite.any() else None,
        n_nonfinite=int((~finite).sum()),
    )


class Counter:
    """A callback counting iterations (so that a failure reports how far it got)."""

    def __init__(self):
        self.n = 0

    def __call__(self, info):
        self.n += 1
        return False


def fit_fastcep(model, coords, values, shape, rank, seed, **options):
    count = Counter()
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fastcep.ConvergenceWarning)
        try:
            res = fastcep.fit(
                coords, values, model=model, shape=shape, rank=rank, seed=seed, callback=count, **options
            )
        except Exception as exc:  # (recorded: the point of the table)
            return None, dict(
                status="failed",
                error=f"{type(exc).__name__}: {exc}",
                iterations_done=count.n,
                seconds=time.perf_counter() - start,
            )
    return res, dict(
        status="ok", seconds=time.perf_counter() - start, n_iter=res.n_iter, converged=res.converged,
        stop_reason=res.stop_reason,
    )  # fmt: skip


def predictive_median(mean, var, cdf, n_points=401, steps=48):
    """The median of a count y under the predictive int p(y | f) N(f | mean, var) df (arrays of
    the entries): the smallest k with P(y <= k) >= 1/2, where P(y <= k) = sum_j w_j cdf(k,
    exp(mean + sqrt(var) t_j)), cdf(k, rate) the likelihood's CDF. The t_j are ``n_points``
    equally spaced points over +-6 sds with Gaussian weights: for a large rate cdf(k, e^f) is
    nearly a step in f, which a Gauss-Hermite rule would snap to its nodes (off by 0.37 in log k
    at sd 2 with 40 nodes, against a Monte Carlo median), and the grid's spacing (0.03 sd) bounds
    the error instead. Bisection on log(1 + k) over [0, 700] (``steps`` halvings: about 3e-12 on
    that scale), then the integer count."""
    t = np.linspace(-6.0, 6.0, n_points)
    w = np.exp(-0.5 * t * t)
    w /= w.sum()
    with np.errstate(over="ignore"):
        rates = np.exp(np.minimum(mean[:, None] + np.sqrt(var)[:, None] * t[None, :], 700.0))

    def at_least_half(k):
        return (cdf(np.floor(k)[:, None], rates) * w[None, :]).sum(1) >= 0.5

    lo = np.zeros(len(mean))  # (log1p scale: P(y <= 0) may already be >= 1/2)
    hi = np.full(len(mean), 700.0)
    zero = at_least_half(np.zeros(len(mean)))
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        up = at_least_half(np.expm1(mid))
        hi = np.where(up, mid, hi)
        lo = np.where(up, lo, mid)
    return np.where(zero, 0.0, np.floor(np.expm1(hi)))


def negbin_cdf(r):
    """The negative binomial's CDF at dispersion (size) r, as ``cdf(k, rate)``."""
    return lambda k, rate: stats.nbinom.cdf(k, r, r / (r + rate))


def negbin_log1p_median(res, mean, var):
    """log(1 + the predictive median of the count) of a negative binomial fit, per entry of
    predictive moments ``mean``, ``var`` of f."""
    return np.log1p(predictive_median(mean, var, negbin_cdf(res.likelihood.dispersion)))


def run_cp_poisson(train, test, rank, seed, label, **options):
    res, cell = fit_fastcep("cp_poisson", train.coords, train.values, train.shape, rank, seed, **options)
    cell.update(method=label, options=options)
    if res is None:
        return cell
    mean, var = res._f_moments(test.coords)
    lp = np.empty(0)
    try:
        cell["lpd"] = float(res.log_likelihood(test.coords, test.values))
        from fastcep.tensor import likelihoods as CPL

        lp = CPL.log_predictive(res.likelihood.kernel(), test.values, mean, var)
        cell.update({k: v for k, v in summary(lp).items() if k != "lpd"})
    except Exception as exc:
        cell["lpd_error"] = f"{type(exc).__name__}: {exc}"
    # E[y] = E[exp f] = exp(mean + var / 2); log1p of it without overflow
    log_ey = mean + 0.5 * var
    cell["rmse_log"] = rmse_log(test.values, np.logaddexp(0.0, log_ey))
    cell["max_log_ey"] = float(log_ey.max())
    cell["rmse_log_median"] = rmse_log(test.values, np.log1p(predictive_median(mean, var, stats.poisson.cdf)))
    cell["rmse_log_mean"] = float(res.rmse(test.coords, test.values, scale="log1p"))
    # Pearson dispersion of the fit on its training entries (1 for Poisson data)
    tm, tv = res._f_moments(train.coords)
    mu = np.exp(np.minimum(tm + 0.5 * tv, 700.0))
    cell["train_pearson_dispersion"] = float(np.mean((train.values - mu) ** 2 / mu))
    cell["effective_rank"] = res.effective_rank
    return cell


def run_cp_negbin(train, test, rank, seed, label="cp_negbin", **options):
    res, cell = fit_fastcep("cp_negbin", train.coords, train.values, train.shape, rank, seed, **options)
    cell.update(method=label, options=options)
    if res is not None:
        cell["lpd"] = float(res.log_likelihood(test.coords, test.values))
        cell["rmse_log"] = rmse_log(test.values, np.log1p(res.predict(test.coords)))
        cell["rmse_log_median"] = rmse_log(
            test.values, negbin_log1p_median(res, *res._f_moments(test.coords))
        )
        cell["rmse_log_mean"] = float(res.rmse(test.coords, test.values, scale="log1p"))
        cell["dispersion"] = float(res.likelihood.dispersion)
    return cell


def run_cp_apr(train, test, rank, seed):
    import pyttb

    np.random.seed(seed)  # noqa: NPY002 (cp_apr's init="random" draws from numpy's global generator)
    X = pyttb.sptensor(train.coords.astype(np.int64), train.values[:, None].astype(float), train.shape)
    start = time.perf_counter()
    try:
        M, _, out = pyttb.cp_apr(X, rank, printitn=0)
    except Exception as exc:
        return dict(method="cp_apr", status="failed", error=f"{type(exc).__name__}: {exc}")
    seconds = time.perf_counter() - start
    m = np.zeros(len(test.values))
    terms = np.ones((len(test.values), rank)) * np.asarray(M.weights)[None, :]
    for k, A in enumerate(M.factor_matrices):
        terms *= A[test.coords[:, k]]
    m = terms.sum(1)
    lp = poisson_logpmf(test.values, m)
    cell = dict(method="cp_apr", status="ok", seconds=seconds, n_iter=int(out.get("nTotalIters", -1)))
    cell.update(summary(lp))
    cell["rmse_log"] = rmse_log(test.values, np.log1p(m))
    cell["rmse_log_median"] = rmse_log(test.values, np.log1p(stats.poisson.ppf(0.5, np.maximum(m, 0.0))))
    with np.errstate(divide="ignore"):  # (log 0 = -inf: a rate of 0 predicts log(1 + 0) = 0)
        log_m = np.log(np.maximum(m, 0.0))
    cell["rmse_log_mean"] = rmse_log(test.values, Poisson().log1p_moments(log_m, np.zeros(len(m)))[0])
    cell["test_m_zero"] = int((m <= 0).sum())
    tt = np.ones((len(train.values), rank)) * np.asarray(M.weights)[None, :]
    for k, A in enumerate(M.factor_matrices):
        tt *= A[train.coords[:, k]]
    mu = tt.sum(1)
    ok = mu > 0
    cell["train_pearson_dispersion"] = float(np.mean((train.values[ok] - mu[ok]) ** 2 / mu[ok]))
    cell["out"] = {k: (v if isinstance(v, (int, float, str)) else str(v)) for k, v in out.items()}
    return cell


def run_cp_gaussian(fold, counts_test, rank, seed):
    train, test = load_paper_fold("alog", fold, SHARED)
    res, cell = fit_fastcep("cp_gaussian", train.coords, train.values, train.shape, rank, seed)
    cell.update(method="cp_gaussian")
    if res is None:
        return cell
    mean, var = res.predict(test.coords, return_var=True)
    y = counts_test.values
    z = np.log1p(y)  # (the files' values to 5 digits; the counts' logs, as scored)
    lp = -0.5 * np.log(2 * np.pi * var) - 0.5 * (z - mean) ** 2 / var - z
    cell.update(summary(lp))
    cell["lpd_log1p_values"] = float(res.log_likelihood(test.coords, test.values))
    cell["rmse_log"] = float(res.rmse(test.coords, test.values))
    cell["rmse_log_median"] = cell["rmse_log"]  # (a Gaussian predictive: its median is its mean)
    cell["rmse_log_mean"] = cell["rmse_log"]
    cell["effective_rank"] = res.effective_rank
    return cell


def overdispersion(train):
    """Variance / mean of the training counts: overall and per slice of each mode (median)."""
    y, c = train.values, train.coords
    out = dict(overall=float(y.var() / y.mean()), mean=float(y.mean()), zeros=float(np.mean(y == 0)))
    for k in range(c.shape[1]):
        ratios = []
        for i in np.unique(c[:, k]):
            v = y[c[:, k] == i]
            if len(v) >= 5 and v.mean() > 0:
                ratios.append(v.var() / v.mean())
        out[f"mode{k}_slice_median"] = float(np.median(ratios))
    return out


def per_entry_cost(fold, rank, iters, repeats, damping):
    """Seconds per (iteration x entry) of cp_poisson, cp_negbin and cp_gaussian on the same
    entries (each with its default schedule)."""
    counts, _ = load_alog_counts(fold, SHARED)
    logs, _ = load_paper_fold("alog", fold, SHARED)
    fallback = {} if damping is None else {"damping": damping}
    runs = {
        "cp_poisson": (counts.values, fallback),
        "cp_negbin": (counts.values, fallback),
        "cp_gaussian": (logs.values, {}),
    }
    n = len(counts.values)
    times = {m: [] for m in runs}
    for rep in range(repeats + 1):  # (rep 0: the warm-up)
        for model, (values, opts) in runs.items():
            res, cell = fit_fastcep(
                model, counts.coords, values, counts.shape, rank, 0, max_iter=iters, tol=0.0, **opts
            )
            if res is None:
                times[model].append(dict(error=cell["error"], iterations_done=cell["iterations_done"]))
                continue
            if rep:
                times[model].append(cell["seconds"] / (res.n_iter * n))
    out = {}
    for model, ts in times.items():
        good = [t for t in ts if isinstance(t, float)]
        out[model] = dict(
            per_entry_us=float(np.median(good) * 1e6) if good else None, runs_us=[t * 1e6 for t in good],
            failures=[t for t in ts if not isinstance(t, float)], options=runs[model][1],
        )  # fmt: skip
    out.update(rank=rank, iters=iters, entries=n, fold=fold)
    return out


def fmt(cell, key, spec):
    v = cell.get(key)
    return "" if v is None else format(v, spec)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--folds", nargs="+", type=int, default=[1, 2, 3, 4, 5])
    ap.add_argument("--ranks", nargs="+", type=int, default=[3, 5, 8, 10])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    ap.add_argument("--fallback-damping", type=float, default=None)
    ap.add_argument(
        "--schedule", default=None, help="the count models' schedule (a labelled, non-default setting)"
    )
    ap.add_argument("--cost-rank", type=int, default=8)
    ap.add_argument("--cost-iters", type=int, default=20)
    ap.add_argument("--cost-repeats", type=int, default=3)
    ap.add_argument("--no-cost", action="store_true")
    ap.add_argument("--cost-only", action="store_true", help="only the per-entry cost (on the first fold)")
    ap.add_argument("--tag", default="")
    args = ap.parse_args(argv)
    if not (SHARED / "alog").is_dir():
        print(f"skipped: no data in {SHARED}")
        return
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"cp-counts{args.tag}.json"
    record = dict(cells=[], overdispersion={}, cost=None, args=vars(args))

    def save():
        path.write_text(strict_json(record, indent=1))

    count_opts = {} if args.schedule is None else {"schedule": args.schedule}
    tag = "" if args.schedule is None else f", schedule {args.schedule}"
    for fold in [] if args.cost_only else args.folds:
        train, test = load_alog_counts(fold, SHARED)
        record["overdispersion"][fold] = overdispersion(train)
        print(strict_json(dict(fold=fold, overdispersion=record["overdispersion"][fold])), flush=True)
        for rank in args.ranks:
            for method in args.methods:
                if method == "cp_poisson":
                    cells = [run_cp_poisson(train, test, rank, args.seed, "cp_poisson" + tag, **count_opts)]
                    if cells[0]["status"] == "failed" and args.fallback_damping is not None:
                        d = args.fallback_damping
                        cells.append(
                            run_cp_poisson(
                                train, test, rank, args.seed, f"cp_poisson, damping {d}", damping=d
                            )
                        )
                elif method == "cp_negbin":
                    cells = [run_cp_negbin(train, test, rank, args.seed, "cp_negbin" + tag, **count_opts)]
                elif method == "cp_apr":
                    cells = [run_cp_apr(train, test, rank, args.seed)]
                else:
                    cells = [run_cp_gaussian(fold, test, rank, args.seed)]
                for cell in cells:
                    cell.update(fold=fold, rank=rank, seed=args.seed)
                    record["cells"].append(cell)
                    print(strict_json(cell), flush=True)
                save()
    if not args.no_cost:
        record["cost"] = per_entry_cost(
            args.folds[0], args.cost_rank, args.cost_iters, args.cost_repeats, args.fallback_damping
        )
        print(strict_json(dict(cost=record["cost"])), flush=True)
        save()
    print_tables(record, args.ranks)


def print_tables(record, ranks):
    cells = record["cells"]
    labels = list(dict.fromkeys(c["method"] for c in cells))
    for key, title in (
        ("lpd", "test lpd of the counts (mean over folds)"),
        ("rmse_log", "RMSE, log scale, of log1p(E[y])"),
        ("rmse_log_median", "RMSE, log scale, of the predictive median"),
        ("rmse_log_mean", "RMSE, log scale, of the predictive mean of log(1 + y)"),
    ):
        print(f"\n{title}\n")
        print("| method | " + " | ".join(f"rank {r}" for r in ranks) + " |")
        print("|---|" + "---|" * len(ranks))
        for label in labels:
            row = []
            for r in ranks:
                mine = [c for c in cells if c["method"] == label and c["rank"] == r]
                ok = [c[key] for c in mine if c.get(key) is not None]
                failed = sum(c["status"] != "ok" for c in mine)
                text = f"{np.mean(ok):.4g}" if ok else "-"
                if failed:
                    text += f" ({failed}/{len(mine)} failed)"
                row.append(text)
            print(f"| {label} | " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
