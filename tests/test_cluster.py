"""Regression fits on a Dask cluster (``fit(..., client=client)``, ``fastcep.cluster``) against the
same fits in one process: bitwise when the partitions hold whole chunks of the engine's rows,
within 1e-10 posterior sd otherwise; empty partitions; bad input on a worker; what is refused."""

import math
import sys

import numpy as np
import pytest
from killer import killer

import fastcep
from fastcep.data_tools import make_cp_tensor
from fastcep.kernels import chunk_rows

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")


def data(model, n=2500, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) + 0.3 * np.arange(d)  # (un-centred columns: the centre matters)
    f = X @ rng.normal(0.0, 0.5, d) - 1.0
    if model == "poisson":
        y = rng.poisson(np.exp(0.5 * f - 1.0)).astype(float)
    else:
        y = (f + rng.standard_normal(n) > 0).astype(float)
    return X, y


def on_cluster(client, X, y, rows, **kw):
    """The fit of X, y split into row blocks of ``rows`` (a Dask array) on the cluster."""
    return fastcep.fit(
        da.from_array(X, chunks=(rows, X.shape[1])), da.from_array(y, chunks=rows), client=client, **kw
    )


def max_sd_difference(a, b):
    dm = np.abs(a.posterior.mean - b.posterior.mean) / np.sqrt(a.posterior.var)
    dv = np.abs(a.posterior.var - b.posterior.var) / a.posterior.var
    return float(max(dm.max(), dv.max()))


@pytest.mark.parametrize(
    "kw",
    [
        dict(model="probit"),  # (an intercept, centred features)
        dict(model="logistic", fit_intercept=False),
        dict(model="poisson"),
        dict(model="probit", method="cep2", damping=0.5),
        dict(model="poisson", method="ep", fit_intercept=False),  # (the Poisson's generic rows: compiled)
    ],
)
def test_partitions_of_whole_chunks_give_the_bits_of_one_process(client, kw):
    X, y = data(kw["model"])
    chunk = chunk_rows(X.shape[1] + (kw.get("fit_intercept", True)))
    one = fastcep.fit(X, y, **kw)
    two = on_cluster(client, X, y, chunk, **kw)  # (three partitions: 1024, 1024 and 452 rows)
    assert two.options["partitions"] == 3
    assert two.n_iter == one.n_iter and two.converged == one.converged
    np.testing.assert_array_equal(two.posterior.mean, one.posterior.mean)
    np.testing.assert_array_equal(two.posterior.var, one.posterior.var)
    if one.intercept is not None:
        assert (two.intercept.mean, two.intercept.var) == (one.intercept.mean, one.intercept.var)
    np.testing.assert_array_equal(two.trace.change, one.trace.change)
    predict = "predict" if kw["model"] == "poisson" else "predict_proba"
    np.testing.assert_array_equal(getattr(two, predict)(X[:50]), getattr(one, predict)(X[:50]))


def test_any_other_split_gives_one_process_posterior_within_1e_10_sd(client):
    X, y = data("probit")
    one = fastcep.fit(X, y, model="probit")
    for rows in (700, 2499):
        two = on_cluster(client, X, y, rows, model="probit")
        assert two.converged and abs(two.n_iter - one.n_iter) <= 1
        assert max_sd_difference(one, two) < 1e-10


def test_numpy_input_and_an_empty_partition(client):
    X, y = data("logistic", n=2500)
    two = fastcep.fit(X, y, model="logistic", client=client)  # (a block of whole chunks per worker)
    assert two.options["partitions"] == 2
    np.testing.assert_array_equal(two.posterior.mean, fastcep.fit(X, y, model="logistic").posterior.mean)
    X, y = X[:900], y[:900]
    one = fastcep.fit(X, y, model="logistic")
    # a Dask array with a block of no rows: the block has no partition
    Xd = da.concatenate([da.from_array(X[:0]), da.from_array(X, chunks=(chunk_rows(5), 4))])
    yd = da.concatenate([da.from_array(y[:0]), da.from_array(y, chunks=chunk_rows(5))])
    three = fastcep.fit(Xd, yd, model="logistic", client=client)
    assert three.options["partitions"] == 1
    np.testing.assert_array_equal(three.posterior.mean, one.posterior.mean)


def test_a_killed_worker_is_replaced_and_the_fit_ends_at_the_same_fixed_point(client):
    """Every worker process killed (SIGKILL) after the third sweep: the partitions are made again
    on the workers their nannies start, from their rows (Dask recomputes them), their sites flat,
    and the fit converges to the fixed point of the fit in one process (within the stop rule's
    tolerance)."""
    X, y = data("probit", n=6000)
    one = fastcep.fit(X, y, model="probit", tol=1e-7)
    kill, killed = killer(client)
    two = on_cluster(client, X, y, chunk_rows(5), model="probit", tol=1e-7, callback=kill)
    assert killed and two.options["revived"] >= 1
    assert two.converged and two.n_iter > 3
    assert max_sd_difference(one, two) < 1e-5
    client.wait_for_workers(2, timeout=60)  # (the nanny starts the killed one again)


def test_the_errors_of_a_lost_worker_count_as_lost_and_the_data_s_do_not():
    """``Partitions.lost``: what waiting on a lost partition's data raises (one cancelled future,
    or several: ``FuturesCancelledError``, seen in a CI run where a CP fit's revival gave up)
    makes it again; an error of the data ends the fit."""
    from distributed.client import FutureCancelledError, FuturesCancelledError

    from fastcep.cluster.partitions import Partitions

    parts = Partitions.__new__(Partitions)
    parts.distributed = distributed
    for exc in (FuturesCancelledError([]), FutureCancelledError("k", "lost"), OSError("gone")):
        assert parts.lost(exc), exc
    assert not parts.lost(ValueError("fit: X holds NaN"))


def test_bad_rows_on_a_worker_are_named(client):
    X, y = data("probit", n=600)
    X[450, 2] = np.nan
    with pytest.raises(ValueError, match="X"):
        on_cluster(client, X, y, 300, model="probit")
    X, y = data("probit", n=600)
    y[10] = 3.0
    with pytest.raises(ValueError, match="y"):
        on_cluster(client, X, y, 300, model="probit")
    with pytest.raises(ValueError, match="one value per row"):
        fastcep.fit(da.from_array(X, chunks=(300, 4)), da.from_array(y[:-1]), model="probit", client=client)


@pytest.mark.parametrize(
    "kw, named",
    [
        (dict(model="probit", method="vb"), "method='vb'"),
        (dict(model="probit", method="lp"), "method='lp'"),
        (dict(model="probit", schedule="sequential"), "schedule='sequential'"),
        (dict(model="probit", stopping="paper"), "stopping='paper'"),
        (dict(model=fastcep.likelihoods.StudentT(df=4.0, scale=1.0)), "not log-concave"),
    ],
)
def test_what_a_cluster_fit_does_not_run_is_refused_by_name(client, kw, named):
    X, y = data("probit", n=300)
    with pytest.raises(NotImplementedError, match=named):
        fastcep.fit(X, y, client=client, **kw)


@pytest.mark.parametrize("kw", [dict(model="probit"), dict(model="logistic", method="ep")])
def test_sparse_rows_give_one_process_posterior_within_1e_10_sd(client, kw):
    """A scipy.sparse X, split by the client, and a Dask array of sparse blocks, computed on the
    workers: each partition keeps its sites at its nonzeros and sends its sums per column, which
    the client adds to the prior in partition order (one process adds the row chunks in order:
    other roundings)."""
    import scipy.sparse as sp

    rng = np.random.default_rng(0)
    X = sp.random(3000, 60, density=0.05, random_state=1, format="csr")
    y = (X @ rng.normal(0.0, 1.0, 60) + 0.3 * rng.standard_normal(3000) > 0).astype(float)
    one = fastcep.fit(X, y, **kw)
    blocks = da.from_array(X, chunks=(1200, 60), asarray=False)
    for Xc, yc in ((X, y), (blocks, da.from_array(y, chunks=1200))):
        two = fastcep.fit(Xc, yc, client=client, **kw)
        assert two.n_iter == one.n_iter and two.converged == one.converged
        assert two.options["partitions"] == (2 if Xc is X else 3)
        assert max_sd_difference(one, two) < 1e-10
        assert two.intercept is not None and abs(two.intercept.mean - one.intercept.mean) < 1e-10


def test_sparse_rows_with_an_index_outside_the_width_are_refused(client):
    """Issue 56: a cluster fit of such a matrix returned "converged". A scipy.sparse X is checked
    on the client before it is split (the row named is X's); a Dask array's sparse blocks on
    their workers."""
    import scipy.sparse as sp

    rng = np.random.default_rng(0)
    X = sp.random(600, 20, density=0.1, random_state=1, format="csr")
    y = (rng.random(600) < 0.5).astype(float)
    X.indices[X.indptr[450]] = 25
    with pytest.raises(ValueError, match=r"column indices lie in \[0, 20\)\. Got column index 25 in row 450"):
        fastcep.fit(X, y, client=client)
    X.indices[X.indptr[450]] = 3

    def corrupt(block, block_info=None):  # (Dask's own slices of X drop such entries: made here)
        block = block.copy()
        if block_info[0]["chunk-location"][0] == 1:
            block.indices[block.indptr[150]] = -4
        return block

    blocks = da.from_array(X, chunks=(300, 20), asarray=False).map_blocks(corrupt, dtype=float, meta=X[:0])
    with pytest.raises(ValueError, match=r"column indices lie in \[0, 20\)\. Got column index -4 in row 150"):
        fastcep.fit(blocks, da.from_array(y, chunks=300), client=client)


def test_a_sparse_row_file_is_read_on_the_workers(client, tmp_path, monkeypatch, capsys):
    """``fit(path, None, client=...)`` of a sparse-row file: each partition reads its own row range
    on its worker (the client reads the header only: its row reader fails here, the fit does
    not). The same bits as the same rows from memory, split alike; the one-process fit of the
    file (read whole) within 1e-10 sd; ``fastcep glm fit FILE --scheduler`` passes the path. A y
    beside the file and a bad label in a partition are named."""
    import scipy.sparse as sp

    from fastcep import cli
    from fastcep.io import load_glm_model, write_csr
    from fastcep.io.csr import CSRReader

    rng = np.random.default_rng(1)
    X = sp.random(3000, 40, density=0.05, random_state=3, format="csr")
    y = (X @ rng.normal(0.0, 1.0, 40) + 0.3 * rng.standard_normal(3000) > 0).astype(float)
    path = tmp_path / "rows.h5"
    write_csr(path, X, y)
    one = fastcep.fit(path, None, model="probit")  # (one process: the file read whole)
    mem = fastcep.fit(X, y, model="probit", client=client)
    with monkeypatch.context() as m:
        m.setattr(CSRReader, "read", lambda *a, **k: pytest.fail("rows read on the client"))
        on_file = fastcep.fit(path, None, model="probit", client=client)
        monkeypatch.chdir(tmp_path)
        argv = ["glm", "fit", "rows.h5", "-o", "m.h5", "--scheduler", client.scheduler.address, "--quiet"]
        assert cli.main(argv) == 0
    assert on_file.options["partitions"] == mem.options["partitions"] == 2
    np.testing.assert_array_equal(on_file.posterior.mean, mem.posterior.mean)
    np.testing.assert_array_equal(on_file.posterior.var, mem.posterior.var)
    assert on_file.n_iter == one.n_iter and max_sd_difference(one, on_file) < 1e-10
    saved = load_glm_model(tmp_path / "m.h5").result
    np.testing.assert_array_equal(saved.posterior.mean, on_file.posterior.mean)
    with pytest.raises(ValueError, match="give y=None"):
        fastcep.fit(path, y, model="probit", client=client)
    bad = y.copy()
    bad[2900] = 2.0  # (the second partition's)
    write_csr(tmp_path / "bad.h5", X, bad)
    with pytest.raises(ValueError, match=r"the partition of rows \d+\.\.2999"):
        fastcep.fit(tmp_path / "bad.h5", None, model="probit", client=client)


def test_learned_likelihood_parameters_on_a_cluster(client, tmp_path):
    """A negative binomial's dispersion and a Gaussian's noise variance learned on a cluster: the
    EM search's sums come from the partitions, added in the one-process order, a chunk of
    EXPECT_CHUNK rows that two partitions share summed whole by the first (``cluster.learn``):
    the one-process fit's bits, here with 6,000 rows, whose partitions share a chunk (before: the
    dispersion 4.6e-7 apart in log, the posterior means 2e-7 sd; partitions of whole chunks:
    ``tests/test_cluster_learn.py``). The Gaussian's sum of squares is numpy's pairwise sum: the
    same bits only where the split falls on its halves, else to rounding. A checkpoint keeps the
    learned values."""
    rng = np.random.default_rng(0)
    dispersion = None
    for n in (6000,):
        X = rng.standard_normal((n, 4))
        counts = rng.negative_binomial(2.0, 2.0 / (2.0 + np.exp(X @ [0.4, -0.3, 0.2, 0.1] + 0.5)))
        values = X @ [1.0, -1.0, 0.5, 0.2] + 0.7 * rng.standard_normal(n)
        for model, y, name in (("negbin", counts.astype(float), "dispersion"), ("gaussian", values, "var")):
            one = fastcep.fit(X, y, model=model)
            two = fastcep.fit(X, y, model=model, client=client)
            assert two.options["partitions"] == 2 and two.converged and two.n_iter == one.n_iter
            learned, want = getattr(two.likelihood, name), getattr(one.likelihood, name)
            dispersion = learned if name == "dispersion" else dispersion
            if model == "negbin":
                assert learned == want
                np.testing.assert_array_equal(two.posterior.mean, one.posterior.mean)
            else:
                assert abs(math.log(learned / want)) < 1e-12
                sd = np.sqrt(one.posterior.var)
                assert np.max(np.abs(two.posterior.mean - one.posterior.mean) / sd) < 1e-10
    path = tmp_path / "nb.h5"
    kw = dict(model="negbin", client=client, checkpoint=path)
    stopped = fastcep.fit(X, counts.astype(float), callback=lambda info: info.iteration == 4, **kw)
    assert stopped.n_iter == 4 and stopped.likelihood.dispersion != 2.0
    on = fastcep.fit(X, counts.astype(float), resume=True, **kw)
    assert on.options["resumed_at"] == 4 and abs(math.log(on.likelihood.dispersion / dispersion)) < 1e-4


# ------------------------------------------------------------------------------------ CP fits
def tensor(model, n=6000, shape=(30, 25, 20), seed=0):
    """(coords, values) of a rank-3 tensor for ``model``: real values, labels or counts."""
    T, _ = make_cp_tensor(shape, 3, n, noise_sd=0.1, binary=model == "cp_probit", seed=seed)
    values = T.values
    if model == "cp_poisson":
        values = np.random.default_rng(seed).poisson(np.exp(0.5 * T.values)).astype(float)
    return T.coords, values


def cp_bits(res):
    post = res.posterior
    return np.concatenate([a.ravel() for a in (*post.means, *post.covs)])


@pytest.mark.parametrize(
    "kw",
    [
        dict(model="cp_gaussian"),  # (the learned prior, the cavity's expectations, the noise)
        dict(model="cp_probit", prior="fixed", expect_under="posterior"),
    ],
)
def test_cp_fits_give_the_bits_of_one_process(client, kw):
    """The entries as Dask arrays, two partitions of whole sum groups (not of whole noise
    chunks: the client sums the chunks they share): the one-process posterior, noise and
    messages, bitwise; the stopping measure within rounding (its sums are the partitions'). A
    generic model: ``test_a_cp_fit_learns_a_dispersion_on_a_cluster`` and
    ``test_cluster_cp_file.py``."""
    coords, values = tensor(kw["model"])
    kw = dict(rank=3, **kw)
    one = fastcep.fit(coords, values, **kw)  # (first: the workers load its compiled kernels)
    two = fastcep.fit(
        da.from_array(coords, chunks=(1000, 3)), da.from_array(values, chunks=1000), client=client, **kw
    )
    assert two.options["partitions"] == 2 and two.options["revived"] == 0
    assert (two.n_iter, two.converged, two.stop_reason) == (one.n_iter, one.converged, one.stop_reason)
    np.testing.assert_array_equal(cp_bits(two), cp_bits(one))
    assert two.posterior.noise == one.posterior.noise
    for a, b in zip(two.state[:4], one.state[:4], strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(two.trace.change, one.trace.change, rtol=1e-12, atol=0)
    np.testing.assert_array_equal(two.predict(coords[:50]), one.predict(coords[:50]))
    again = fastcep.fit(
        coords, values, init_state=two.state, max_iter=2, **{k: v for k, v in kw.items() if k != "max_iter"}
    )
    assert np.all(np.isfinite(cp_bits(again)))  # (the gathered messages resume a fit in one process)


def test_a_cluster_cp_fit_s_eval_set_and_snapshots(client):
    """``eval_set`` is scored every iteration as in one process; the callback's snapshots carry
    the posterior but not the sites (they stay on the workers until the end)."""
    coords, values = tensor("cp_gaussian", n=3000)
    test = (coords[:300], values[:300])
    kw = dict(model="cp_gaussian", rank=3, max_iter=8, eval_set=test)
    one = fastcep.fit(coords[300:], values[300:], **kw)
    states = []
    two = fastcep.fit(
        coords[300:],
        values[300:],
        client=client,
        callback=lambda info: states.append(info.result.state),
        **kw,
    )
    np.testing.assert_array_equal(two.trace.eval_metric, one.trace.eval_metric)
    assert states == [None] * 8 and two.state is not None


@pytest.mark.parametrize("n, shape", [(600, (100, 80, 60)), (200, (10, 8, 6))])
def test_a_cp_fit_whose_one_process_twin_sums_otherwise_agrees_within_1e_10_sd(client, n, shape):
    """Few entries over many objects: the fit in one process forms the posterior from each
    object's messages, the cluster from its groups' sums. Fewer entries than two chunks: one
    process sums them in one group, the cluster in one per worker. Other roundings."""
    coords, values = tensor("cp_gaussian", n=n, shape=shape)
    kw = dict(model="cp_gaussian", rank=3, prior="fixed", tol=0.0, max_iter=60)  # (60 sweeps each)
    one = fastcep.fit(coords, values, **kw)
    two = fastcep.fit(coords, values, client=client, **kw)
    assert two.options["partitions"] == 2 and two.n_iter == one.n_iter == 60
    for m1, m2, c1 in zip(one.posterior.means, two.posterior.means, one.posterior.covs, strict=True):
        sd = np.sqrt(np.diagonal(c1, axis1=1, axis2=2))
        assert np.max(np.abs(m1 - m2) / sd) < 1e-10


def test_a_killed_worker_during_a_cp_fit_is_replaced_and_the_fit_ends_at_the_same_fixed_point(client):
    coords, values = tensor("cp_probit")
    kw = dict(model="cp_probit", rank=3, prior="fixed", tol=1e-7)
    one = fastcep.fit(coords, values, **kw)
    kill, killed = killer(client)
    two = fastcep.fit(coords, values, client=client, callback=kill, **kw)
    assert killed and two.options["revived"] >= 1
    assert two.converged and two.n_iter > 3
    f1, f2 = one.predict(coords), two.predict(coords)
    assert np.max(np.abs(f1 - f2)) < 1e-4
    client.wait_for_workers(2, timeout=60)


def test_the_command_line_fits_a_tensor_on_a_scheduler(client, tmp_path, monkeypatch, capsys):
    """``fastcep fit TENSOR ... --scheduler ADDRESS``: the file read by the workers, the
    one-process fit's bits (with its start, ``--init sketch``); a method that does not run on a
    cluster is named."""
    from fastcep import cli

    coords, values = tensor("cp_gaussian", n=2000)
    fastcep.write_tensor(tmp_path / "t.h5", coords, values, shape=(30, 25, 20))
    monkeypatch.chdir(tmp_path)
    argv = ["fit", "t.h5", "--model", "cp_gaussian", "--rank", "3", "--max-iter", "10", "--quiet"]
    assert cli.main([*argv, "-o", "c.h5", "--scheduler", client.scheduler.address]) == 0
    assert cli.main([*argv, "-o", "o.h5", "--init", "sketch"]) == 0
    on, off = fastcep.load_model("c.h5"), fastcep.load_model("o.h5")
    assert on.options["init"] == "sketch"
    np.testing.assert_array_equal(cp_bits(on), cp_bits(off))
    capsys.readouterr()
    assert cli.main([*argv, "-o", "x.h5", "--method", "lp", "--scheduler", client.scheduler.address]) == 2
    assert "does not support method='lp'" in capsys.readouterr().err and not (tmp_path / "x.h5").exists()
    # --checkpoint keeps the cluster fit's state; --resume goes on from it; both need --scheduler
    at = ["--scheduler", client.scheduler.address, "--checkpoint", "ck.h5"]
    assert cli.main([*argv, "-o", "k.h5", *at, "--checkpoint-every", "4"]) == 0
    assert fastcep.io.describe("ck.h5").fields["iterations_done"] == 10
    assert cli.main([*argv, "-o", "r.h5", *at, "--resume"]) == 0
    assert fastcep.load_model("r.h5").options["resumed_at"] == 10
    capsys.readouterr()
    assert cli.main([*argv, "-o", "y.h5", "--checkpoint", "ck2.h5"]) == 2
    assert "give --scheduler too" in capsys.readouterr().err and not (tmp_path / "ck2.h5").exists()


def test_a_cp_fit_learns_a_dispersion_on_a_cluster(client, tmp_path):
    """A negative binomial CP fit's dispersion learned on a cluster (the entries' marginals and the
    EM objective's sums on the partitions, ``cluster.learn``): the one-process fit's bits, here
    with 6,000 entries, whose partitions share a chunk of 4,096 (before the shared chunk was
    summed whole by one partition: the dispersion 4.6e-7 apart in log, the posterior means 2.0e-7
    sd). A checkpoint keeps the learned value: a fit resumed at its last iteration ends with it."""
    kw = dict(model="cp_negbin", schedule="parallel", damping=0.3, max_iter=15, rank=3)
    for n in (6000,):
        coords, values = tensor("cp_poisson", n=n)
        one = fastcep.fit(coords, values, **kw)
        two = fastcep.fit(coords, values, client=client, **kw)
        assert two.options["partitions"] == 2 and two.n_iter == one.n_iter
        assert one.likelihood.dispersion == two.likelihood.dispersion
        np.testing.assert_array_equal(cp_bits(two), cp_bits(one))
    ck = tmp_path / "ck.h5"
    stopped = fastcep.fit(coords, values, client=client, checkpoint=ck, **dict(kw, max_iter=6))
    resumed = fastcep.fit(coords, values, client=client, checkpoint=ck, resume=True, **dict(kw, max_iter=6))
    assert resumed.options["resumed_at"] == 6 and resumed.n_iter == 6
    assert resumed.likelihood.dispersion == stopped.likelihood.dispersion
    np.testing.assert_array_equal(resumed.posterior.means[0], stopped.posterior.means[0])


@pytest.mark.parametrize(
    "kw, named",
    [
        (dict(method="lp"), "method='lp'"),
        (dict(covariance="diag"), "covariance='diag'"),
        (dict(model="cp_poisson"), "schedule='sequential' .the count models' default"),
        (dict(model="cp", likelihood=fastcep.likelihoods.StudentT(df=4.0, scale=1.0)), "not log-concave"),
    ],
)
def test_what_a_cluster_cp_fit_does_not_run_is_refused_by_name(client, kw, named):
    coords, values = tensor("cp_poisson", n=200)
    kw = dict(dict(model="cp_gaussian", rank=2), **kw)
    with pytest.raises(NotImplementedError, match=named):
        fastcep.fit(coords, values, client=client, **kw)
    with pytest.raises(TypeError, match="unexpected keyword argument 'client' for method='vmp'"):
        fastcep.fit(coords, values, model="cp_gaussian", method="vmp", rank=2, client=client)
    with pytest.raises(
        NotImplementedError, match=r"reads a tensor file on the workers .* for method 'cep1' only"
    ):
        fastcep.fit(
            "t.h5", None, model="cp_gaussian", method="vmp", rank=2, client=client
        )  # (before opening it)


def test_a_client_that_is_not_one_or_closed_is_refused(client):
    X, y = data("probit", n=100)
    with pytest.raises(TypeError, match="distributed.Client"):
        fastcep.fit(X, y, model="probit", client="tcp://127.0.0.1:8786")
    c = distributed.Client(client.scheduler.address)
    c.close()
    with pytest.raises(RuntimeError, match="not running"):
        fastcep.fit(X, y, model="probit", client=c)


def test_without_the_extra_the_error_names_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)
    X, y = data("probit", n=100)
    with pytest.raises(ImportError, match=r"fastcep\[dask\]"):
        fastcep.fit(X, y, model="probit", client=object())


def test_the_command_line_fits_on_a_scheduler(client, tmp_path, monkeypatch, capsys):
    """``fastcep glm fit ... --scheduler ADDRESS``: the fit of the file's rows on that cluster,
    the one-process fit's bits; a scheduler that does not answer is a clear error."""
    from fastcep import cli
    from fastcep.cli import _fitting
    from fastcep.io import load_glm_model

    X, y = data("probit", n=2500)
    rows = [",".join(["a", "b", "c", "d", "label"])]
    rows += [",".join(repr(v) for v in [*x.tolist(), int(t)]) for x, t in zip(X, y, strict=True)]
    (tmp_path / "t.csv").write_text("\n".join(rows) + "\n")
    monkeypatch.chdir(tmp_path)
    address = client.scheduler.address
    assert (
        cli.main(
            ["glm", "fit", "t.csv", "--target", "label", "-o", "c.h5", "--scheduler", address, "--quiet"]
        )
        == 0
    )
    assert cli.main(["glm", "fit", "t.csv", "--target", "label", "-o", "o.h5", "--quiet"]) == 0
    on, off = load_glm_model("c.h5").result, load_glm_model("o.h5").result
    np.testing.assert_array_equal(on.posterior.mean, off.posterior.mean)
    monkeypatch.setattr(_fitting, "SCHEDULER_TIMEOUT", 1)  # (read by cli._fitting.scheduler)
    capsys.readouterr()
    argv = ["glm", "fit", "t.csv", "--target", "label", "-o", "x.h5", "--quiet"]
    argv += ["--scheduler", "tcp://127.0.0.1:9"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "no Dask scheduler answered at 'tcp://127.0.0.1:9'" in err and not (tmp_path / "x.h5").exists()


def test_workers_with_more_threads_than_numba_may_use_fit():
    """Issue 56: with ``NUMBA_NUM_THREADS=1`` in the workers and ``threads_per_worker=2`` the fit
    failed inside the worker ("The number of threads must be between 1 and 1"). The partitions
    use at most what numba may in their process; the fit is the one-process fit."""
    X, y = data("probit", n=600)
    one = fastcep.fit(X, y, model="probit")
    with distributed.LocalCluster(
        n_workers=1, processes=True, threads_per_worker=2, dashboard_address=":0",
        env={"NUMBA_NUM_THREADS": "1"},
    ) as cluster, distributed.Client(cluster) as client:  # fmt: skip
        threads = client.run(lambda: __import__("numba").config.NUMBA_NUM_THREADS)
        assert list(threads.values()) == [1]
        two = fastcep.fit(X, y, model="probit", client=client)
    assert two.n_iter == one.n_iter and max_sd_difference(one, two) < 1e-10
