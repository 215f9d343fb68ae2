"""CP decomposition against a gold standard: the predictions of CEP-1 (and of VMP, the paper's
baseline, in the same run) beside a long Gibbs sampler's, on small synthetic tensors.

    python -m bench.cp_gold [--iterations 60000] [--seeds 0 1 2] [--models cp_probit cp_gaussian]
                            [--tag SUFFIX]

The sampler alternates the modes, drawing each mode's embeddings from their Gaussian
conditional (a Bayesian linear regression on the Hadamard product of the other modes; prior
N(0, I) as in ``fastcep.fit``'s default). cp_gaussian also draws the noise precision tau from
its Gamma conditional (prior Gamma(1e-3, 1e-3), the default); cp_probit draws Albert and
Chib's latent z_e ~ N(f_e, 1), truncated to the sign of the label. Two chains with different
seeds, burn-in a tenth of the iterations; the largest difference between the two chains'
estimates is printed as the Monte Carlo error. Sign and permutation symmetries of the factors
leave f, and so every compared quantity, unchanged.

Compared, on the observed ("train") entries and on 200 unobserved ("test") ones:
cp_probit P(y = 1) (gold: the average of Phi(f)); cp_gaussian the predictive mean of y in units
of the gold predictive sd, the predictive sd (ratio to the gold's) and E[tau].
Writes bench/results/cp-gold{SUFFIX}.md.
"""

import argparse
import time

import numpy as np
from scipy.special import ndtr, ndtri

import fastcep
from fastcep.data_tools import make_cp_tensor

from .gold import RESULTS
from .regression_quality import report_head

#: (name, shape, rank, observed entries): a dense and a sparse case
CASES = (("dense", (10, 10, 10), 2, 500), ("sparse", (12, 12, 12), 3, 250))
N_TEST = 200
NOISE_SD = 0.3  # cp_gaussian
A0 = B0 = 1e-3  # the default Gamma prior of tau
#: the fits compared: (label, fastcep.fit options)
FITS = {
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
}


def _products(U, coords, skip=None):
    H = np.ones((len(coords), U[0].shape[1]))
    for k, Uk in enumerate(U):
        if k != skip:
            H *= Uk[coords[:, k]]
    return H


def cp_gibbs(model, coords, y, shape, rank, n_iter, seed, eval_coords, prior_var=1.0):
    """Gibbs averages after burn-in (n_iter // 10), at ``coords`` and ``eval_coords``.

    cp_probit (y in {0, 1}): {"p": (train, test)} the mean of Phi(f). cp_gaussian:
    {"mean": (train, test)} of f, {"var": (train, test)} of y (Var f + E[1/tau]) and "tau" E[tau].
    """
    rng = np.random.default_rng(seed)
    y = np.asarray(y, dtype=float)
    s = 2.0 * y - 1.0
    n, R = len(y), rank
    U = [0.5 * rng.standard_normal((d, R)) for d in shape]
    eye = np.eye(R) / prior_var
    tau = 1.0
    sums = {key: [np.zeros(n), np.zeros(len(eval_coords))] for key in ("f", "f2", "p")}
    sum_tau = sum_inv_tau = 0.0
    burn, kept = n_iter // 10, 0
    for it in range(n_iter):
        if model == "cp_probit":
            f = _products(U, coords).sum(1)
            below = ndtr(-f)  # P(z < 0) under N(f, 1)
            u = rng.random(n)
            p = np.where(s > 0, below + u * (1.0 - below), u * below)
            target = f + ndtri(np.clip(p, 1e-300, 1.0 - 1e-16))
        else:
            target = y
        for k, d in enumerate(shape):
            H = _products(U, coords, skip=k)
            P = np.broadcast_to(eye, (d, R, R)).copy()
            b = np.zeros((d, R))
            np.add.at(P, coords[:, k], tau * H[:, :, None] * H[:, None, :])
            np.add.at(b, coords[:, k], tau * H * target[:, None])
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
    var = tuple(f2 / kept - m * m + sum_inv_tau / kept for f2, m in zip(sums["f2"], mean, strict=True))
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


def _compare(model, res, gold, coords, test):
    """The table cells of one fit against the gold."""
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
    ap.add_argument("--models", nargs="+", default=["cp_probit", "cp_gaussian"], choices=list(FITS))
    ap.add_argument("--tag", default="", help="suffix of the results file name")
    args = ap.parse_args()
    tables = []
    for model in args.models:
        rows = []
        for name, shape, rank, n_obs in CASES:
            for seed in args.seeds:
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
                chains = [
                    cp_gibbs(model, T.coords, T.values, shape, rank, args.iterations, seed + 1000 * c, test)
                    for c in range(2)
                ]
                gibbs_s = time.perf_counter() - t0
                gold, mc = _pool(chains)
                cells = []
                for _, options in FITS[model]:
                    # (the Gibbs gold samples the model on the values as they are)
                    res = fastcep.fit(
                        T.coords, T.values, model=model, shape=shape, rank=rank, seed=seed, max_iter=2000,
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
        what = (
            "mean |P(y = 1) - gold| train / test, max test, iterations"
            if model == "cp_probit"
            else "mean |mean - gold mean| / gold sd (median sd / gold sd) train / test, E[tau] / gold, "
            "iterations"
        )
        labels = [label for label, _ in FITS[model]]
        tables += [
            f"## {model}" + (f" (noise sd {NOISE_SD})" if model == "cp_gaussian" else ""),
            "",
            f"Cells: {what}. MC error: the largest difference of the two chains"
            + (" (in gold sds)" if model == "cp_gaussian" else "")
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
        + (f" --tag={args.tag}" if args.tag else "")
        + "`; two chains of "
        f"{args.iterations} Gibbs iterations per tensor (burn-in a tenth); {N_TEST} unobserved test "
        "entries; prior N(0, I), `fastcep.fit` defaults otherwise (max_iter 2000).",
        "",
        *tables,
    ]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"cp-gold{args.tag}.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
