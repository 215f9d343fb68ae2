"""What a stream pass costs beyond its arithmetic (issue 19): DBLP, rank 8, batch 1,000, defaults.

    python -m bench.stream_overhead [--data-dir ../shared/data/dblp] [--rounds 3]

Builds the papers' DBLP training set into an HDF5 tensor file (``fastcep.data_tools.dblp``),
then, alternately in each round:

* one stream pass over the file (``fastcep.stream``, rank 8, batch 1,000, shuffled, defaults):
  its time, entries per second, and its entry updates (the sum over batches of inner iterations
  times the batch's entries, from ``trace.inner_iter``): microseconds per entry update;
* the batch engine on the whole training set in memory (``fastcep.fit``, rank 8, the stream's
  inner options: CEP-1, damping 1.0), 10 sweeps continued from a fitted state: the median sweep
  time over the entries, microseconds per entry update of the same kind.

Prints both and their ratio (goal: a pass at most 1.2 times the sweeps' time per entry update).
With ``--threads`` it times instead whole passes with the default threads, one thread and two
threads, alternately (run it beside a busy process to see the thread governor at work). With
``--engine`` it times instead what a batch costs before its sweeps, on the first 100 batches of
a shuffled pass (their layouts as the stream builds them): the median milliseconds to build a
batch engine (its store and scratch in the stream's kept buffers, ``BufferPool``, and its first
rebuild), and of one rebuild of the batch's objects with and without their moments
(``kernels.tensor.rebuild_full``), in each of ``--rounds`` rounds.
"""

import argparse
import pathlib
import tempfile
import time

import numpy as np

import fastcep
from fastcep.data_tools import build_dblp_training

ROOT = pathlib.Path(__file__).resolve().parents[1]
RANK = 8
BATCH = 1000


def stream_pass(path, seed):
    """Seconds, entries and entry updates of one shuffled pass."""
    t0 = time.perf_counter()
    res = fastcep.stream(path, model="cp_probit", rank=RANK, batch_size=BATCH, shuffle=True, seed=seed)
    secs = time.perf_counter() - t0
    n = res.state.rows_done
    sizes = np.full(res.n_iter, BATCH, dtype=np.float64)
    sizes[-1] = n - BATCH * (res.n_iter - 1)
    return secs, n, float(np.sum(res.trace.inner_iter * sizes))


def batch_sweep_per_entry(coords, values, shape, state, sweeps=10):
    """Median seconds of one batch-engine sweep, per entry."""
    kw = dict(model="cp_probit", shape=shape, rank=RANK, damping=1.0, tol=0.0, seed=0)
    res = fastcep.fit(coords, values, max_iter=sweeps, init_state=state, **kw)
    return float(np.median(np.diff(res.trace.elapsed))) / len(values)


def engine_costs(coords, values, shape, rounds):
    """Median ms per batch of building its engine, and of a rebuild with and without moments."""
    from fastcep.kernels import tensor as K
    from fastcep.tensor.engine import BufferPool, CPEngine
    from fastcep.tensor.layout import make_layout

    offsets = np.concatenate([[0], np.cumsum(shape)])
    order = np.random.default_rng(1).permutation(len(values))
    batches = []
    for lo in range(0, 100 * BATCH, BATCH):
        c = coords[order[lo : lo + BATCH]]
        local, glob = np.empty_like(c), []
        for k in range(len(shape)):
            u, inv = np.unique(c[:, k], return_inverse=True)
            local[:, k] = inv.reshape(-1)
            glob.append(offsets[k] + u)
        s = np.where(values[order[lo : lo + BATCH]] == 1, 1.0, -1.0)
        batches.append((make_layout(local, tuple(len(g) for g in glob)), s, sum(len(g) for g in glob)))
    pool, eye = BufferPool(), np.eye(RANK)

    def build(lay, s, n_obj):
        return CPEngine(
            lay, s, s, "cp_probit", "cep1", RANK, "full", "parallel", 1.0,
            prior_Lam=np.broadcast_to(eye, (n_obj, RANK, RANK)).copy(), prior_eta=np.zeros((n_obj, RANK)),
            a0=1.0, b0=1.0, probit_curvature="rank1", expect_under="cavity",
            init_means=np.full((n_obj, RANK), 0.1),
            init_covs=np.broadcast_to(0.01 * eye, (n_obj, RANK, RANK)).copy(), pool=pool,
        )  # fmt: skip

    for b in batches[:5]:
        build(*b)
    for r in range(rounds):
        times = {"engine": [], "rebuild with moments": [], "rebuild without": []}
        for b in batches:
            t0 = time.perf_counter()
            eng = build(*b)
            times["engine"].append(time.perf_counter() - t0)
            for name, moments in (("rebuild with moments", True), ("rebuild without", False)):
                t0 = time.perf_counter()
                K.rebuild_full(eng.problem, eng.store, eng.scratch, 0, eng.n_obj, moments)
                times[name].append(time.perf_counter() - t0)
        line = ", ".join(f"{k} {np.median(v) * 1e3:.3f} ms" for k, v in times.items())
        print(f"round {r + 1}, median per batch: {line}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data" / "dblp"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", action="store_true", help="time passes on default, 1 and 2 threads")
    ap.add_argument("--engine", action="store_true", help="time a batch engine's build and its rebuilds")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "dblp-train.h5"
        n = build_dblp_training(args.data_dir, path, seed=0)
        coords, values, shape = fastcep.read_tensor(path)
        print(f"training set: {n} entries, shape {shape}", flush=True)
        if args.engine:
            return engine_costs(coords, values, shape, args.rounds)
        fastcep.stream(path, model="cp_probit", rank=RANK, batch_size=BATCH, max_batches=2)  # compile
        kw = dict(model="cp_probit", shape=shape, rank=RANK, damping=1.0, seed=0)
        state = fastcep.fit(coords, values, max_iter=3, **kw).state  # compile; a typical state
        if args.threads:
            for r in range(args.rounds):
                line = []
                for threads in (None, 1, 2):
                    t0 = time.perf_counter()
                    fastcep.stream(
                        path, model="cp_probit", rank=RANK, batch_size=BATCH, shuffle=True, seed=r + 1,
                        n_threads=threads,
                    )  # fmt: skip
                    line.append(f"{threads or 'default'} {time.perf_counter() - t0:.2f} s")
                print(f"round {r + 1}: " + ", ".join(line), flush=True)
            return
        rows = []
        for r in range(args.rounds):
            secs, m, updates = stream_pass(path, seed=r + 1)
            per_stream = secs / updates
            per_batch = batch_sweep_per_entry(coords, values, shape, state)
            rows.append((secs, m / secs, per_stream, per_batch))
            print(
                f"round {r + 1}: pass {secs:.2f} s, {m / secs:,.0f} entries/s, {per_stream * 1e6:.2f} us "
                f"per entry update; batch sweeps {per_batch * 1e6:.2f} us; "
                f"ratio {per_stream / per_batch:.2f}",
                flush=True,
            )
        a = np.array(rows)
        med = np.median(a, axis=0)
        print(
            f"median over {args.rounds} rounds: pass {med[0]:.2f} s (range {a[:, 0].min():.2f}-"
            f"{a[:, 0].max():.2f}), {med[1]:,.0f} entries/s; stream {med[2] * 1e6:.2f} us, batch "
            f"{med[3] * 1e6:.2f} us per entry update; ratio {np.median(a[:, 2] / a[:, 3]):.2f}"
        )


if __name__ == "__main__":
    main()
