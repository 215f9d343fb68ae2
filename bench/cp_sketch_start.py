"""The start a cluster can compute: ``init="sketch"`` against ``init="svd"`` (Alog and Enron).

    python -m bench.cp_sketch_start [--datasets alog enron] [--folds 1 2 3 4 5] [--ranks 3 8]
        [--rounds 3]

Each fit takes the defaults but ``init`` (and ``seed=0``): the SVD of the unfoldings, whose Gram
matrix pairs the entries of one column, or the hashed sketch with ``--rounds`` rounds of subspace
iteration (``fastcep.tensor.init.sketch_init``; a pass over the entries each, a map and a reduce
a cluster runs where the entries are read). Prints a row per fit: the test RMSE (Alog) or AUC
(Enron), the iterations and their stop reason, the seconds of the start alone and of the fit.
``--rounds`` other than the default patches ``fastcep.tensor.engine.SKETCH_ROUNDS`` (a probe).
"""

import argparse
import time
import warnings

import numpy as np

import fastcep
import fastcep.tensor.engine as E
from fastcep.data_tools import load_paper_fold

from .cp_defaults import MODELS
from .defaults_check import SHARED


def start_seconds(train, init, rank):
    """The seconds of the start alone (``initial_means`` on the values as the fit sees them)."""
    rng = np.random.default_rng(0)
    y = train.values.astype(np.float64)
    start = time.perf_counter()
    E.initial_means(train.coords, y, train.shape, rank, init, 1.0, None, rng)
    return time.perf_counter() - start


def run(name, fold, rank, init):
    train, test = load_paper_fold(name, fold, SHARED)
    start = time.perf_counter()
    res = fastcep.fit(
        train.coords, train.values, model=MODELS[name], rank=rank, shape=train.shape, init=init, seed=0
    )
    seconds = time.perf_counter() - start
    metric = res.rmse(test.coords, test.values) if name == "alog" else res.auc(test.coords, test.values)
    print(
        f"| {name} | {fold} | {rank} | {init} | {metric:.4f} | {res.n_iter} ({res.stop_reason}) | "
        f"{start_seconds(train, init, rank):.2f} | {seconds:.1f} |",
        flush=True,
    )
    return metric


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", nargs="+", default=["alog", "enron"], choices=sorted(MODELS))
    ap.add_argument("--folds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    ap.add_argument("--ranks", type=int, nargs="+", default=[3, 8])
    ap.add_argument("--rounds", type=int, default=E.SKETCH_ROUNDS)
    args = ap.parse_args(argv)
    if not all((SHARED / name).is_dir() for name in args.datasets):
        print(f"skipped: no data in {SHARED}")
        return
    E.SKETCH_ROUNDS = args.rounds
    warnings.simplefilter("ignore", fastcep.ConvergenceWarning)
    print("| data | fold | rank | init | test RMSE / AUC | iterations | start (s) | fit (s) |")
    print("|---|---|---|---|---|---|---|---|")
    means = {}
    for name in args.datasets:
        for rank in args.ranks:
            for init in ("svd", "sketch"):
                scores = [run(name, fold, rank, init) for fold in args.folds]
                means[(name, rank, init)] = float(np.mean(scores))
    for (name, rank, init), m in means.items():
        print(f"mean over folds {args.folds}: {name} rank {rank} {init}: {m:.4f}")


if __name__ == "__main__":
    main()
