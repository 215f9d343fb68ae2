"""Regression fits with the default intercept on features far from 0 (issue 37), as Markdown tables.

``python -m bench.uncentred speed``: the un-centred cases of a new user, against scikit-learn's
``LogisticRegression`` (lbfgs, its defaults): age in years and income in thousands (5,000 rows), and
scikit-learn's estimator-check data (two features around 100, 100 rows, random labels; and the
same with a signal). For each fastcep model and method, ``center=True`` (the default) and
``center=False``: sweeps, stop reason and the median wall time of ``--repeats`` fits after a
warm-up, and the ratio to scikit-learn's median measured in the same run.

``python -m bench.uncentred gold``: CEP-1 centred (the default) and un-centred (run to its fixed
point, parallel and sequential, tol 1e-9) on 1,000 rows of age and income with
``intercept_var=1e4`` (so that both are one model), against an importance sample of the exact
posterior (``bench.gold``): each fit's largest mean error and its sds over the gold's, on the
user's scale.

``python -m bench.uncentred uci``: the six UCI sets of the paper (``../shared/data/uci/raw``, or
the PyPI loaders), probit and logistic CEP-1 with every default (the intercept with it), 5
random halves for each of ``--seeds``: mean test log-likelihood, AUC and sweeps, the fits that
did not converge, and the worst test log-likelihood of any split (a diverged fit shows there).
Runs the options of ``--setting`` side by side (e.g. ``--setting centred: --setting
raw:center=False``); on a checkout without the ``center`` option run it with the empty setting
only.
"""

import argparse
import time
import warnings

import numpy as np

import fastcep
from fastcep.data_tools import load_uci, uci_splits

from .defaults_check import SHARED, UCI_SETS


def age_income(n=5000, seed=0):
    """Age in years (18-80) and income in thousands (log-normal about 50); a logistic outcome
    with about 25 % positives."""
    rng = np.random.default_rng(seed)
    age = rng.uniform(18, 80, n)
    income = rng.lognormal(np.log(50), 0.5, n)
    f = 0.04 * (age - 45) + 0.02 * (income - 55) - 1.0
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-f))).astype(float)
    return np.column_stack([age, income]), y


def around_100(n=100, seed=0, signal=False):
    """scikit-learn's estimator-check data: X ~ N(100, 1) (n, 2), labels at random (or, with
    ``signal``, through the first feature's deviation)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(loc=100, size=(n, 2))
    if signal:
        return X, (X[:, 0] - 100 + 0.5 * rng.standard_normal(n) > 0).astype(float)
    return X, rng.integers(0, 2, n).astype(float)


CASES = {
    "age and income, 5000 x 2": age_income,
    "around 100, 100 x 2, random labels": around_100,
    "around 100, 100 x 2, a signal": lambda: around_100(signal=True),
}


def _median_time(func, repeats):
    func()  # (compile, or load from the cache)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        out = func()
        times.append(time.perf_counter() - t)
    return out, float(np.median(times)), float(np.min(times)), float(np.max(times))


def speed(repeats, methods):
    from sklearn.linear_model import LogisticRegression

    print("| case | model / method | center | sweeps | stop | median ms (min-max) | / scikit-learn |")
    print("|---|---|---|---|---|---|---|")
    for case, make in CASES.items():
        X, y = make()
        _, sk, sk_lo, sk_hi = _median_time(lambda X=X, y=y: LogisticRegression().fit(X, y), repeats)
        print(f"| {case} | scikit-learn LogisticRegression | | | | {1e3 * sk:.1f} ({1e3 * sk_lo:.1f}-"
              f"{1e3 * sk_hi:.1f}) | 1 |", flush=True)  # fmt: skip
        for model in ("probit", "logistic"):
            for method in methods:
                for center in (True, False):

                    def fit(X=X, y=y, model=model, method=method, center=center):
                        return fastcep.fit(X, y, model=model, method=method, center=center)

                    res, med, lo, hi = _median_time(fit, repeats)
                    print(
                        f"| {case} | {model} / {method} | {center} | {res.n_iter} | {res.stop_reason} | "
                        f"{1e3 * med:.1f} ({1e3 * lo:.1f}-{1e3 * hi:.1f}) | {med / sk:.2f} |",
                        flush=True,
                    )


def gold():
    from . import gold as G

    rng = np.random.default_rng(5)
    n = 1000
    age, income = rng.uniform(18, 80, n), rng.lognormal(np.log(50), 0.5, n)
    X = np.column_stack([age, income])
    f = 0.04 * (age - 45) + 0.02 * (income - 55) - 1
    print("| model | fit | sweeps | largest mean error (gold sds) | sd / gold sd (w_age, w_income, b) |")
    print("|---|---|---|---|---|")
    for model in ("probit", "logistic"):
        y = (rng.uniform(size=n) < 1 / (1 + np.exp(-f))).astype(float)
        # the prior N(0, 1e4) of b: a column of 100 whose weight has the prior N(0, 1)
        g = G.importance_gold(np.column_stack([X, np.full(n, 100.0)]), y, model, prior_var=1.0)
        gold_mean, gold_sd = g["mean"] * [1, 1, 100], np.sqrt(np.diag(g["cov"])) * [1, 1, 100]
        kw = dict(model=model, intercept_var=1e4, tol=1e-9, max_iter=100_000)
        fits = {
            "centred (default)": fastcep.fit(X, y, **kw),
            "un-centred, parallel": fastcep.fit(X, y, center=False, **kw),
            "un-centred, sequential": fastcep.fit(X, y, center=False, schedule="sequential", **kw),
        }
        for name, res in fits.items():
            mean = np.append(res.posterior.mean, res.intercept.mean)
            sd = np.sqrt(np.append(res.posterior.var, res.intercept.var))
            err = np.max(np.abs(mean - gold_mean) / gold_sd)
            ratios = ", ".join(f"{r:.3f}" for r in sd / gold_sd)
            print(f"| {model} | {name} | {res.n_iter:,} | {err:.3f} | {ratios} |", flush=True)
        print(f"(gold ESS {g['ess']:,.0f} of {g['n_samples']:,.0f})", flush=True)


def _setting(text):
    name, _, rest = text.partition(":")
    options = {}
    for item in filter(None, rest.split(",")):
        key, _, value = item.partition("=")
        options[key] = {"True": True, "False": False}.get(value, value)
    return name, options


def uci(seeds, settings, models, method):
    root = SHARED / "uci" / "raw"
    print("| set | model | setting | test LL | AUC | sweeps (mean, max) | not converged | worst test LL |")
    print("|---|---|---|---|---|---|---|---|")
    for name in UCI_SETS:
        ds = load_uci(name, str(root) if root.is_dir() else None)
        for model in models:
            for label, options in settings:
                ll, auc, sweeps, missed = [], [], [], 0
                for seed in seeds:
                    for tr, te in uci_splits(len(ds.y), 5, seed=seed):
                        res = fastcep.fit(ds.X[tr], ds.y[tr], model=model, method=method, **options)
                        ll.append(res.log_likelihood(ds.X[te], ds.y[te]))
                        auc.append(res.auc(ds.X[te], ds.y[te]))
                        sweeps.append(res.n_iter)
                        missed += not res.converged
                print(
                    f"| {name} | {model} | {label} | {np.mean(ll):.4f} | {np.mean(auc):.4f} | "
                    f"{np.mean(sweeps):.0f}, {max(sweeps)} | {missed} of {len(ll)} | {min(ll):.4f} |",
                    flush=True,
                )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("table", choices=("speed", "gold", "uci"))
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--methods", nargs="+", default=["cep1", "cep2", "ep"])
    parser.add_argument("--method", default="cep1", help="uci: the method")
    parser.add_argument("--models", nargs="+", default=["probit", "logistic"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--setting", action="append", type=_setting, help="NAME:key=value,...")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore", fastcep.ConvergenceWarning)
    if args.table == "speed":
        speed(args.repeats, args.methods)
    elif args.table == "gold":
        gold()
    else:
        uci(args.seeds, args.setting or [("defaults", {})], args.models, args.method)


if __name__ == "__main__":
    main()
