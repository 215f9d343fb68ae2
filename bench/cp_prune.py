"""Pruning the switched-off rank columns of a generous-rank CP fit (issue 37, a probe).

    python -m bench.cp_prune [--folds 1 3] [--rank 20] [--prune-at 50] [--max-iter 500]

Alog (cp_gaussian, defaults, seed 0): a fit at ``--rank`` for ``--prune-at`` iterations; the rank
columns the learned prior has switched off (``tensor.hyper.active_columns``) are then dropped
from the state (each message's and the hyper-posterior's rows and columns of them: the dead
columns conditioned on 0), and the fit goes on from that state at the smaller rank
(``init_state``) for the rest of ``--max-iter``. Prints, per fold, the columns kept, the test
RMSE, the iterations and the wall time of both parts together.
"""

import argparse
import time
import warnings

import numpy as np

import fastcep
from fastcep.data_tools import load_paper_fold
from fastcep.tensor import hyper as H
from fastcep.tensor.result import CPState

from .defaults_check import SHARED


def pruned_state(state, keep, rank):
    """``state`` (a CPState of full covariances and a Wishart hyper-posterior) without the rank
    columns not in ``keep`` (indices)."""
    h = state.hyper
    hyper = h._replace(
        mean=h.mean[:, keep].copy(), nu=h.nu - rank + keep.size, W_inv=h.W_inv[:, keep][:, :, keep].copy()
    )
    Lam = state.Lam[:, :, keep][:, :, :, keep].copy()
    return CPState(Lam, state.eta[:, :, keep].copy(), state.alpha, state.beta, hyper, state.likelihood)


def run(fold, rank, prune_at, max_iter):
    train, test = load_paper_fold("alog", fold, SHARED)
    kw = dict(model="cp_gaussian", shape=train.shape, seed=0)
    start = time.perf_counter()
    first = fastcep.fit(train.coords, train.values, rank=rank, max_iter=prune_at, **kw)
    offsets = np.concatenate([[0], np.cumsum(train.shape)])
    keep = np.flatnonzero(H.active_columns(np.concatenate(first.posterior.means), offsets))
    state = pruned_state(first.state, keep, rank)
    res = fastcep.fit(
        train.coords, train.values, rank=keep.size, max_iter=max_iter - prune_at, init_state=state, **kw
    )
    seconds = time.perf_counter() - start
    print(
        f"| {fold} | {rank} -> {keep.size} (kept at the end {res.effective_rank}) | "
        f"{res.rmse(test.coords, test.values):.4f} | {prune_at} + {res.n_iter} ({res.stop_reason}) | "
        f"{seconds:.1f} |",
        flush=True,
    )


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--folds", type=int, nargs="+", default=[1, 3])
    ap.add_argument("--rank", type=int, default=20)
    ap.add_argument("--prune-at", type=int, default=50)
    ap.add_argument("--max-iter", type=int, default=500)
    args = ap.parse_args(argv)
    if not (SHARED / "alog").is_dir():
        print(f"skipped: no data in {SHARED}")
        return
    warnings.simplefilter("ignore", fastcep.ConvergenceWarning)
    print("| fold | rank | test RMSE | iterations | seconds |")
    print("|---|---|---|---|---|")
    for fold in args.folds:
        run(fold, args.rank, args.prune_at, args.max_iter)


if __name__ == "__main__":
    main()
