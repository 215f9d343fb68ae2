"""What runs on the workers of a cluster stream, on Dask's own test cluster
(``distributed.utils_test.gen_cluster``; a module of its own: it runs its own event loop, which
a module's LocalCluster client in the same process would clash with)."""

import numpy as np
import pytest

import fastcep
from fastcep.cluster.stream import shard_seed

pytest.importorskip("distributed")

from test_cluster_stream import SHAPE, sparse_rows, tensor  # noqa: E402


def _gen_cluster():
    """Dask's own test cluster (``distributed.utils_test.gen_cluster``): a scheduler and two
    workers of one thread in this process, an asynchronous client. fastcep's entry points block
    on their futures, so they cannot run inside its event loop; what runs on the workers can."""
    from distributed.utils_test import gen_cluster

    clean = dict(threads=False, instances=False, processes=False)  # (numba's pool outlives a test)
    return gen_cluster(client=True, nthreads=[("127.0.0.1", 1)] * 2, timeout=120, clean_kwargs=clean)


@_gen_cluster()
async def test_the_shards_work_on_dask_s_test_cluster_as_in_one_process(c, s, a, b):
    """A CP stream's shard pass and a sparse-row file's shard pass submitted to the workers of
    ``gen_cluster`` give the bits of the same calls in this process (a shard depends only on its
    rows, settings and cavity)."""
    import tempfile

    from fastcep import _options as O
    from fastcep.cluster import glm_stream
    from fastcep.cluster.stream import shard_pass
    from fastcep.glm.result import RegressionResult
    from fastcep.streaming import adf

    (coords, values), _ = tensor(n=2000)
    o = O.validate("stream", "stream", "cp_probit", "cep1", dict(rank=2, batch_size=500, shape=SHAPE))
    run = dict(adf.settings(o, "cep1"), R=2)
    del run["init_state"]
    cuts = [(0, 800), (800, 1600)]
    calls = [
        (
            ("arrays", coords[lo:hi], values[lo:hi], SHAPE),
            dict(run, seed=shard_seed(0, k, 0)),
            None,
            (0.0, 1.0),
        )
        for k, (lo, hi) in enumerate(cuts)
    ]
    futures = [
        c.submit(shard_pass, *call, workers=[w.address], pure=False)
        for call, w in zip(calls, (a, b), strict=True)
    ]
    for got, call in zip(await c.gather(futures), calls, strict=True):
        want = shard_pass(*call)
        assert np.array_equal(got.idx, want.idx) and np.array_equal(got.Lam, want.Lam)
        assert np.array_equal(got.eta, want.eta)
    X, y = sparse_rows(2000)
    with tempfile.TemporaryDirectory() as tmp:
        path = f"{tmp}/rows.h5"
        fastcep.io.write_csr(path, X, y)
        start = RegressionResult.prior("logistic", "cep1", X.shape[1])
        future = c.submit(
            glm_stream.shard_pass, ("file", path, (500, 1500)), start, 250, None, 1e-5, workers=[b.address]
        )
        got = await future
        want = glm_stream.shard_pass(
            ("file", path, (500, 1500)),
            RegressionResult.prior("logistic", "cep1", X.shape[1]),
            250,
            None,
            1e-5,
        )
        assert all(np.array_equal(g, w) for g, w in zip(got[:2], want[:2], strict=True))
