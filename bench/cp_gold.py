"""cp_probit against a gold standard: predictive probabilities of CEP-1 ("full" and "rank1"
curvature) beside a long Gibbs sampler's, on small synthetic binary tensors.

    python -m bench.cp_gold [--iterations 30000] [--seeds 0 1 2]

The sampler is Albert and Chib's: latent z_e ~ N(f_e, 1) truncated to the sign of the label,
then each mode's embeddings from their Gaussian conditional (a Bayesian linear regression of z
on the Hadamard product of the other modes), prior N(0, I) as in ``fastcep.fit``'s default.
The gold P(y = 1) of an entry is the average of Phi(f) over the draws after burn-in (a tenth),
pooled from two chains with different seeds; the largest difference between the two chains is
printed as its Monte Carlo error. Sign and permutation symmetries of the factors leave f, and
so these probabilities, unchanged. Writes bench/results/cp-gold.md.
"""

import argparse
import time

import numpy as np
from scipy.special import ndtr, ndtri

import fastcep
from fastcep.data_tools import make_cp_tensor

from .gold import RESULTS
from .regression_quality import machine

#: (name, shape, rank, observed entries): a dense and a sparse case
CASES = (("dense", (10, 10, 10), 2, 500), ("sparse", (12, 12, 12), 3, 250))
N_TEST = 200


def _products(U, coords, skip=None):
    H = np.ones((len(coords), U[0].shape[1]))
    for k, Uk in enumerate(U):
        if k != skip:
            H *= Uk[coords[:, k]]
    return H


def cp_probit_gibbs(coords, y, shape, rank, n_iter, seed, eval_coords, prior_var=1.0):
    """Mean of Phi(f) over the Gibbs draws after burn-in (n_iter // 10) at ``coords`` and
    ``eval_coords``; y in {0, 1}."""
    rng = np.random.default_rng(seed)
    s = 2.0 * np.asarray(y) - 1.0
    n, R = len(s), rank
    U = [0.5 * rng.standard_normal((d, R)) for d in shape]
    eye = np.eye(R) / prior_var
    acc = [np.zeros(n), np.zeros(len(eval_coords))]
    burn, kept = n_iter // 10, 0
    for it in range(n_iter):
        f = _products(U, coords).sum(1)
        below = ndtr(-f)  # P(z < 0) under N(f, 1)
        u = rng.random(n)
        p = np.where(s > 0, below + u * (1.0 - below), u * below)
        z = f + ndtri(np.clip(p, 1e-300, 1.0 - 1e-16))
        for k, d in enumerate(shape):
            H = _products(U, coords, skip=k)
            P = np.broadcast_to(eye, (d, R, R)).copy()
            b = np.zeros((d, R))
            np.add.at(P, coords[:, k], H[:, :, None] * H[:, None, :])
            np.add.at(b, coords[:, k], H * z[:, None])
            L = np.linalg.cholesky(P)
            mean = np.linalg.solve(P, b[..., None])[..., 0]
            noise = np.linalg.solve(np.swapaxes(L, 1, 2), rng.standard_normal((d, R, 1)))[..., 0]
            U[k] = mean + noise
        if it >= burn:
            acc[0] += ndtr(_products(U, coords).sum(1))
            acc[1] += ndtr(_products(U, eval_coords).sum(1))
            kept += 1
    return acc[0] / kept, acc[1] / kept


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iterations", type=int, default=30_000)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = ap.parse_args()
    rows = []
    for name, shape, rank, n_obs in CASES:
        for seed in args.seeds:
            T, _ = make_cp_tensor(shape, rank, n_obs, binary=True, seed=seed, factor_scale=1.2)
            rng = np.random.default_rng(100 + seed)
            observed = np.zeros(int(np.prod(shape)), dtype=bool)
            observed[np.ravel_multi_index(T.coords.T, shape)] = True
            free = np.flatnonzero(~observed)
            test = np.stack(np.unravel_index(rng.choice(free, N_TEST, replace=False), shape), axis=1)
            t0 = time.perf_counter()
            chains = [
                cp_probit_gibbs(T.coords, T.values, shape, rank, args.iterations, seed + 1000 * c, test)
                for c in range(2)
            ]
            gibbs_s = time.perf_counter() - t0
            gold = [(a + b) / 2 for a, b in zip(*chains, strict=True)]
            mc = max(float(np.abs(a - b).max()) for a, b in zip(*chains, strict=True))
            cells = []
            for curvature in ("full", "rank1"):
                res = fastcep.fit(
                    T.coords, T.values, model="cp_probit", shape=shape, rank=rank, seed=seed, max_iter=2000,
                    probit_curvature=curvature,
                )  # fmt: skip
                err = [np.abs(res.predict(c) - g) for c, g in zip((T.coords, test), gold, strict=True)]
                cells.append(
                    f"{err[0].mean():.4f} | {err[1].mean():.4f} | {err[1].max():.3f} | "
                    f"{res.n_iter}{'' if res.converged else ' (not converged)'}"
                )
            rows.append(
                f"| {name} {shape} R={rank} n={n_obs} | {seed} | {mc:.3f} | {gibbs_s:.0f} | "
                + " | ".join(cells)
                + " |"
            )
            print(rows[-1], flush=True)
    lines = [
        "# cp_probit CEP-1 against a Gibbs sampler",
        "",
        f"Machine: {machine()}",
        "",
        f"Command: `python -m bench.cp_gold --iterations {args.iterations} "
        f"--seeds {' '.join(map(str, args.seeds))}`; two chains of {args.iterations} Gibbs iterations "
        f"per tensor (burn-in a tenth); {N_TEST} test entries (unobserved); error = |P(y = 1) of the "
        "fit - the Gibbs average of Phi(f)|; prior N(0, I), `fastcep.fit` defaults otherwise "
        "(max_iter 2000).",
        "",
        "| tensor | seed | MC error (max diff of the 2 chains) | Gibbs s "
        "| full: mean err train | test | max test | iterations "
        "| rank1: mean err train | test | max test | iterations |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
        *rows,
    ]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "cp-gold.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
