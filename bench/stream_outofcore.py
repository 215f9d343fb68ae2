"""Out-of-core streaming (issue 4): a generated binary tensor streamed from HDF5 at rank 8.

    python -m bench.stream_outofcore --entries 10000000 [--shape 100000,1000,100000]
        [--batch-size 50000] [--max-iter N] [--file /tmp/ooc.h5] [--max-seconds S]
        [--compare-in-memory [--compare-entries 2000000] [--repeats 5]]

Writes (once; reused if present) a binary tensor with a rank-8 probit model and uniformly drawn
coordinates into an HDF5 file, block by block, then streams it with ``fastcep.stream`` while a
thread samples the resident memory (/proc/self/statm). Reports entries per second, the resident
memory along the stream, and with ``--compare-in-memory`` the slowdown of reading from the file:
the first ``--compare-entries`` entries streamed from the file and, as arrays, from memory (the
same batches in the same order), ``--repeats`` pairs, alternating which runs first (the median
ratio, robust to the drifts of a shared machine). Appends a line to bench/results/stream-ooc.md.
"""

import argparse
import os
import threading
import time

import numpy as np
from scipy.special import ndtr

import fastcep
from fastcep.io import TensorWriter

from .gold import RESULTS
from .regression_quality import machine

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


class Sampler(threading.Thread):
    def __init__(self, every=0.2):
        super().__init__(daemon=True)
        self.every, self.samples, self.stop = every, [], threading.Event()

    def run(self):
        while not self.stop.is_set():
            self.samples.append((time.perf_counter(), rss()))
            time.sleep(self.every)


def generate(path, n, shape, rank=8, seed=0, block=1_000_000):
    rng = np.random.default_rng(seed)
    scale = (1.0 / rank) ** (1.0 / 6.0)
    factors = [scale * rng.standard_normal((d, rank)) for d in shape]
    with TensorWriter(path, shape, binary=True) as w:
        for lo in range(0, n, block):
            m = min(block, n - lo)
            coords = np.stack([rng.integers(0, d, m) for d in shape], axis=1)
            f = np.ones((m, rank))
            for k, U in enumerate(factors):
                f *= U[coords[:, k]]
            values = (rng.random(m) < ndtr(f.sum(1))).astype(np.float64)
            w.append(coords, values)


def compare_in_memory(path, args, kw):
    """Median over alternating repeats of (time from the file) / (time from memory)."""
    reader = fastcep.TensorReader(path)
    m = min(args.compare_entries, reader.n)
    coords, values = reader.read(0, m)
    shape = reader.shape
    reader.close()
    n_batches = -(-m // args.batch_size)

    def timed(source, **extra):
        t0 = time.perf_counter()
        fastcep.stream(*source, model="cp_probit", rank=args.rank, **extra, **kw)
        return time.perf_counter() - t0

    ratios = []
    for rep in range(args.repeats):
        # alternate which goes first: a shared machine's speed drifts within a pair too
        if rep % 2 == 0:
            t_file = timed((path,), max_batches=n_batches)
            t_mem = timed((coords, values), shape=shape)
        else:
            t_mem = timed((coords, values), shape=shape)
            t_file = timed((path,), max_batches=n_batches)
        ratios.append(t_file / t_mem)
        print(
            f"compare {rep + 1}: file {t_file:.1f} s, memory {t_mem:.1f} s, ratio {ratios[-1]:.3f}",
            flush=True,
        )
    ratio = float(np.median(ratios))
    print(f"file slowdown (median of {args.repeats}, first {m:,} entries): {ratio - 1:+.1%}")
    return ratio


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--entries", type=int, default=10_000_000)
    ap.add_argument("--shape", default="100000,1000,100000")
    ap.add_argument("--rank", type=int, default=8)
    ap.add_argument("--batch-size", type=int, default=50_000)
    ap.add_argument("--max-iter", type=int, default=None, help="inner iterations (default: stream's)")
    ap.add_argument("--file", default=None)
    ap.add_argument("--compare-in-memory", action="store_true")
    ap.add_argument("--compare-entries", type=int, default=2_000_000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--max-seconds", type=float, default=None, help="stop the stream after this long")
    ap.add_argument("--prior", default=None, help="the stream's prior (default: stream's)")
    ap.add_argument("--expect-under", default=None, help="the inner fits' expectations (default: stream's)")
    ap.add_argument("--probit-curvature", default=None, help="the inner fits' curvature (default: stream's)")
    args = ap.parse_args()
    shape = tuple(int(v) for v in args.shape.split(","))
    path = args.file or f"/tmp/fastcep-ooc-{args.entries}.h5"
    if not os.path.exists(path):
        t0 = time.perf_counter()
        generate(path, args.entries, shape)
        print(f"generated {path} in {time.perf_counter() - t0:.0f} s", flush=True)
    kw = dict(batch_size=args.batch_size, max_iter=args.max_iter)
    inner = {
        "prior": args.prior,
        "expect_under": args.expect_under,
        "probit_curvature": args.probit_curvature,
    }
    kw.update({k: v for k, v in inner.items() if v is not None})
    fastcep.stream(path, model="cp_probit", rank=args.rank, max_batches=1, **kw)  # compile
    base = rss()
    sampler = Sampler()
    sampler.start()
    t0 = time.perf_counter()
    marks = []

    def cb(info):
        marks.append((info.result.state.rows_done, time.perf_counter() - t0, rss()))
        return args.max_seconds is not None and time.perf_counter() - t0 > args.max_seconds

    res = fastcep.stream(path, model="cp_probit", rank=args.rank, callback=cb, **kw)
    secs = time.perf_counter() - t0
    sampler.stop.set()
    sampler.join()
    done = marks[-1][0]
    peak = max(r for _, r in sampler.samples)
    along = [marks[int(q * (len(marks) - 1))] for q in (0.1, 0.5, 1.0)]
    line = (
        f"| {args.entries:,} | {done:,} | {args.batch_size:,} | {res.options['max_iter']} | "
        f"{done / secs:,.0f} | "
        f"{peak / 1e9:.2f} | {base / 1e9:.2f} | "
        + ", ".join(f"{r / 1e9:.2f} GB at {n:,}" for n, _, r in along)
    )
    print(
        f"streamed {done:,} entries in {secs:.0f} s: {done / secs:,.0f} entries/s; "
        f"peak RSS {peak / 1e9:.2f} GB"
    )
    if args.compare_in_memory:
        ratio = compare_in_memory(path, args, kw)
        line += f" | {ratio - 1:+.1%} |"
    else:
        line += " | - |"
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / "stream-ooc.md"
    if not out.exists():
        out.write_text(
            "# Out-of-core streaming (cp_probit, rank 8)\n\n"
            "| entries in file | streamed | batch | inner iters | entries/s | peak RSS GB | RSS before GB | "
            "RSS along the stream | slowdown vs in memory |\n|---|---|---|---|---|---|---|---|---|\n"
        )
    with out.open("a") as f:
        f.write(line + f"  <!-- {machine()} -->\n")
    print(line)


if __name__ == "__main__":
    main()
