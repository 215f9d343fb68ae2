"""A stream on a Dask cluster (EP over shards) against the one-process stream (issue 41).

    python -m bench.cluster_stream [--data synthetic|dblp|rows] [--passes 4] [--seeds 3]

The training entries are written to an HDF5 tensor file; the one-process stream
(``fastcep.stream(path, ...)``, the defaults, rank 8 for DBLP and 3 for the synthetic tensor,
batches of 1,000) and the cluster stream (a LocalCluster of 2 worker processes of 1 thread each,
``client=``, each shard's rows read from the file on its worker) run in turn for each seed.

* ``synthetic``: a binary rank-3 tensor 100 x 80 x 60 (60,000 entries, factor scale 1.2, in a
  random order), 80 % to train, the test AUC on the rest;
* ``dblp``: the papers' training set (``bench.dblp_stream``'s protocol, shuffled with seeds
  1..S), the mean test AUC over the 50 test sets.

* ``rows``: a click log's stream instead (``glm stream``, ``fastcep.glm.stream.stream_file``):
  60,000 sparse 0/1 rows of 300 hashed features, 8 a row, logistic labels; 40,000 to a
  sparse-row file, the test AUC and log loss on the rest; the one-process pass against the
  cluster's after each of 1..passes passes (a run per pass count), batches of 1,000.

Reported per seed: the one-process AUC and seconds, the cluster's AUC after each pass and its
seconds per pass (the evaluation after a pass excluded), and the bytes a refinement pass moves
(each shard's cavity out: P_Lam, P_eta, M and S of the objects its entries touch; its net
message back, the same objects).
"""

import argparse
import pathlib
import tempfile
import time

import numpy as np

import fastcep
from fastcep.data_tools import make_cp_tensor

ROOT = pathlib.Path(__file__).resolve().parents[1]


def synthetic(tmp):
    T, _ = make_cp_tensor((100, 80, 60), 3, 60000, binary=True, seed=0, factor_scale=1.2)
    p = np.random.default_rng(1).permutation(60000)
    path = pathlib.Path(tmp) / "train.h5"
    fastcep.write_tensor(path, T.coords[p[:48000]], T.values[p[:48000]], shape=(100, 80, 60))
    test = (T.coords[p[48000:]], T.values[p[48000:]])
    return path, 3, lambda res: res.auc(*test), False


def dblp(tmp, data_dir):
    from fastcep.data_tools import build_dblp_training, dblp_test_auc, load_dblp

    tests = load_dblp(data_dir)["test_sets"]
    path = pathlib.Path(tmp) / "dblp-train.h5"
    build_dblp_training(data_dir, path, seed=0)
    return path, 8, lambda res: dblp_test_auc(res, test_sets=tests)[0], True


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", choices=("synthetic", "dblp", "rows"), default="synthetic")
    p.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data" / "dblp"))
    p.add_argument("--passes", type=int, default=4)
    p.add_argument("--seeds", type=int, default=3)
    args = p.parse_args(argv)
    from distributed import Client, LocalCluster

    if args.data == "rows":
        return rows_stream(args.passes)

    with tempfile.TemporaryDirectory() as tmp:
        path, R, metric, shuffle = synthetic(tmp) if args.data == "synthetic" else dblp(tmp, args.data_dir)
        kw = dict(model="cp_probit", rank=R, batch_size=1000, shuffle=shuffle)
        with LocalCluster(
            n_workers=2, processes=True, threads_per_worker=1, dashboard_address=":0"
        ) as cluster:
            with Client(cluster) as client:
                fastcep.stream(path, max_batches=2, **kw)  # (compile here, then on the workers)
                fastcep.stream(path, client=client, passes=1, **kw)
                rows = []
                for s in range(args.seeds):
                    seed = s + 1 if shuffle else s
                    t0 = time.perf_counter()
                    one = fastcep.stream(path, seed=seed, **kw)
                    secs = time.perf_counter() - t0
                    auc_one = metric(one)
                    aucs, spent = [], []

                    def after_pass(info, aucs=aucs, spent=spent):
                        t = time.perf_counter()
                        aucs.append(metric(info.result))
                        spent.append(time.perf_counter() - t)

                    t0 = time.perf_counter()
                    res = fastcep.stream(
                        path, seed=seed, client=client, passes=args.passes, callback=after_pass, **kw
                    )
                    total = time.perf_counter() - t0 - sum(spent)
                    rows.append((seed, auc_one, secs, aucs, total / args.passes))
                    print(
                        f"seed {seed}: one process AUC {auc_one:.3f} in {secs:.1f} s; cluster AUC by pass "
                        f"{' '.join(f'{a:.3f}' for a in aucs)}, {total / args.passes:.1f} s a pass",
                        flush=True,
                    )
        n_obj, shards = sum(res.shape), res.options["shards"]
        touched = shard_objects(path, kw["batch_size"], shards)
        out = sum(8 * m * (2 * R * R + 2 * R) + 9 * m for m in touched)  # (rows, seen flags, indices)
        before = 8 * n_obj * (2 * R * R + 2 * R) * shards  # (every object, as sent before 2026-11-30)
        back = sum(8 * m * (R * R + R) for m in touched)
    print(
        f"\n{args.data}: {res.options['n']:,} training entries, rank {R}, {shards} shards, "
        f"{args.passes} passes"
    )
    print("| seed | one process AUC | s | cluster AUC by pass | s a pass |")
    print("|---|---|---|---|---|")
    for seed, a1, s1, aucs, sp in rows:
        print(f"| {seed} | {a1:.3f} | {s1:.1f} | {' / '.join(f'{a:.3f}' for a in aucs)} | {sp:.1f} |")
    med = lambda i: np.median([r[i] for r in rows])  # noqa: E731
    last = np.median([r[3][-1] for r in rows])
    print(f"| median | {med(1):.3f} | {med(2):.1f} | last pass {last:.3f} | {med(4):.1f} |")
    print(
        f"bytes a refinement pass: {out:,} out (cavities over the {' and '.join(map(str, touched))} objects "
        f"the shards touch, of {n_obj:,}; {before:,} over every object), {back:,} back (net messages)"
    )


def shard_objects(path, batch, shards):
    """The objects each shard's entries touch (the cluster stream's cut of the file's rows)."""
    from fastcep.cluster import cuts

    coords, _, shape = fastcep.read_tensor(path)
    offsets = np.concatenate([[0], np.cumsum(shape)])
    cuts = cuts(len(coords), batch, shards)
    return [len(np.unique((coords[lo:hi] + offsets[:-1]).ravel())) for lo, hi in cuts]


def rows_stream(passes):
    """The click log's one-process pass against the cluster's passes (``--data rows``)."""
    import scipy.sparse as sp
    from distributed import Client, LocalCluster

    from fastcep.glm.stream import stream_file

    r = np.random.default_rng(0)
    n, d, nnz = 60000, 300, 8
    X = sp.csr_array(
        (np.ones(n * nnz), (np.repeat(np.arange(n), nnz), r.integers(0, d, n * nnz))), shape=(n, d)
    )
    X.sum_duplicates()
    X.data[:] = 1.0
    y = (r.random(n) < 1 / (1 + np.exp(-(X @ (r.standard_normal(d) * 0.7) - 0.5)))).astype(float)
    Xt, yt = X[40000:], y[40000:]

    def scores(res):
        p = np.clip(res.predict_proba(Xt), 1e-12, 1 - 1e-12)
        order = np.argsort(p)
        ranks = np.empty(len(p))
        ranks[order] = np.arange(1, len(p) + 1)
        pos = yt == 1
        auc = (ranks[pos].sum() - pos.sum() * (pos.sum() + 1) / 2) / (pos.sum() * (~pos).sum())
        return auc, -np.mean(yt * np.log(p) + (1 - yt) * np.log(1 - p))

    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "rows.h5"
        fastcep.io.write_csr(path, X[:40000], y[:40000])
        with LocalCluster(
            n_workers=2, processes=True, threads_per_worker=1, dashboard_address=":0"
        ) as cluster:
            with Client(cluster) as client:
                stream_file(path, "logistic", batch_rows=1000, client=client, passes=1)  # (compile)
                t0 = time.perf_counter()
                one = stream_file(path, "logistic", batch_rows=1000)
                print(f"| one process | {time.perf_counter() - t0:.2f} | %.4f | %.4f |" % scores(one))
                for k in range(1, passes + 1):
                    t0 = time.perf_counter()
                    res = stream_file(path, "logistic", batch_rows=1000, client=client, passes=k)
                    print(
                        f"| cluster, {k} passes | {time.perf_counter() - t0:.2f} | %.4f | %.4f |"
                        % scores(res)
                    )


if __name__ == "__main__":
    main()
