"""CP decomposition against a gold standard: the predictions of CEP-1 (and, with the fixed prior,
of VMP, the paper's baseline, in the same run) beside a long Gibbs sampler's, on small synthetic
tensors.

    python -m bench.cp_gold [--iterations 60000] [--seeds 0 1 2]
                            [--models cp_probit cp_gaussian cp_student_t]
                            [--prior fixed|wishart|ard] [--tag SUFFIX]

The sampler alternates the modes, drawing each mode's embeddings from their Gaussian
conditional (a Bayesian linear regression on the Hadamard product of the other modes) under
the prior of ``--prior``, the same model as ``fastcep.fit(prior=...)`` (hyperpriors from
``fastcep.tensor.hyper``):

- "fixed": N(0, I), ``fastcep.fit``'s ``prior_var`` default;
- "wishart" (BPMF): N(mu_k, Lambda_k^-1) per mode k; every sweep first draws each mode's
  (mu_k, Lambda_k) from its Normal-Wishart conditional given that mode's embeddings
  (hyperprior N(mu | 0, (NW_BETA0 Lambda)^-1) Wishart(Lambda | I, R));
- "ard" (BCPF): N(0, diag(lambda)^-1) in every mode; every sweep first draws the column
  precisions lambda_r from their Gamma conditional given all the embeddings (hyperprior
  Gamma(ARD_A0, ARD_B0), shape and rate).

cp_gaussian also draws the noise precision tau from its Gamma conditional (prior
Gamma(1e-3, 1e-3), the default); cp_probit draws Albert and Chib's latent z_e ~ N(f_e, 1),
truncated to the sign of the label; cp_student_t (a Student-t of known df and scale, T_PARAMS,
fitted as ``model="cp", likelihood=StudentT(...)``, on a tensor with OUTLIERS of its entries
moved by +-OUTLIER) draws each entry's precision weight of the t's scale mixture. Two chains with
different seeds, burn-in a tenth of the
iterations; the largest difference between the two chains' estimates is printed as the Monte
Carlo error. Sign and permutation symmetries of the factors leave f, and so every compared
quantity, unchanged.

Compared, on the observed ("train") entries and on 200 unobserved ("test") ones:
cp_probit P(y = 1) (gold: the average of Phi(f)); cp_gaussian the predictive mean of y in units
of the gold predictive sd, the predictive sd (ratio to the gold's) and E[tau]; cp_student_t the
same of f (its mean in gold sds of f, its sd's ratio).
Writes bench/results/cp-gold{SUFFIX}.md.
"""

import argparse
import time

import numpy as np
from scipy.linalg import solve_triangular
from scipy.special import ndtr, ndtri

import fastcep
from fastcep.data_tools import make_cp_tensor
from fastcep.likelihoods import StudentT
from fastcep.tensor import hyper
from fastcep.tensor.hyper import ARD_A0, ARD_B0, NW_BETA0

from .gold import RESULTS
from .regression_quality import report_head

#: (name, shape, rank, observed entries): a dense and a sparse case
CASES = (("dense", (10, 10, 10), 2, 500), ("sparse", (12, 12, 12), 3, 250))
N_TEST = 200
NOISE_SD = 0.3  # cp_gaussian
#: cp_student_t: the known (df, scale) of its noise, and the fraction of entries moved by
#: +-OUTLIER (outliers)
T_PARAMS = (4.0, 0.3)
OUTLIERS = 0.1
OUTLIER = 5.0
A0 = B0 = 1e-3  # the default Gamma prior of tau
#: the fits compared per prior (``--prior``): (label, fastcep.fit options)
FITS = {
    "fixed": {
        "cp_probit": (
            ("CEP-1 full", dict(probit_curvature="full")),
            ("CEP-1 rank1", dict(probit_curvature="rank1")),
            ("CEP-1 rank1 cavity", dict(probit_curvature="rank1", expect_under="cavity")),
            ("VMP", dict(method="vmp")),
        ),
        "cp_gaussian": (
            ("CEP-1", {}),
            ("CEP-1 cavity", dict(expect_under="cavity")),
            ("VMP", dict(method="vmp")),
        ),
        "cp_student_t": (
            ("CEP-1 cavity", dict(prior="fixed", expect_under="cavity")),
            ("CEP-1 (default)", dict(prior="fixed", expect_under="posterior")),
            ("CEP-1 sequential", dict(prior="fixed", schedule="sequential")),
        ),
    },
}
#: the hierarchical priors: CEP-1 only (VMP keeps the fixed prior, fit refuses prior= with it)
for _prior in ("wishart", "ard"):
    FITS[_prior] = {
        "cp_probit": (
            ("CEP-1 full cavity", dict(prior=_prior, probit_curvature="full", expect_under="cavity")),
            ("CEP-1 rank1 cavity", dict(prior=_prior, probit_curvature="rank1", expect_under="cavity")),
            ("CEP-1 full", dict(prior=_prior, probit_curvature="full")),
            ("CEP-1 rank1", dict(prior=_prior, probit_curvature="rank1")),
        ),
        "cp_gaussian": (
            ("CEP-1 cavity", dict(prior=_prior, expect_under="cavity")),
            ("CEP-1", dict(prior=_prior)),
        ),
        "cp_student_t": (
            ("CEP-1 cavity", dict(prior=_prior, expect_under="cavity")),
            ("CEP-1 (default)", dict(prior=_prior, expect_under="posterior")),
            ("CEP-1 sequential", dict(prior=_prior, schedule="sequential")),
        ),
    }
#: the prior as written in the results' text
PRIOR_TEXT = {
    "fixed": "prior N(0, I)",
    "wishart": "prior N(mu_k, Lambda_k^-1) per mode with a Normal-Wishart hyperprior (BPMF: "
    f"beta0 {NW_BETA0:g}, W0 = I / {hyper.NW_W0_INV:g}, nu0 = R), sampled in the chain and "
    "`prior='wishart'` in every fit",
    "ard": f"prior N(0, diag(lambda)^-1) with lambda_r ~ Gamma({ARD_A0:g}, {ARD_B0:g}) (BCPF), sampled "
    "in the chain and `prior='ard'` in every fit",
}


def _products(U, coords, skip=None):
    H = np.ones((len(coords), U[0].shape[1]))
    for k, Uk in enumerate(U):
        if k != skip:
            H *= Uk[coords[:, k]]
    return H


def draw_wishart(rng, W_inv, nu):
    """Lambda ~ Wishart(W, nu), E[Lambda] = nu W, given the inverse scale W_inv (R, R) (Bartlett:
    Lambda = X X^T, X = C^-T A with W_inv = C C^T and A lower triangular, A_ii^2 ~ chi2(nu - i),
    A_ij ~ N(0, 1) below the diagonal)."""
    R = len(W_inv)
    A = np.tril(rng.standard_normal((R, R)), -1)
    A[np.diag_indices(R)] = np.sqrt(rng.chisquare(nu - np.arange(R)))
    X = solve_triangular(np.linalg.cholesky(W_inv), A, lower=True, trans="T")
    return X @ X.T


def draw_normal_wishart(rng, Uk):
    """(mu (R,), Lambda (R, R)) of one mode from their conditional given its embeddings Uk (n, R):
    Lambda ~ Wishart(W_N, nu_N), mu | Lambda ~ N(m_N, (beta_N Lambda)^-1) with beta_N = NW_BETA0 + n,
    m_N = n xbar / beta_N, nu_N = R + n, W_N^-1 = W0^-1 + sum_j (u_j - xbar)(u_j - xbar)^T
    + NW_BETA0 n / beta_N xbar xbar^T (BPMF's Gibbs step)."""
    n, R = Uk.shape
    xbar = Uk.mean(axis=0)
    d = Uk - xbar
    beta = NW_BETA0 + n
    W_inv = hyper.NW_W0_INV * np.eye(R) + d.T @ d + (NW_BETA0 * n / beta) * np.outer(xbar, xbar)
    Lam = draw_wishart(rng, W_inv, R + n)
    L = np.linalg.cholesky(beta * Lam)
    mu = n * xbar / beta + solve_triangular(L, rng.standard_normal(R), lower=True, trans="T")
    return mu, Lam


def draw_ard(rng, U):
    """The column precisions lambda (R,) from their conditional given every mode's embeddings U
    (list of (d_k, R)): Gamma(ARD_A0 + n / 2, ARD_B0 + sum of u_r^2 / 2), n embeddings in all."""
    n = sum(len(Uk) for Uk in U)
    squares = sum((Uk * Uk).sum(axis=0) for Uk in U)
    return rng.gamma(ARD_A0 + 0.5 * n, 1.0 / (ARD_B0 + 0.5 * squares))


def _draw_priors(rng, U, prior, prior_var):
    """Each mode's prior (mean (R,), precision (R, R)) for this sweep: fixed, or drawn."""
    R = U[0].shape[1]
    if prior == "wishart":
        return [draw_normal_wishart(rng, Uk) for Uk in U]
    Lam = np.diag(draw_ard(rng, U)) if prior == "ard" else np.eye(R) / prior_var
    return [(np.zeros(R), Lam)] * len(U)


def cp_gibbs(
    model, coords, y, shape, rank, n_iter, seed, eval_coords, prior_var=1.0, prior="fixed", t_params=T_PARAMS
):
    """Gibbs averages after burn-in (n_iter // 10), at ``coords`` and ``eval_coords``; ``prior``
    "fixed" (N(0, prior_var I)), "wishart" or "ard" (hyperparameters drawn every sweep).

    cp_probit (y in {0, 1}): {"p": (train, test)} the mean of Phi(f). cp_gaussian:
    {"mean": (train, test)} of f, {"var": (train, test)} of y (Var f + E[1/tau]) and "tau" E[tau].
    cp_student_t (Student-t noise of known (df, scale) = ``t_params``): {"mean": ...} of f and
    {"var": ...} of f, by the t's scale mixture: each sweep first draws every entry's precision
    weight lambda_e ~ Gamma((df + 1) / 2, rate (df + (y_e - f_e)^2 / scale^2) / 2), then the
    embeddings given the Gaussian noise of precision lambda_e / scale^2.
    """
    rng = np.random.default_rng(seed)
    y = np.asarray(y, dtype=float)
    s = 2.0 * y - 1.0
    n, R = len(y), rank
    U = [0.5 * rng.standard_normal((d, R)) for d in shape]
    tau = 1.0
    sums = {key: [np.zeros(n), np.zeros(len(eval_coords))] for key in ("f", "f2", "p")}
    sum_tau = sum_inv_tau = 0.0
    burn, kept = n_iter // 10, 0
    for it in range(n_iter):
        priors = _draw_priors(rng, U, prior, prior_var)
        if model == "cp_probit":
            f = _products(U, coords).sum(1)
            below = ndtr(-f)  # P(z < 0) under N(f, 1)
            u = rng.random(n)
            p = np.where(s > 0, below + u * (1.0 - below), u * below)
            target = f + ndtri(np.clip(p, 1e-300, 1.0 - 1e-16))
        else:
            target = y
        prec = np.full(n, tau)
        if model == "cp_student_t":
            df, scale = t_params
            resid = y - _products(U, coords).sum(1)
            prec = rng.gamma(0.5 * (df + 1.0), 2.0 / (df + resid * resid / scale**2)) / scale**2
        for k, d in enumerate(shape):
            mu, Lam = priors[k]
            H = _products(U, coords, skip=k)
            P = np.broadcast_to(Lam, (d, R, R)).copy()
            b = np.broadcast_to(Lam @ mu, (d, R)).copy()
            np.add.at(P, coords[:, k], prec[:, None, None] * H[:, :, None] * H[:, None, :])
            np.add.at(b, coords[:, k], (prec * target)[:, None] * H)
            L = np.linalg.cholesky(P)
            mean = np.linalg.solve(P, b[..., None])[..., 0]
            noise = np.linalg.solve(np.swapaxes(L, 1, 2), rng.standard_normal((d, R, 1)))[..., 0]
            U[k] = mean + noise
        if model == "cp_gaussian":
            resid = y - _products(U, coords).sum(1)
            tau = rng.gamma(A0 + 0.5 * n, 1.0 / (B0 + 0.5 * resid @ resid))
        if it >= burn:
            for j, C in enumerate((coords, eval_coords)):
                f = _products(U, C).sum(1)
                sums["f"][j] += f
                sums["f2"][j] += f * f
                sums["p"][j] += ndtr(f)
            sum_tau += tau
            sum_inv_tau += 1.0 / tau
            kept += 1
    if model == "cp_probit":
        return {"p": tuple(a / kept for a in sums["p"])}
    mean = tuple(a / kept for a in sums["f"])
    noise = 0.0 if model == "cp_student_t" else sum_inv_tau / kept
    var = tuple(f2 / kept - m * m + noise for f2, m in zip(sums["f2"], mean, strict=True))
    return {"mean": mean, "var": var, "tau": sum_tau / kept}


def _pool(chains):
    """Average of two chains' estimates, and their largest difference (the MC error)."""
    a, b = chains
    out = {"tau": (a["tau"] + b["tau"]) / 2} if "tau" in a else {}
    for key in ("p", "mean", "var"):
        if key in a:
            out[key] = tuple((u + v) / 2 for u, v in zip(a[key], b[key], strict=True))
    key, scale = ("p", 1.0) if "p" in a else ("mean", np.sqrt(np.concatenate(out["var"])))
    diff = np.concatenate([u - v for u, v in zip(a[key], b[key], strict=True)])
    return out, float(np.max(np.abs(diff) / scale))


def student_t_tensor(shape, rank, n_obs, seed):
    """A synthetic tensor with Student-t noise of T_PARAMS and OUTLIERS of its entries moved by
    +-OUTLIER (``make_cp_tensor``'s f; the noise and outliers from a generator of the seed)."""
    T, factors = make_cp_tensor(shape, rank, n_obs, noise_sd=0.0, seed=seed)
    rng = np.random.default_rng(200 + seed)
    df, scale = T_PARAMS
    values = T.values + scale * rng.standard_t(df, n_obs)
    out = rng.choice(n_obs, int(OUTLIERS * n_obs), replace=False)
    values[out] += rng.choice([-OUTLIER, OUTLIER], out.size)
    return type(T)(T.coords, values, T.shape), factors


def _compare(model, res, gold, coords, test):
    """The table cells of one fit against the gold."""
    if model == "cp_student_t":  # (f itself: the t's predictive of y has heavy tails)
        cells = []
        for j, c in enumerate((coords, test)):
            mean, var = res._f_moments(c)
            z = np.abs(mean - gold["mean"][j]) / np.sqrt(gold["var"][j])
            cells.append(f"{z.mean():.3f} ({np.median(np.sqrt(var / gold['var'][j])):.2f})")
        return f"{cells[0]} / {cells[1]}"
    if model == "cp_probit":
        err = [np.abs(res.predict(c) - g) for c, g in zip((coords, test), gold["p"], strict=True)]
        return f"{err[0].mean():.4f} / {err[1].mean():.4f}, {err[1].max():.3f}"
    cells = []
    for j, c in enumerate((coords, test)):
        mean, var = res.predict(c, return_var=True)
        z = np.abs(mean - gold["mean"][j]) / np.sqrt(gold["var"][j])
        ratio = np.sqrt(var / gold["var"][j])
        cells.append(f"{z.mean():.3f} ({np.median(ratio):.2f})")
    a, b = res.posterior.noise
    return f"{cells[0]} / {cells[1]}, {a / b / gold['tau']:.3f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iterations", type=int, default=60_000)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--models", nargs="+", default=["cp_probit", "cp_gaussian"], choices=list(FITS["fixed"]))
    ap.add_argument("--prior", default="fixed", choices=list(FITS), help="the prior sampled and fitted")
    ap.add_argument("--tag", default="", help="suffix of the results file name")
    args = ap.parse_args()
    fits = FITS[args.prior]
    tables = []
    for model in args.models:
        rows = []
        for name, shape, rank, n_obs in CASES:
            for seed in args.seeds:
                if model == "cp_student_t":
                    T, _ = student_t_tensor(shape, rank, n_obs, seed)
                else:
                    T, _ = make_cp_tensor(
                        shape, rank, n_obs, noise_sd=NOISE_SD, binary=model == "cp_probit", seed=seed,
                        factor_scale=1.2 if model == "cp_probit" else None,
                    )  # fmt: skip
                rng = np.random.default_rng(100 + seed)
                observed = np.zeros(int(np.prod(shape)), dtype=bool)
                observed[np.ravel_multi_index(T.coords.T, shape)] = True
                free = np.flatnonzero(~observed)
                test = np.stack(np.unravel_index(rng.choice(free, N_TEST, replace=False), shape), axis=1)
                t0 = time.perf_counter()
                problem = (model, T.coords, T.values, shape, rank, args.iterations)
                chains = [cp_gibbs(*problem, seed + 1000 * c, test, prior=args.prior) for c in range(2)]
                gibbs_s = time.perf_counter() - t0
                gold, mc = _pool(chains)
                cells = []
                for _, options in fits[model]:
                    # (the Gibbs gold samples the model on the values as they are; the Student-t
                    # with its known parameters)
                    kind = dict(model=model)
                    if model == "cp_student_t":
                        kind = dict(model="cp", likelihood=StudentT(df=T_PARAMS[0], scale=T_PARAMS[1]))
                    res = fastcep.fit(
                        T.coords, T.values, shape=shape, rank=rank, seed=seed, max_iter=2000, **kind,
                        **options, **({"standardize": "none"} if model == "cp_gaussian" else {}),
                    )  # fmt: skip
                    conv = "" if res.converged else ", not converged"
                    cells.append(f"{_compare(model, res, gold, T.coords, test)}, {res.n_iter}{conv}")
                rows.append(
                    f"| {name} {shape} R={rank} n={n_obs} | {seed} | {mc:.3f} | {gibbs_s:.0f} | "
                    + " | ".join(cells)
                    + " |"
                )
                print(model, rows[-1], flush=True)
        what = {
            "cp_probit": "mean |P(y = 1) - gold| train / test, max test, iterations",
            "cp_gaussian": "mean |mean - gold mean| / gold sd (median sd / gold sd) train / test, "
            "E[tau] / gold, iterations",
            "cp_student_t": "of f: mean |mean - gold mean| / gold sd (median sd / gold sd) train / test, "
            "iterations",
        }[model]
        head = {
            "cp_gaussian": f" (noise sd {NOISE_SD})",
            "cp_student_t": f" (df {T_PARAMS[0]:g}, scale {T_PARAMS[1]:g}, known; {OUTLIERS:.0%} of the "
            f"entries moved by +-{OUTLIER:g})",
        }.get(model, "")
        labels = [label for label, _ in fits[model]]
        tables += [
            f"## {model}{head}",
            "",
            f"Cells: {what}. MC error: the largest difference of the two chains"
            + (" (in gold sds)" if model != "cp_probit" else "")
            + ".",
            "",
            "| tensor | seed | MC error | Gibbs s | " + " | ".join(labels) + " |",
            "|---|---|---|---|" + "---|" * len(labels),
            *rows,
            "",
        ]
    lines = [
        *report_head("CP decomposition against a Gibbs sampler"),
        f"Command: `python -m bench.cp_gold --iterations {args.iterations} "
        f"--seeds {' '.join(map(str, args.seeds))} --models {' '.join(args.models)}"
        + (f" --prior {args.prior}" if args.prior != "fixed" else "")
        + (f" --tag={args.tag}" if args.tag else "")
        + "`; two chains of "
        f"{args.iterations} Gibbs iterations per tensor (burn-in a tenth); {N_TEST} unobserved test "
        f"entries; {PRIOR_TEXT[args.prior]}, `fastcep.fit` defaults otherwise (max_iter 2000)."
        + (
            " VMP is left out: it keeps the fixed prior (`fastcep.fit` refuses `prior=` with method='vmp')."
            if args.prior != "fixed"
            else ""
        ),
        "",
        *tables,
    ]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"cp-gold{args.tag}.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
