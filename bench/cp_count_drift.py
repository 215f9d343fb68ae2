"""Why a count CP fit does not converge on Alog (issue 22): the figures along one fit.

    python -m bench.cp_count_drift [--fold 1] [--rank 3] [--max-iter 300]
                                   [--prior wishart|ard|fixed] [--hold-prior-after N]
                                   [--dispersion R] [--hold-dispersion-after N] [--gold NPZ]
                                   [--hyper-from-counted] [--moves FROM TO]

A cp_negbin fit on Alog's counts (``data_tools.tensors.load_alog_counts``, seed 0, defaults but
``--prior`` and ``max_iter``). At iterations 10, 20, 30, 40, 50, 60, 75 and every 25th: the
change (the stopping measure), the mean log predictive density of the training and of the test
entries, the test RMSE on the log scale of the predictive median (``bench.cp_counts``) and of
the predictive mean of log(1 + y) (``scale="log1p"``), overall and apart on the zero slices (the
test entries of objects whose training counts are all 0) and the others, the learned dispersion,
the lowest predictive mean and the largest predictive variance of f over the test entries.
``--hold-prior-after N`` holds the learned prior after its update of iteration N (a diagnostic:
the engine's ``update_prior`` is skipped from iteration N + 1). ``--dispersion R`` holds the
negative binomial's dispersion at R (``model="cp", likelihood=NegativeBinomial(R)``, as
``bench.cp_count_gold``'s chain) instead of learning it; ``--hold-dispersion-after N`` learns it
for N updates and holds it then (a diagnostic, as the held prior). ``--gold NPZ`` (that bench's
.npz of the same fold) adds the test entries' distance to the gold
(``cp_count_gold.against_gold``): zero slices and the others apart. ``--hyper-from-counted``
learns the prior from the objects with a nonzero training count only (``hyper_from_counted``, a
diagnostic). ``--moves FROM TO`` adds, at every iteration from FROM to TO, which training
entries moved (``moves``): the RMS change of their predictive means of f since the iteration
before, over all entries and relative to the RMS of f (so the three classes' squares add up to
the stopping measure's), for the zero slices' entries, the other zero counts and the nonzero
counts apart, with each class's net direction (the mean sign of its moves). Rows are printed as
JSON lines and saved to
bench/results/cp-count-drift-f{fold}-r{rank}-{prior}{-holdN}{-nbR}{-holdrN}.json.
"""

import argparse
import pathlib
import time
import warnings

import numpy as np

import fastcep
from fastcep.glm.learn import LikelihoodLearner
from fastcep.likelihoods import NegativeBinomial
from fastcep.tensor import engine as E
from fastcep.tensor import likelihoods as CPL

from .cp_count_gold import against_gold, zero_slice_entries
from .cp_counts import SHARED, load_alog_counts, negbin_log1p_median, rmse_log, strict_json

RESULTS = pathlib.Path(__file__).resolve().parent / "results"
CHECKPOINTS = (10, 20, 30, 40, 50, 60, 75)


def hold_prior_after(iteration):
    """Skip the engine's hyper-layer updates after the one of ``iteration`` (the first is at
    iteration 2)."""
    learn = E.CPEngine.update_prior
    calls = [0]

    def held(engine):
        calls[0] += 1
        if calls[0] < iteration:
            learn(engine)

    E.CPEngine.update_prior = held


def hyper_from_counted(train):
    """Learn the prior from the objects with a nonzero training count only (a diagnostic: the
    engine's hyper-layer update sums the moments of those objects; the zero slices' objects still
    take the learned prior, but cannot move it)."""
    from fastcep.tensor import hyper as H

    counted = np.concatenate(
        [
            np.bincount(train.coords[:, k], weights=train.values > 0, minlength=d) > 0
            for k, d in enumerate(train.shape)
        ]
    )

    def learn(engine):
        offsets = engine.lay.offsets
        keep = [
            np.flatnonzero(counted[offsets[k] : offsets[k + 1]]) + offsets[k] for k in range(len(offsets) - 1)
        ]
        counts = np.array([len(idx) for idx in keep], dtype=np.float64)
        sum_M = np.stack([engine.M[idx].sum(axis=0) for idx in keep])
        sum_E2 = np.stack([engine.E2[idx].sum(axis=0) for idx in keep])
        engine.hyper = H.update_from_sums(engine.hyper, counts, sum_M, sum_E2)
        H.fill_prior(
            engine.hyper, offsets, engine.covariance, engine.problem.prior_Lam, engine.problem.prior_eta
        )

    E.CPEngine.update_prior = learn


def hold_dispersion_after(updates):
    """Hold the learned dispersion after its ``updates``-th update (the later ones return a change
    of 0 and leave it)."""
    learn = LikelihoodLearner.update

    def held(learner, *args):
        return learn(learner, *args) if learner.updates < updates else 0.0

    LikelihoodLearner.update = held


def moving_classes(train):
    """The training entries by class: the zero slices' (objects whose training counts are all 0),
    the other zero counts, the nonzero counts."""
    zero_slices = zero_slice_entries(train, train)
    nonzero = train.values > 0
    return {"zero_slices": zero_slices, "other_zeros": ~nonzero & ~zero_slices, "nonzero": nonzero}


def moved(f, f_old, classes):
    """Each class's share of the RMS change of f (relative to the RMS of f) and its net direction."""
    d = f - f_old
    scale = len(f) * np.mean(f**2)
    return {
        name: dict(rms=float(np.sqrt(np.sum(d[m] ** 2) / scale)), net=float(np.mean(np.sign(d[m]))))
        for name, m in classes.items()
    }


def curve(
    fold, rank, max_iter, prior, hold_after, dispersion=None, gold=None, hold_r_after=None, counted=False,
    moves=None,
):  # fmt: skip
    train, test = load_alog_counts(fold, SHARED)
    if counted:
        hyper_from_counted(train)
    zero = zero_slice_entries(train, test)
    if gold is not None and not np.array_equal(gold["zero"], zero):
        raise SystemExit(
            f"--gold: its test entries ({len(gold['zero'])}, zero slices marked) are not fold {fold}'s "
            f"({len(test.values)}): a gold of another fold?"
        )
    if hold_after is not None:
        hold_prior_after(hold_after)
    if hold_r_after is not None:
        hold_dispersion_after(hold_r_after)
    model = dict(model="cp_negbin")
    if dispersion is not None:
        model = dict(model="cp", likelihood=NegativeBinomial(dispersion=dispersion))
    rows, spent = [], [0.0]
    start = time.perf_counter()
    classes = moving_classes(train)
    last = [None]

    def measure(info):
        if moves is not None and moves[0] - 1 <= info.iteration <= moves[1]:
            t0 = time.perf_counter()
            f = info.result._f_moments(train.coords)[0]
            if last[0] is not None:
                row = dict(iteration=info.iteration, change=info.change, moves=moved(f, last[0], classes))
                rows.append(row)
                print(strict_json(row), flush=True)
            last[0] = f
            spent[0] += time.perf_counter() - t0
        if info.iteration not in CHECKPOINTS and info.iteration % 25:
            return
        t0 = time.perf_counter()
        res = info.result
        mean, var = res._f_moments(test.coords)
        median = negbin_log1p_median(res, mean, var)
        log_mean = res.likelihood.log1p_moments(mean, var)[0]  # (res.predict(..., scale="log1p")'s)
        lpd = CPL.log_predictive(res.likelihood.kernel(), test.values, mean, var)  # (res.log_likelihood's)
        row = dict(
            iteration=info.iteration, change=info.change, seconds=t0 - start - spent[0],
            train_lpd=res.log_likelihood(train.coords, train.values),
            test_lpd=float(np.mean(lpd)),
            rmse_log_median=rmse_log(test.values, median),
            rmse_log_mean=rmse_log(test.values, log_mean),
            rmse_log_zero_slices=dict(
                median=rmse_log(test.values[zero], median[zero]),
                mean=rmse_log(test.values[zero], log_mean[zero]),
            ),
            rmse_log_others=dict(
                median=rmse_log(test.values[~zero], median[~zero]),
                mean=rmse_log(test.values[~zero], log_mean[~zero]),
            ),
            dispersion=float(res.likelihood.dispersion), lowest_mean=float(mean.min()),
            largest_var=float(var.max()),
        )  # fmt: skip
        if gold is not None:
            row["gold"] = against_gold(gold, mean, var, lpd)
        rows.append(row)
        print(strict_json(row), flush=True)
        spent[0] += time.perf_counter() - t0

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fastcep.ConvergenceWarning)
        fastcep.fit(
            train.coords, train.values, shape=train.shape, rank=rank, seed=0, max_iter=max_iter, prior=prior,
            callback=measure, **model,
        )  # fmt: skip
    tag = f"-f{fold}-r{rank}-{prior}" + ("" if hold_after is None else f"-hold{hold_after}")
    tag += "" if dispersion is None else f"-nb{dispersion:g}"
    tag += "" if hold_r_after is None else f"-holdr{hold_r_after}"
    tag += "-counted" if counted else ""
    (RESULTS / f"cp-count-drift{tag}.json").write_text(strict_json(rows, indent=1))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fold", type=int, default=1)
    ap.add_argument("--rank", type=int, default=3)
    ap.add_argument("--max-iter", type=int, default=300)
    ap.add_argument("--prior", default="wishart", choices=("wishart", "ard", "fixed"))
    ap.add_argument("--hold-prior-after", type=int, default=None)
    ap.add_argument("--dispersion", type=float, default=None)
    ap.add_argument("--gold", type=pathlib.Path, default=None)
    ap.add_argument("--hold-dispersion-after", type=int, default=None)
    ap.add_argument("--hyper-from-counted", action="store_true", help="see hyper_from_counted")
    ap.add_argument("--moves", type=int, nargs=2, default=None, metavar=("FROM", "TO"))
    args = ap.parse_args(argv)
    if not (SHARED / "alog").is_dir():
        print(f"skipped: no data in {SHARED}")
        return
    RESULTS.mkdir(exist_ok=True)
    gold = None if args.gold is None else np.load(args.gold)
    curve(
        args.fold, args.rank, args.max_iter, args.prior, args.hold_prior_after, args.dispersion, gold,
        args.hold_dispersion_after, args.hyper_from_counted, args.moves,
    )  # fmt: skip


if __name__ == "__main__":
    main()
