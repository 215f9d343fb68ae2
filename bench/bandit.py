"""A simulated contextual bandit (issue 39): the regret of Thompson sampling with fastcep's posterior
draws against greedy use of its posterior mean, both learning online (``RegressionResult.update``,
one row a round).

``python -m bench.bandit --seeds 10 --rounds 2000 [--fixed-arms]``: each round offers ``--arms``
arms, each a context x ~ N(0, (scale^2 / d) I) in R^d, drawn afresh each round (or once, with
``--fixed-arms``: a linear bandit whose arms stay); pulling arm x pays 1 with probability Phi(x.w), w ~ N(0,
I) drawn once per seed (a probit model, no intercept: the model the policies fit). A policy picks
an arm, sees its reward and absorbs that one row. Thompson sampling picks the arm whose
probability under one posterior draw (``predict_proba(X, draws=1)``) is largest; greedy picks the
arm of largest x.mean (the posterior mean's probability). Regret: sum over rounds of the best
arm's probability minus the chosen one's. Prints the mean cumulative regret (and its standard
error over seeds) at a few rounds, as Markdown.
"""

import argparse
import time
import warnings

import numpy as np
from scipy.special import ndtr

from fastcep import _options as O
from fastcep.glm.result import RegressionResult

#: the stream's prior and stop rule, the fit's defaults but no intercept (the simulated rewards
#: have none)
OPTIONS = dict(O.defaults("regression", "cep1"), fit_intercept=False, n_threads=1)


def run(policy, seed, rounds, arms, d, scale, fixed=False):
    """Cumulative regret (rounds,) of ``policy`` ("thompson" or "greedy") on seed's bandit
    (``fixed``: the same arms every round, else fresh contexts)."""
    world = np.random.default_rng([seed, 0])  # (the same bandit for both policies)
    w = world.standard_normal(d)
    luck = np.random.default_rng([seed, 1])  # (rewards: the same uniforms for both policies)
    draws = np.random.default_rng([seed, 2])
    res = RegressionResult.prior("probit", "cep1", d, OPTIONS)
    regret = np.empty(rounds)
    total = 0.0
    arms_of_seed = world.standard_normal((arms, d)) * (scale / np.sqrt(d))
    for t in range(rounds):
        X = arms_of_seed if fixed else world.standard_normal((arms, d)) * (scale / np.sqrt(d))
        p = ndtr(X @ w)
        if policy == "thompson":
            k = int(np.argmax(res.predict_proba(X, draws=1, seed=draws)[0]))
        else:
            k = int(np.argmax(X @ res.posterior.mean))
        reward = float(luck.random() < p[k])
        res.update(X[k : k + 1], np.array([reward]))
        total += p.max() - p[k]
        regret[t] = total
    return regret


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=2000)
    ap.add_argument("--arms", type=int, default=10)
    ap.add_argument("--d", type=int, default=10)
    ap.add_argument("--scale", type=float, default=3.0, help="sd of x.w over arms (default %(default)s)")
    ap.add_argument("--fixed-arms", action="store_true", help="the same arms every round (no fresh contexts)")
    args = ap.parse_args(argv)
    marks = sorted({m for m in (100, 500, 1000, 2000, 5000) if m < args.rounds} | {args.rounds})
    rows = {}
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for policy in ("thompson", "greedy"):
            runs = [
                run(policy, s, args.rounds, args.arms, args.d, args.scale, args.fixed_arms)
                for s in range(args.seeds)
            ]
            rows[policy] = np.array(runs)
    secs = time.perf_counter() - t0
    print(
        f"{args.seeds} seeds, {args.arms} {'fixed arms' if args.fixed_arms else 'fresh contexts a round'}, "
        f"d = {args.d}, sd of x.w {args.scale}, probit rewards; "
        f"{secs:.0f} s\n"
    )
    print("| policy | " + " | ".join(f"regret at {m}" for m in marks) + " |")
    print("|---|" + "---|" * len(marks))
    for policy, runs in rows.items():
        cells = []
        for m in marks:
            at = runs[:, m - 1]
            cells.append(f"{at.mean():.1f} ± {at.std(ddof=1) / np.sqrt(len(at)):.1f}")
        print(f"| {policy} | " + " | ".join(cells) + " |")
    wins = int(np.sum(rows["thompson"][:, -1] < rows["greedy"][:, -1]))
    print(f"\nThompson sampling's final regret below greedy's in {wins} of {args.seeds} seeds.")
    updates = 2 * args.seeds * args.rounds
    said = sorted({str(w.message)[:60] for w in caught})
    print(f"{len(caught)} of {updates} one-row updates warned: {said}")


if __name__ == "__main__":
    main()
