"""A regression sweep on a Dask cluster against the same sweep in one process (issue 41).

    python -m bench.cluster_regression [--rows 1000000] [--features 20] [--sweeps 30] [--rounds 3]
                                       [--model probit|negbin]

Simulated probit data (n rows of d standard normal features), or negative binomial counts of
dispersion 2 whose dispersion the fit learns (``--model negbin``: every sweep's EM search then
asks the partitions for its sums, about 35 times), CEP-1 with the defaults but ``tol=0`` (a
fixed number of sweeps), alternately in each round:

* one process with the machine's threads (the default fit);
* one process with one thread on half the rows (what each of two workers sweeps);
* a LocalCluster of 2 worker processes of 1 thread each, the rows as a Dask array in 2
  partitions of whole chunks (of the sweep and of the learned parameter's sums: so the fit is the
  one-process fit, bitwise: checked).

Per setting the median seconds per sweep (``trace.elapsed``, sweeps 2 to the last). The cluster's
overhead per sweep is its sweep time less the half-rows sweep (the arithmetic one worker does);
the bytes per sweep are the payload the protocol moves (the posterior to each partition, the
per-chunk sums back) and what the loopback interface carried, measured (psutil; this includes
the scheduler's heartbeats).
"""

import argparse
import time

import numpy as np
import psutil

import fastcep
from fastcep.kernels import chunk_rows
from fastcep.kernels.glm.generic import EXPECT_CHUNK


def simulate(n, d, rows, model="probit", seed=0):
    """Probit labels or negative binomial counts (dispersion 2) as Dask arrays in blocks of
    ``rows`` (drawn where they are computed)."""
    import dask.array as da

    rs = da.random.RandomState(seed)
    X = rs.standard_normal((n, d), chunks=(rows, d))
    w = np.random.default_rng(seed).normal(0.0, 0.5, d)
    if model == "negbin":
        mean = da.exp(0.3 * (X @ w) + 0.5)
        return X, rs.negative_binomial(2.0, 2.0 / (2.0 + mean)).astype(float)
    y = (X @ w + rs.standard_normal(n, chunks=rows) > 0).astype(float)
    return X, y


def per_sweep(res):
    return float(np.median(np.diff(res.trace.elapsed)))


def loopback_bytes():
    nic = psutil.net_io_counters(pernic=True).get("lo")
    return 0 if nic is None else nic.bytes_sent


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--features", type=int, default=20)
    p.add_argument("--sweeps", type=int, default=30)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--model", choices=("probit", "negbin"), default="probit")
    args = p.parse_args(argv)
    from distributed import Client, LocalCluster

    n, d, sweeps = args.rows, args.features, args.sweeps
    chunk = chunk_rows(d + 1)
    whole = int(np.lcm(chunk, EXPECT_CHUNK))  # (the sweep's chunks and the learned parameter's)
    half = -(-(n // 2) // whole) * whole  # (2 partitions of whole chunks)
    kw = dict(model=args.model, tol=0.0, max_iter=sweeps)
    with LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=":0") as cluster:
        with Client(cluster) as client:
            Xd, yd = client.persist(simulate(n, d, half, args.model))
            X, y = client.compute([Xd, yd], sync=True)  # (the same rows in this process)
            fastcep.fit(X[:2000], y[:2000], **dict(kw, max_iter=2))  # (compile)
            fastcep.fit(Xd[:4000], yd[:4000], client=client, **dict(kw, max_iter=2))  # (workers compile)
            fits = (
                lambda: fastcep.fit(X, y, **kw),
                lambda: fastcep.fit(X[:half], y[:half], n_threads=1, **kw),
                lambda callback: fastcep.fit(Xd, yd, client=client, callback=callback, **kw),
            )
            times, moved = timed_rounds(
                fits,
                sweeps,
                args.rounds,
                lambda a, b: (
                    np.array_equal(a.posterior.mean, b.posterior.mean) and a.likelihood == b.likelihood
                ),
            )
    n_chunks = -(-half // chunk) + -(-(n - half) // chunk)
    payload = 2 * 4 * (d + 1) * 8 + n_chunks * (d + 1) * 16 + n_chunks * 8
    what = "probit" if args.model == "probit" else "negative binomial (dispersion learned)"
    print(f"\n{n:,} rows x {d} features (+ intercept), {what} CEP-1, {sweeps} sweeps, {args.rounds} rounds")
    report(times, moved, f"{payload:,} bytes ({n_chunks} chunks)")


SETTINGS = ("one process", "one thread, one partition", "2 workers x 1 thread")


def timed_rounds(fits, sweeps, rounds, same):
    """Per round, in turn: (the one-process fit, one partition's fit on one thread, the cluster
    fit given a callback) = ``fits``; their seconds per sweep by setting (``SETTINGS``), and the
    loopback's bytes per cluster sweep (between the first sweep and the last)."""
    times, moved = {name: [] for name in SETTINGS}, []
    for r in range(rounds):
        one = fits[0]()
        times[SETTINGS[0]].append(per_sweep(one))
        times[SETTINGS[1]].append(per_sweep(fits[1]()))
        marks = {}

        def mark(info, marks=marks):
            marks[info.iteration] = loopback_bytes()

        t0 = time.perf_counter()
        two = fits[2](mark)
        wall = time.perf_counter() - t0
        moved.append((marks[sweeps] - marks[1]) / (sweeps - 1))
        times[SETTINGS[2]].append(per_sweep(two))
        print(
            f"round {r + 1}: cluster fit {wall:.2f} s, bitwise equal to one process: {same(two, one)}",
            flush=True,
        )
    return times, moved


def report(times, moved, payload):
    """The table of ``timed_rounds``' figures, the ratio, the overhead and the bytes."""
    print(f"{'setting':<28} {'median s/sweep':>15} {'min - max':>20}")
    for name, t in times.items():
        print(f"{name:<28} {np.median(t):>15.4f} {min(t):>9.4f} - {max(t):.4f}")
    one, two = np.median(times[SETTINGS[0]]), np.median(times[SETTINGS[2]])
    overhead = two - np.median(times[SETTINGS[1]])
    print(
        f"cluster / one process: {two / one:.2f}; overhead per sweep (less one partition): {overhead:.4f} s"
    )
    print(f"payload per sweep: {payload}; loopback: {np.median(moved):,.0f} bytes")


if __name__ == "__main__":
    main()
