"""Streams on a Dask cluster (``stream(..., client=client)``, ``fastcep.cluster.stream``): EP over
shards. One pass is the prior plus each shard's one-process stream of its rows (checked against
that sum written out here); the refinement passes; a file's shards read on the workers; a killed
worker; the command line; what is refused."""

import math
import os
import shutil
import signal

import numpy as np
import pytest

import fastcep
from fastcep.cluster.stream import shard_seed
from fastcep.data_tools import make_cp_tensor

distributed = pytest.importorskip("distributed")

SHAPE = (40, 30, 20)


def tensor(binary=True, n=12000, seed=0):
    """A rank-3 tensor's entries in a random order, 80 % to train, the rest to test."""
    T, _ = make_cp_tensor(SHAPE, 3, n, noise_sd=0.1, binary=binary, seed=seed, factor_scale=1.2)
    p = np.random.default_rng(1).permutation(n)
    cut = int(0.8 * n)
    return (T.coords[p[:cut]], T.values[p[:cut]]), (T.coords[p[cut:]], T.values[p[cut:]])


def summed_shards(coords, values, cuts, kw):
    """The textbook first pass with a fixed prior: the prior's natural parameters plus, for each
    shard, its one-process stream's posterior minus the prior (as a stream holds it)."""
    runs = [
        fastcep.stream(coords[lo:hi], values[lo:hi], shape=SHAPE, seed=shard_seed(0, k, 0), **kw).state
        for k, (lo, hi) in enumerate(cuts)
    ]
    R = runs[0].M.shape[1]
    prior = np.eye(R) / 1.0  # (prior_var 1)
    P_Lam = prior + sum(r.P_Lam - prior for r in runs)
    P_eta = sum(r.P_eta for r in runs)
    noise = np.array([1e-3, 1e-3]) + sum(r.noise - 1e-3 for r in runs)
    return P_Lam, P_eta, noise


@pytest.mark.parametrize("model, more", [("cp_probit", {}), ("cp_gaussian", dict(standardize="none"))])
def test_one_pass_is_the_prior_plus_each_shard_s_stream(client, tmp_path, model, more):
    """passes=1, fixed prior: the posterior is the prior plus each shard's net message, where a
    shard is the one-process stream of its rows (about half the file each, two workers, in whole
    batches: 10 of 500, then the 9,600 entries' other 4,600) with its seed; the shards read their
    rows from the file on the workers."""
    (coords, values), _ = tensor(binary=model == "cp_probit")
    path = tmp_path / "train.h5"
    fastcep.write_tensor(path, coords, values, shape=SHAPE)
    kw = dict(model=model, rank=3, prior="fixed", batch_size=500, **more)
    res = fastcep.stream(path, client=client, passes=1, **kw)
    assert res.options["shards"] == 2 and res.n_iter == 1 and res.state.batches_done == 20
    P_Lam, P_eta, noise = summed_shards(coords, values, [(0, 5000), (5000, 9600)], kw)
    np.testing.assert_allclose(res.state.P_Lam, P_Lam, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(res.state.P_eta, P_eta, rtol=1e-12, atol=1e-10)
    np.testing.assert_allclose(res.state.M, np.linalg.solve(P_Lam, P_eta[..., None])[..., 0], atol=1e-10)
    if model == "cp_gaussian":
        np.testing.assert_allclose(res.state.noise, noise, rtol=1e-12)
    assert res.trace.elapsed.shape == (1,) and res.stop_reason == "end"


def test_refinement_passes_raise_the_test_auc(client, capsys):
    """The defaults (learned prior), 4 passes: each refinement pass streams every shard against
    the others' messages. On this tensor the first pass (each shard half the data from the
    prior) gives AUC 0.70, the fourth 0.84; the one-process stream of all the data gives
    0.69-0.93 over seeds 0-3 (median 0.77). The passes run on the one loop (``_loop.run``): a
    verbose line and the progress line per pass."""
    (coords, values), test = tensor()
    res = fastcep.stream(
        coords, values, shape=SHAPE, model="cp_probit", rank=3, batch_size=500, client=client, passes=4,
        eval_set=test, verbose=True, progress=True,
    )  # fmt: skip
    err = capsys.readouterr().err
    assert "[fastcep] cp_probit/cep1 on 2 shards pass 4/4: change" in err and "\r" in err
    auc = res.trace.eval_metric
    assert auc.shape == (4,) and np.all(np.isfinite(auc))
    assert auc[-1] > auc[0] + 0.1 and auc[-1] > 0.8
    assert res.auc(*test) == auc[-1]
    # (the state continues in one process as a stream's does)
    more = fastcep.stream(coords, values, shape=SHAPE, model="cp_probit", rank=3, init_state=res.state)
    assert more.n_iter == res.state.batches_done and np.array_equal(more.state.M, res.state.M)


def test_a_killed_worker_s_shard_runs_again_with_the_same_result(client):
    """Every worker process killed (SIGKILL) after the first pass: the shards' rows are sent
    again, their passes run on the workers the nannies start, and the stream ends with the
    bits of the uninterrupted stream (a shard's pass depends only on its rows, seed and cavity)."""
    (coords, values), _ = tensor(n=4000)
    kw = dict(shape=SHAPE, model="cp_probit", rank=3, batch_size=500, client=client, passes=2)
    one = fastcep.stream(coords, values, **kw)
    killed = []

    def kill(info):
        if info.iteration == 1:
            for pid in client.run(os.getpid).values():
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)

    two = fastcep.stream(coords, values, callback=kill, **kw)
    assert killed
    np.testing.assert_array_equal(two.state.P_Lam, one.state.P_Lam)
    np.testing.assert_array_equal(two.state.M, one.state.M)
    client.wait_for_workers(2, timeout=60)


def test_a_stream_shorter_than_the_workers_batches_is_one_shard(client):
    """400 entries, batches of 1,000, two workers: one shard (no empty one), whose pass is the
    one-process stream (fixed prior: with a learned one the client learns it again)."""
    (coords, values), _ = tensor(n=500)
    kw = dict(shape=SHAPE, model="cp_probit", rank=2, prior="fixed")
    res = fastcep.stream(coords, values, client=client, passes=1, **kw)
    alone = fastcep.stream(coords, values, seed=shard_seed(0, 0, 0), **kw)
    assert res.options["shards"] == 1
    np.testing.assert_allclose(res.state.M, alone.state.M, atol=1e-10)


@pytest.mark.parametrize(
    "kw, named",
    [
        (dict(max_batches=2), "max_batches"),
    ],
)
def test_what_a_cluster_stream_does_not_run_is_refused_by_name(client, tmp_path, monkeypatch, kw, named):
    monkeypatch.chdir(tmp_path)
    (coords, values), _ = tensor(binary=False, n=600)
    kw = dict(dict(model="cp_gaussian", rank=2, shape=SHAPE), **kw)
    with pytest.raises(NotImplementedError, match=named):
        fastcep.stream(coords, values, client=client, **kw)
    assert not (tmp_path / "c.h5").exists()
    with pytest.raises(ValueError, match="'client' option does not apply to method='post'"):
        fastcep.stream(coords, values, model="cp_gaussian", method="post", rank=2, shape=SHAPE, client=client)


def test_a_learned_dispersion_is_the_shards_estimates_averaged_and_is_checkpointed(client, tmp_path):
    """A negative binomial stream's dispersion on a cluster: each shard learns it from its own
    batches as a one-process stream does, and the client combines the shards' estimates in log,
    weighted by their entries (checked against the shards' one-process streams, pass 1); the next
    pass starts every shard from the combined value, and a checkpoint keeps it (a stream resumed
    after pass 1 ends with the uninterrupted stream's bits)."""
    from fastcep.cluster import cuts

    (coords, reals), _ = tensor(binary=False, n=4000)
    counts = np.random.default_rng(2).negative_binomial(4.0, 4.0 / (4.0 + np.exp(0.4 * reals))).astype(float)
    kw = dict(model="cp_negbin", rank=3, batch_size=400, shape=SHAPE)
    one = fastcep.stream(coords, counts, client=client, passes=1, **kw)
    alone = []
    for k, (lo, hi) in enumerate(cuts(len(counts), 400, 2)):
        res = fastcep.stream(coords[lo:hi], counts[lo:hi], seed=shard_seed(0, k, 0), **kw)
        alone.append((hi - lo, res.likelihood.dispersion))
    expected = math.exp(sum(n * math.log(d) for n, d in alone) / sum(n for n, _ in alone))
    assert len(alone) == 2 and alone[0][1] != alone[1][1]
    assert abs(one.likelihood.dispersion / expected - 1.0) < 1e-12
    path, ck = tmp_path / "t.h5", tmp_path / "ck.h5"
    fastcep.write_tensor(path, coords, counts, shape=SHAPE)
    kw = dict(model="cp_negbin", rank=3, batch_size=400, client=client, passes=2)
    whole = fastcep.stream(path, **kw)
    stopped = fastcep.stream(path, checkpoint=ck, callback=lambda info: info.iteration == 1, **kw)
    on = fastcep.stream(path, checkpoint=ck, resume=True, **kw)
    assert stopped.n_iter == 1 and on.n_iter == 2
    assert on.likelihood.dispersion == whole.likelihood.dispersion != stopped.likelihood.dispersion
    np.testing.assert_array_equal(on.state.M, whole.state.M)


@pytest.mark.parametrize("prior", ["wishart", "fixed"])
def test_a_shard_is_sent_only_the_objects_it_touches(client, monkeypatch, prior):
    """A refinement pass sends each shard its cavity over the objects its entries touch
    (``Cavity``), not over every object; the workers fill in the others (``expand``), which the
    shard's stream never reads: the same bits as the whole cavity (every object, as sent
    before). The entries are in order of their first mode, so each shard touches part of its
    objects (measured: 76 and 65 of the 90)."""
    from fastcep.cluster import stream as CS
    from fastcep.results import StreamState

    (coords, values), _ = tensor(n=4000)
    order = np.argsort(coords[:, 0], kind="stable")
    coords, values = coords[order], values[order]
    kw = dict(shape=SHAPE, model="cp_probit", rank=3, batch_size=500, client=client, passes=3, prior=prior)
    original = CS.Posterior.cavity
    sent = []

    def spy(self, m, noise):
        cavity, frozen = original(self, m, noise)
        sent.append((len(cavity.idx), cavity.n_obj))
        return cavity, frozen

    def whole(self, m, noise):  # (the cavity over every object: the client's posterior elsewhere)
        cavity, frozen = original(self, m, noise)
        part = cavity.state
        st = StreamState(
            self.P_Lam.copy(), self.P_eta.copy(), self.M.copy(), self.S.copy(), self.seen.copy(), part.noise,
            0, 0, 1.0, self.prior(), part.likelihood,
        )  # fmt: skip
        for name in ("P_Lam", "P_eta", "M", "S", "seen"):
            getattr(st, name)[cavity.idx] = getattr(part, name)
        return CS.Cavity(np.arange(cavity.n_obj), cavity.n_obj, st), frozen

    monkeypatch.setattr(CS.Posterior, "cavity", spy)
    compact = fastcep.stream(coords, values, **kw)
    monkeypatch.setattr(CS.Posterior, "cavity", whole)
    every = fastcep.stream(coords, values, **kw)
    assert len(sent) == 4 and all(m <= n - 10 for m, n in sent)  # (2 shards x 2 refinement passes)
    np.testing.assert_array_equal(compact.state.M, every.state.M)
    np.testing.assert_array_equal(compact.state.P_Lam, every.state.P_Lam)


def test_passes_without_a_client_are_an_error():
    (coords, values), _ = tensor(n=600)
    with pytest.raises(ValueError, match="passes=2 are the passes of a cluster stream"):
        fastcep.stream(coords, values, shape=SHAPE, model="cp_probit", rank=2, passes=2)


def test_the_command_line_streams_on_a_scheduler(client, tmp_path, monkeypatch, capsys):
    """``fastcep stream TENSOR -o MODEL --scheduler ADDRESS --passes P``: the API's cluster
    stream of the file; --passes without --scheduler is named."""
    from fastcep import cli

    (coords, values), _ = tensor(n=3000)
    fastcep.write_tensor(tmp_path / "t.h5", coords, values, shape=SHAPE)
    monkeypatch.chdir(tmp_path)
    argv = ["stream", "t.h5", "--model", "cp_probit", "--rank", "3", "--batch-size", "500", "--quiet"]
    address = client.scheduler.address
    assert cli.main([*argv, "-o", "c.h5", "--scheduler", address, "--passes", "2"]) == 0
    saved = fastcep.load_model("c.h5")
    api = fastcep.stream("t.h5", model="cp_probit", rank=3, batch_size=500, client=client, passes=2)
    np.testing.assert_array_equal(saved.posterior.means[0], api.posterior.means[0])
    capsys.readouterr()
    assert cli.main([*argv, "-o", "x.h5", "--passes", "2"]) == 2
    assert "give --scheduler too" in capsys.readouterr().err and not (tmp_path / "x.h5").exists()


@pytest.mark.parametrize("what", ["regression fit", "stream"])
def test_a_lost_scheduler_is_a_clear_error(what):
    """The cluster (its scheduler and workers) closed after the first sweep or pass: a clear
    RuntimeError that names the scheduler, within seconds (a cluster of its own)."""
    with (
        distributed.LocalCluster(
            n_workers=2, processes=True, threads_per_worker=1, dashboard_address=":0"
        ) as cl,
        distributed.Client(cl) as c,
    ):

        def close(info):
            if info.iteration == 1:
                cl.close()

        with pytest.raises(RuntimeError, match="the Dask scheduler was lost"):
            if what == "stream":
                (coords, values), _ = tensor(n=2000)
                fastcep.stream(coords, values, shape=SHAPE, model="cp_probit", rank=2, batch_size=500,
                               client=c, callback=close)  # fmt: skip
            else:
                X = np.random.default_rng(0).standard_normal((3000, 4))
                y = (X @ [1.0, -1.0, 0.5, 0.0] > 0).astype(float)
                fastcep.fit(X, y, model="probit", tol=1e-9, client=c, callback=close)


def test_a_cluster_stream_resumes_after_its_last_pass_with_the_bits_of_an_uninterrupted_one(client, tmp_path):
    """checkpoint= writes the client's state after every pass (the shards' messages, the
    posterior, the learned prior); a stream stopped after pass 2 and resumed runs pass 3 from
    exactly that state: the uninterrupted stream's bits. Other settings or other data are refused
    by name."""
    from fastcep.io import describe
    from fastcep.io.files import FileFormatError

    (coords, values), _ = tensor(n=3000)
    path, ck = tmp_path / "t.h5", tmp_path / "ck.h5"
    fastcep.write_tensor(path, coords, values, shape=SHAPE)
    kw = dict(model="cp_probit", rank=3, batch_size=200, client=client, passes=3)
    whole = fastcep.stream(path, **kw)
    two = lambda info: info.iteration == 2  # noqa: E731
    stopped = fastcep.stream(path, checkpoint=ck, callback=two, **kw)
    assert stopped.n_iter == 2 and stopped.stop_reason == "callback"
    fields, text = describe(ck)
    assert fields["passes_done"] == 2 and fields["shards"] == 2
    assert text.endswith("cp_probit/cep1 of shape 40x30x20 at rank 3 in 2 shards, after 2 passes")
    on = fastcep.stream(path, checkpoint=ck, resume=True, **kw)
    assert on.n_iter == 3 and on.options["resumed_at"] == 2 and on.trace.elapsed.shape == (3,)
    np.testing.assert_array_equal(on.state.M, whole.state.M)
    np.testing.assert_array_equal(on.state.P_Lam, whole.state.P_Lam)
    np.testing.assert_array_equal(on.trace.change[:2], stopped.trace.change)
    with pytest.raises(FileFormatError, match="other settings .rank"):
        fastcep.stream(path, checkpoint=ck, resume=True, **dict(kw, rank=2))
    fastcep.write_tensor(tmp_path / "other.h5", coords, 1.0 - values, shape=SHAPE)
    with pytest.raises(FileFormatError, match="other data"):
        fastcep.stream(tmp_path / "other.h5", checkpoint=ck, resume=True, **kw)


def test_a_cluster_fit_resumes_from_its_checkpoint_at_the_same_fixed_point(client, tmp_path):
    """checkpoint= writes the client's state every 2 sweeps; a fit stopped after 5 sweeps and
    resumed (resume=True) starts from the posterior of sweep 4, its sites flat on the workers, and
    ends at the uninterrupted fit's fixed point (within the stop rule's tolerance), its trace and
    sweep count going on from the checkpoint's. Other settings or other data are refused by name."""
    import dask.array as da

    from fastcep.io import describe
    from fastcep.io.files import FileFormatError

    X = np.random.default_rng(0).standard_normal((6000, 5))
    y = (X @ [1.0, -1.0, 0.5, 0.25, 0.0] + np.random.default_rng(1).standard_normal(6000) > 0).astype(float)
    path = tmp_path / "fit.h5"
    kw = dict(model="probit", tol=1e-8, client=client)
    whole = fastcep.fit(X, y, **kw)
    five = lambda info: info.iteration == 5  # noqa: E731
    stopped = fastcep.fit(X, y, checkpoint=path, checkpoint_every=2, callback=five, **kw)
    assert stopped.stop_reason == "callback" and stopped.n_iter == 5 and path.exists()
    fields, text = describe(path)  # (what ``fastcep info`` prints)
    assert fields["sweeps_done"] == 5 and sum(fields["partition_rows"]) == 6000
    assert text.endswith(
        f"probit/cep1 regression of 6000 rows x {fields['features']} features in 2 partitions, after 5 sweeps"
    )
    on = fastcep.fit(X, y, checkpoint=path, checkpoint_every=2, resume=True, **kw)
    assert on.converged and on.options["resumed_at"] == 5 and on.n_iter > 5
    assert on.trace.elapsed.shape == (on.n_iter,) and np.all(np.diff(on.trace.elapsed) > 0)
    sd = np.sqrt(whole.posterior.var)
    assert np.max(np.abs(on.posterior.mean - whole.posterior.mean) / sd) < 1e-5
    with pytest.raises(FileFormatError, match="other settings .prior_var"):
        fastcep.fit(X, y, checkpoint=path, resume=True, prior_var=2.0, **kw)
    with pytest.raises(FileFormatError, match="other data"):
        fastcep.fit(X[::-1], y[::-1], checkpoint=path, resume=True, **kw)
    with pytest.raises(FileFormatError, match="other settings .partition_rows"):
        fastcep.fit(
            da.from_array(X, chunks=(1000, 5)),
            da.from_array(y, chunks=1000),
            checkpoint=path,
            resume=True,
            **kw,
        )
    with pytest.raises(ValueError, match="checkpoint= applies to fits on a Dask cluster"):
        fastcep.fit(X, y, model="probit", checkpoint=tmp_path / "x.h5")


def test_a_cluster_cp_fit_resumes_from_its_checkpoint_at_the_same_fixed_point(client, tmp_path):
    """A CP fit's checkpoint holds the client's posterior, noise, learned prior (the Wishart's
    hyper-posterior) and damping; a fit stopped after 12 iterations and resumed ends at the
    uninterrupted fit's fixed point, its iterations and trace going on from the checkpoint's.
    Other settings or other entries are refused by name; another partitioning is not (the
    client's state does not depend on it)."""
    from fastcep.data_tools import make_cp_tensor
    from fastcep.io import describe
    from fastcep.io.files import FileFormatError

    T, _ = make_cp_tensor((30, 25, 20), 3, 4000, noise_sd=0.1, seed=0)
    path = tmp_path / "cp.h5"
    kw = dict(model="cp_gaussian", rank=3, tol=1e-7, client=client)
    whole = fastcep.fit(T.coords, T.values, **kw)
    twelve = lambda info: info.iteration == 12  # noqa: E731
    stopped = fastcep.fit(T.coords, T.values, checkpoint=path, checkpoint_every=5, callback=twelve, **kw)
    assert stopped.stop_reason == "callback" and stopped.n_iter == 12 and stopped.options["resumed_at"] == 0
    fields, text = describe(path)
    assert fields["iterations_done"] == 12 and fields["rank"] == 3
    assert text.endswith("cp_gaussian/cep1 decomposition of shape 30x25x20 at rank 3, after 12 iterations")
    # it goes on from the checkpoint's posterior: one more iteration moves the predictions by 4 %
    # (measured), where a fit's first from scratch lands 75 % away
    shutil.copy(path, tmp_path / "copy.h5")
    with pytest.warns(fastcep.ConvergenceWarning, match="stopped at max_iter=13 before"):
        more = fastcep.fit(
            T.coords, T.values, checkpoint=tmp_path / "copy.h5", resume=True, **dict(kw, max_iter=13)
        )
    p = stopped.predict(T.coords)
    assert more.n_iter == 13 and np.sqrt(np.mean((more.predict(T.coords) - p) ** 2) / np.mean(p**2)) < 0.1
    on = fastcep.fit(T.coords, T.values, checkpoint=path, resume=True, **kw)
    assert on.converged and on.options["resumed_at"] == 12 and on.n_iter > 12
    assert on.trace.elapsed.shape == (on.n_iter,) and np.all(np.diff(on.trace.elapsed) > 0)
    assert np.max(np.abs(on.predict(T.coords) - whole.predict(T.coords))) < 1e-4
    assert abs(
        on.posterior.noise[0] / on.posterior.noise[1] - whole.posterior.noise[0] / whole.posterior.noise[1]
    ) < 1e-3 * (whole.posterior.noise[0] / whole.posterior.noise[1])
    with pytest.raises(FileFormatError, match="other settings .rank"):
        fastcep.fit(T.coords, T.values, checkpoint=path, resume=True, **dict(kw, rank=4))
    with pytest.raises(FileFormatError, match="other data"):
        fastcep.fit(T.coords, T.values * 2.0, checkpoint=path, resume=True, **kw)
    with pytest.raises(ValueError, match="checkpoint= applies to fits on a Dask cluster"):
        fastcep.fit(T.coords, T.values, model="cp_gaussian", rank=3, checkpoint=tmp_path / "x.h5")


@pytest.mark.parametrize("expect_under", ["posterior", None])
def test_a_resumed_cluster_cp_fit_goes_on_as_the_uninterrupted_one(client, tmp_path, expect_under):
    """Issue 56: a resumed fit's sites restarted flat on the workers, so its first sweep lost the
    (1 - rho) part of every object's messages (27 iterations where the uninterrupted fit took 25,
    predictions 8e-5 apart; cp_probit 3.8e-4). They now restart as each object's average site,
    their sums the checkpoint's: for messages that read the posterior only, the resumed fit is
    the uninterrupted one to rounding; those that read their own cavity (the default) stop at
    the same iteration."""
    T, _ = make_cp_tensor((30, 25, 20), 3, 4000, noise_sd=0.1, seed=0)
    kw = dict(model="cp_gaussian", rank=3, client=client, expect_under=expect_under)
    whole = fastcep.fit(T.coords, T.values, **kw)
    path = tmp_path / "cp.h5"
    twelve = lambda info: info.iteration == 12  # noqa: E731
    fastcep.fit(T.coords, T.values, checkpoint=path, checkpoint_every=12, callback=twelve, **kw)
    on = fastcep.fit(T.coords, T.values, checkpoint=path, resume=True, **kw)
    assert on.converged and on.n_iter == whole.n_iter
    gap = np.max(np.abs(on.predict(T.coords) - whole.predict(T.coords)))
    if expect_under == "posterior":
        assert gap < 1e-10
        np.testing.assert_allclose(on.trace.change[12:], whole.trace.change[12:], rtol=1e-8)
    else:
        assert gap < 5e-5


def sparse_rows(n, d=300, nnz=8, seed=0):
    """Sparse 0/1 rows (a click log's hashed features) and logistic labels."""
    import scipy.sparse as sp

    r = np.random.default_rng(seed)
    X = sp.csr_array(
        (np.ones(n * nnz), (np.repeat(np.arange(n), nnz), r.integers(0, d, n * nnz))), shape=(n, d)
    )
    X.sum_duplicates()
    X.data[:] = 1.0
    w = r.standard_normal(d) * 0.7
    y = (r.random(n) < 1 / (1 + np.exp(-(X @ w - 0.5)))).astype(float)
    return X, y


def test_a_glm_stream_on_the_cluster_is_ep_over_its_shards(client, tmp_path):
    """``stream_file(rows.h5, client=)``: one pass is the start plus each shard's net message
    (its rows absorbed from the prior in one process, written out here), within 1e-10; three
    passes reach the one-process stream's test log loss (measured 0.4450 against 0.4451 on 40,000
    rows of this kind); a file its workers cannot read by rows, and forgetting, are refused."""
    from fastcep.glm.result import RegressionResult
    from fastcep.glm.stream import stream_file

    X, y = sparse_rows(16000)
    path = tmp_path / "rows.h5"
    fastcep.io.write_csr(path, X[:12000], y[:12000])
    one = stream_file(path, "logistic", batch_rows=1000)
    res = stream_file(path, "logistic", batch_rows=1000, client=client, passes=1)
    assert res.options["stream"]["shards"] == 2 and res.n_iter == 1
    prior = RegressionResult.prior("logistic", "cep1", X.shape[1])
    T0 = 1.0 / np.append(prior.posterior.var, prior.intercept.var)
    T, N = T0.copy(), np.zeros_like(T0)
    for lo, hi in [(0, 6000), (6000, 12000)]:
        shard = RegressionResult.prior("logistic", "cep1", X.shape[1])
        for b in range(lo, hi, 1000):
            shard.update(X[b : b + 1000], y[b : b + 1000], forget=0.0)
        v = np.append(shard.posterior.var, shard.intercept.var)
        m = np.append(shard.posterior.mean, shard.intercept.mean)
        T, N = T + (1.0 / v - T0), N + m / v
    got_v = np.append(res.posterior.var, res.intercept.var)
    got_m = np.append(res.posterior.mean, res.intercept.mean)
    np.testing.assert_allclose(got_v, 1.0 / T, rtol=1e-10)
    np.testing.assert_allclose(got_m, N / T, rtol=1e-10, atol=1e-12)
    three = stream_file(path, "logistic", batch_rows=1000, client=client, passes=3)
    Xt, yt = X[12000:], y[12000:]

    def log_loss(r):
        p = np.clip(r.predict_proba(Xt), 1e-12, 1 - 1e-12)
        return -np.mean(yt * np.log(p) + (1 - yt) * np.log(1 - p))

    assert log_loss(three) < log_loss(one) + 0.002
    (tmp_path / "rows.svm").write_text("1 1:1\n0 2:1\n")
    with pytest.raises(NotImplementedError, match="svmlight text"):
        stream_file(tmp_path / "rows.svm", "logistic", n_features=3, client=client)
    with pytest.raises(NotImplementedError, match="forget=0.01"):
        stream_file(path, "logistic", forget=0.01, client=client)


def test_the_command_line_streams_rows_on_a_scheduler(client, tmp_path, monkeypatch, capsys):
    from fastcep import cli

    X, y = sparse_rows(4000)
    fastcep.io.write_csr(tmp_path / "rows.h5", X, y)
    monkeypatch.chdir(tmp_path)
    argv = ["glm", "stream", "rows.h5", "--model", "logistic", "--batch-rows", "500", "--quiet"]
    assert cli.main([*argv, "-o", "m.h5", "--scheduler", client.scheduler.address, "--passes", "2"]) == 0
    assert fastcep.load("m.h5").options["stream"]["passes"] == 2
    capsys.readouterr()
    assert cli.main([*argv, "-o", "x.h5", "--passes", "2"]) == 2
    assert "give --scheduler too" in capsys.readouterr().err and not (tmp_path / "x.h5").exists()
