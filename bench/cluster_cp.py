"""A CP sweep on a Dask cluster against the same sweep in one process (issue 41).

    python -m bench.cluster_cp [--entries 1000000] [--rank 8] [--sweeps 12] [--rounds 2]

A synthetic cp_gaussian tensor (shape 400 x 300 x 200, ``entries`` observed), CEP-1 with the
defaults (the learned prior, the cavity's expectations) but ``tol=0`` (a fixed number of
sweeps), alternately in each round:

* one process with the machine's threads (the default fit);
* one process with one thread on the entries of one partition (what each of two workers sweeps);
* a LocalCluster of 2 worker processes of 1 thread each, the entries in 2 partitions of whole sum
  groups (the fit is the one-process fit, bitwise: checked).

Per setting the median seconds per sweep (``trace.elapsed``, sweeps 2 to the last); the
cluster's overhead per sweep is its sweep less the one-partition sweep; the bytes per sweep are
the protocol's payload (the posterior to each partition, the groups' sums back) and what the
loopback interface carried (psutil, the scheduler's heartbeats included).

``--file``: the tensor is written to an HDF5 file first; the one-process fit reads it whole
(``init="sketch"``), the cluster's workers read their entries from it (``FileEntries``: the
checks, the sums and the sketch's four passes where the entries are), and the one-partition fit
takes its entries' arrays. Also printed: each fit's seconds before its first sweep ended
(``trace.elapsed[0]``: reading, checks, start and one sweep).
"""

import argparse
import os
import tempfile

import numpy as np

import fastcep
from fastcep.data_tools import make_cp_tensor
from fastcep.tensor.engine import summed_groups

from .cluster_regression import report, timed_rounds

SHAPE = (400, 300, 200)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--entries", type=int, default=1_000_000)
    p.add_argument("--rank", type=int, default=8)
    p.add_argument("--sweeps", type=int, default=12)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--file", action="store_true", help="fit a tensor file, read by the workers")
    args = p.parse_args(argv)
    from distributed import Client, LocalCluster

    n, R, sweeps = args.entries, args.rank, args.sweeps
    T, _ = make_cp_tensor(SHAPE, 5, n, noise_sd=0.3, seed=0)
    coords, values = T.coords, T.values
    n_obj = sum(SHAPE)
    chunk = summed_groups(n, n_obj, len(SHAPE), "cep1", "full", "parallel")
    groups = -(-n // chunk)
    half = -(-groups // 2) * chunk  # (the first partition: what one worker sweeps)
    kw = dict(model="cp_gaussian", rank=R, tol=0.0, max_iter=sweeps)
    folder = tempfile.TemporaryDirectory()
    path = os.path.join(folder.name, "t.h5")
    data = (coords, values)
    if args.file:
        fastcep.write_tensor(path, coords, values, shape=SHAPE)
        data, kw = (path, None), dict(kw, init="sketch")
    firsts = {"one process": [], "cluster": []}

    def first(name, res):
        firsts[name].append(res.trace.elapsed[0])
        return res

    with LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=":0") as cluster:
        with Client(cluster) as client:
            small = dict(kw, max_iter=2)
            fastcep.fit(coords[:20000], values[:20000], **small)  # (compile, then the workers load)
            fastcep.fit(coords[:20000], values[:20000], client=client, **small)
            fits = (
                lambda: first("one process", fastcep.fit(*data, **kw)),
                lambda: fastcep.fit(coords[:half], values[:half], shape=SHAPE, n_threads=1, **kw),
                lambda callback: first("cluster", fastcep.fit(*data, client=client, callback=callback, **kw)),
            )
            times, moved = timed_rounds(fits, sweeps, args.rounds, same_means)
    folder.cleanup()
    # per sweep: what the sweeps read of the posterior (P_Lam, P_eta, M, E2: 2 R^2 + 2 R floats
    # per object) to each partition, each group's sums (R^2 + R per object) back
    payload = 8 * n_obj * (2 * (2 * R * R + 2 * R) + groups * (R * R + R))
    where = "a tensor file read by the workers" if args.file else "arrays"
    print(
        f"\n{n:,} entries of {SHAPE} ({where}), rank {R}, cp_gaussian CEP-1, {sweeps} sweeps, "
        f"{args.rounds} rounds"
    )
    report(times, moved, f"{payload:,} bytes ({groups} groups)")
    for name, t in firsts.items():
        spread = f"{min(t):.2f} - {max(t):.2f}"
        print(f"{name}: seconds to the end of the first sweep, median {np.median(t):.2f} ({spread})")


def same_means(a, b):
    return all(np.array_equal(x, z) for x, z in zip(a.posterior.means, b.posterior.means, strict=True))


if __name__ == "__main__":
    main()
