"""Does the exact count CP model drift as CEP-1 does? A long MCMC run of the negative binomial CP
model on Alog's counts, beside the CEP-1 fit (issue 22).

    python -m bench.cp_count_gold [--fold 1] [--rank 3] [--dispersion 0.444] [--sweeps 4000]
                                  [--prior wishart|ard|fixed] [--init random|cep] [--seed 0]
                                  [--every 100]

The model is ``fastcep.fit(model="cp", likelihood=NegativeBinomial(dispersion=r))`` with the
hierarchical prior of ``--prior``: y_e ~ NB(mean exp(f_e), size r), f_e = sum_r prod_k U_k[i_k, r],
the embeddings N(mu_k, Lambda_k^-1) per mode with (mu_k, Lambda_k) from the hyperpriors of
``fastcep.tensor.hyper`` (``bench.cp_gold``'s draws). The dispersion is held at ``--dispersion``
(fold 1 rank 3's default fit learns 0.58-0.61 over iterations 20-300 and ends at 0.444 after
500): the question is the posterior of the embeddings and of the prior, not of r. Chains from
different starts may stay in different modes of the CP posterior (BENCHMARKS.md): run two.

Each sweep draws every mode's (mu_k, Lambda_k) given its embeddings, then every mode's
embeddings by elliptical slice sampling (Murray, Adams & MacKay 2010): given the other modes and
the prior, the objects of a mode are independent, each with its Gaussian prior and the
likelihood of its own entries; one elliptical slice step per object, all the objects of a mode
at once. The step leaves the exact conditional invariant and needs no tuning. ``--init random``
starts at 0.5 N(0, 1) embeddings; ``--init cep`` at the means of the default cp_negbin fit after
40 iterations (before its drift).

Every ``--every`` sweeps a row: the current draw's training lpd (mean log p(y | f)), mode 2's
prior mean and variances (the CEP-1 fit's drift is there), and over the test entries of the
objects with only zero counts among the training entries ("zero slices"), the draw's lowest and
median f; after the burn-in (a tenth of the sweeps), the running gold test lpd: the mean over the
test entries of log mean_s p(y_e | f_e^s). Every LOG1P_EVERY-th sweep after the burn-in adds
E[log(1 + y_e) | f_e^s] (``NegativeBinomial.log1p_moments``) to the gold's predictive mean of
log(1 + y), whose RMSE against the test counts' logs is the summary's ``test_rmse_log_mean``.
Rows are printed as JSON lines; all of them and the summary go to
bench/results/cp-count-gold-f{fold}-r{rank}-nb{r}-{prior}-{init}-s{seed}-n{sweeps}.json, and the
test entries' gold moments of f (``mean``, ``var``), their gold log predictive density
(``lpd``), their predictive mean of log(1 + y) (``log1p_mean``) and the zero-slice mask
(``zero``) to the .npz of the same name (``bench.cp_count_drift --gold`` scores a CEP-1 fit
against them).
"""

import argparse
import pathlib
import time

import numpy as np
from scipy.linalg import solve_triangular
from scipy.special import gammaln

from fastcep.likelihoods import NegativeBinomial

from .cp_counts import SHARED, fit_fastcep, load_alog_counts, strict_json
from .cp_gold import _draw_priors, _products

RESULTS = pathlib.Path(__file__).resolve().parent / "results"
#: the mode whose learned prior drifts in the CEP-1 fit (0-based: Alog's second mode)
DRIFT_MODE = 1
#: the draws after the burn-in that add to the predictive mean of log(1 + y): every this many
LOG1P_EVERY = 10


def negbin_loglik(y, r):
    """``loglik(f, index=None)``: log NB(y_e | mean exp(f_e), size r) of the entries (or of the
    entries ``index``), stable for any f: r log(r / (r + e^f)) + y log(e^f / (r + e^f)) + log
    Gamma(y + r) - log Gamma(r) - log Gamma(y + 1). The textbook formula, vectorised, not the
    engine's leaf (``kernels.likelihoods.negbin``): a gold shares no code with what it checks."""
    y = np.asarray(y, dtype=np.float64)
    const = gammaln(y + r) - gammaln(r) - gammaln(y + 1.0)
    log_r = np.log(r)

    def loglik(f, index=slice(None)):
        t = f - log_r
        return const[index] - r * np.logaddexp(0.0, t) - y[index] * np.logaddexp(0.0, -t)

    return loglik


def slice_step(rng, Uk, mu, Lam, obj, H, loglik, max_shrinks=200):
    """One elliptical slice step for each object of one mode, all at once: new embeddings (d, R)
    from the current ``Uk`` (d, R), invariant for the conditional prod_j N(u_j | mu, Lam^-1)
    prod_{e: obj_e = j} p(y_e | u_j . H_e). ``obj`` (n,): each entry's object in this mode; ``H``
    (n, R): the product of the other modes' embeddings of each entry; ``loglik(f, index)`` the
    entries' log-likelihoods. The draws taken do not depend on the outcome (one uniform per
    object every round), so a seed fixes the chain."""
    d, R = Uk.shape
    L = np.linalg.cholesky(Lam)
    nu = solve_triangular(L, rng.standard_normal((R, d)), lower=True, trans="T").T  # N(0, Lam^-1)
    x = Uk - mu

    def object_loglik(U, rows):
        f = np.einsum("er,er->e", U[obj[rows]], H[rows])
        return np.bincount(obj[rows], loglik(f, rows), minlength=d)

    level = object_loglik(Uk, np.arange(len(obj))) + np.log(rng.random(d))
    theta = rng.uniform(0.0, 2.0 * np.pi, d)
    lo, hi = theta - 2.0 * np.pi, theta.copy()
    out = Uk.copy()
    pending = np.ones(d, dtype=bool)
    for _ in range(max_shrinks):
        prop = mu + x * np.cos(theta)[:, None] + nu * np.sin(theta)[:, None]
        rows = np.nonzero(pending[obj])[0]
        ok = pending & (object_loglik(prop, rows) > level)
        out[ok] = prop[ok]
        pending &= ~ok
        if not pending.any():
            return out
        lo = np.where(pending & (theta < 0.0), theta, lo)
        hi = np.where(pending & (theta >= 0.0), theta, hi)
        theta = rng.uniform(lo, hi)
    raise RuntimeError(f"slice_step: {pending.sum()} object(s) not placed after {max_shrinks} shrinks")


def zero_slice_entries(train, test):
    """The test entries of objects (any mode) with only zero counts among the training entries."""
    mask = np.zeros(len(test.values), dtype=bool)
    for k, d in enumerate(train.shape):
        positive = np.bincount(train.coords[:, k], train.values > 0, minlength=d)
        seen = np.bincount(train.coords[:, k], minlength=d) > 0
        mask |= (seen & (positive == 0))[test.coords[:, k]]
    return mask


def against_gold(gold, mean, var, lpd):
    """A CEP-1 fit's test moments of f (``mean``, ``var``) and per-entry log predictive density
    ``lpd`` against the gold's (``np.load`` of this bench's .npz), over the test entries of the
    zero slices and over the others: the median |mean - gold mean| in gold sds of f, the median
    ratio of the sds, and the mean lpd beside the gold's."""
    out = {}
    for name, part in (("other", ~gold["zero"]), ("zero", gold["zero"])):
        sd = np.sqrt(gold["var"][part])
        out[name] = dict(
            mean_in_sds=float(np.median(np.abs(mean[part] - gold["mean"][part]) / sd)),
            sd_ratio=float(np.median(np.sqrt(var[part]) / sd)),
            lpd=float(np.mean(lpd[part])), gold_lpd=float(np.mean(gold["lpd"][part])),
        )  # fmt: skip
    return out


def start(rng, train, rank, init, prior):
    """The chain's first embeddings: 0.5 N(0, 1) ("random"), or the means of the default
    cp_negbin fit (its dispersion learned) after 40 iterations ("cep"; with a dispersion held
    from the first iteration CEP-1 does not settle on Alog: BENCHMARKS.md)."""
    if init == "random":
        return [0.5 * rng.standard_normal((d, rank)) for d in train.shape]
    res, cell = fit_fastcep(
        "cp_negbin", train.coords, train.values, train.shape, rank, 0, max_iter=40, prior=prior
    )
    if res is None:
        raise RuntimeError(f"--init cep: the start's fit failed: {cell['error']}")
    return [m.copy() for m in res.posterior.means]


def run(fold, rank, r, sweeps, prior, init, seed, every):
    train, test = load_alog_counts(fold, SHARED)
    rng = np.random.default_rng(seed)
    U = start(rng, train, rank, init, prior)
    lik_train, lik_test = negbin_loglik(train.values, r), negbin_loglik(test.values, r)
    zero = zero_slice_entries(train, test)
    burn = sweeps // 10
    acc = np.full(len(test.values), -np.inf)  # log sum_s p(y_e | f_e^s) after the burn-in
    f_sum, f_sq = np.zeros(len(test.values)), np.zeros(len(test.values))
    log1p_sum, log1p_draws, likelihood = np.zeros(len(test.values)), 0, NegativeBinomial(dispersion=r)
    rows, t0 = [], time.perf_counter()
    for sweep in range(1, sweeps + 1):
        priors = _draw_priors(rng, U, prior, 1.0)
        for k in range(len(U)):
            mu, Lam = priors[k]
            H = _products(U, train.coords, skip=k)
            U[k] = slice_step(rng, U[k], mu, Lam, train.coords[:, k], H, lik_train)
        f_test = _products(U, test.coords).sum(1)
        if sweep > burn:
            acc = np.logaddexp(acc, lik_test(f_test))
            f_sum += f_test
            f_sq += f_test * f_test
            if (sweep - burn) % LOG1P_EVERY == 0:
                log1p_sum += likelihood.log1p_moments(f_test, np.zeros(len(f_test)))[0]
                log1p_draws += 1
        if sweep % every == 0 or sweep == sweeps:
            mu, Lam = priors[DRIFT_MODE]
            kept = sweep - burn
            row = dict(
                sweep=sweep, seconds=round(time.perf_counter() - t0, 1),
                train_lpd=float(np.mean(lik_train(_products(U, train.coords).sum(1)))),
                prior_mean=[round(float(v), 3) for v in mu],
                prior_var=[round(float(v), 3) for v in np.diag(np.linalg.inv(Lam))],
                zero_lowest_f=float(f_test[zero].min()), zero_median_f=float(np.median(f_test[zero])),
                test_lpd=float(np.mean(acc - np.log(kept))) if kept > 0 else None,
            )  # fmt: skip
            rows.append(row)
            print(strict_json(row), flush=True)
    kept = sweeps - burn
    mean = f_sum / kept
    var = f_sq / kept - mean * mean
    log1p_mean = log1p_sum / max(log1p_draws, 1)
    summary = dict(
        fold=fold, rank=rank, dispersion=r, sweeps=sweeps, burn=burn, prior=prior, init=init, seed=seed,
        test_lpd=float(np.mean(acc - np.log(kept))), zero_entries=int(zero.sum()),
        zero_test_lpd=float(np.mean(acc[zero] - np.log(kept))),
        zero_lowest_mean_f=float(mean[zero].min()), zero_median_mean_f=float(np.median(mean[zero])),
        largest_var_f=float(var.max()), lowest_mean_f=float(mean.min()),
        log1p_draws=log1p_draws,
        test_rmse_log_mean=float(np.sqrt(np.mean((np.log1p(test.values) - log1p_mean) ** 2))),
    )  # fmt: skip
    print(strict_json(summary), flush=True)
    tag = f"-f{fold}-r{rank}-nb{r:g}-{prior}-{init}-s{seed}-n{sweeps}"  # (a short run keeps a long one)
    (RESULTS / f"cp-count-gold{tag}.json").write_text(strict_json(dict(summary=summary, rows=rows), indent=1))
    np.savez(RESULTS / f"cp-count-gold{tag}.npz", mean=mean, var=var, lpd=acc - np.log(kept), zero=zero,
             log1p_mean=log1p_mean)  # fmt: skip
    return summary, rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fold", type=int, default=1)
    ap.add_argument("--rank", type=int, default=3)
    ap.add_argument("--dispersion", type=float, default=0.444)
    ap.add_argument("--sweeps", type=int, default=4000)
    ap.add_argument("--prior", default="wishart", choices=("wishart", "ard", "fixed"))
    ap.add_argument("--init", default="random", choices=("random", "cep"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--every", type=int, default=100)
    args = ap.parse_args(argv)
    if not (SHARED / "alog").is_dir():
        print(f"skipped: no data in {SHARED}")
        return
    RESULTS.mkdir(exist_ok=True)
    run(args.fold, args.rank, args.dispersion, args.sweeps, args.prior, args.init, args.seed, args.every)


if __name__ == "__main__":
    main()
