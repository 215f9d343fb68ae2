"""CP fits of a tensor file read on a Dask cluster's workers (``fastcep.fit(path, None, ...,
client=client)``, ``fastcep.cluster.cp.FileEntries``): the one-process fit of the same file with
``init="sketch"``, bitwise where the partitions are runs of its sum groups; the start, the checks
and the sums made where the entries are; what is refused; a killed worker."""

import os

import numpy as np
import pytest
from killer import killer

import fastcep
from fastcep.data_tools import make_cp_tensor

distributed = pytest.importorskip("distributed")

SHAPE = (30, 25, 20)


def tensor_file(tmp_path, model, n=3000, seed=0):
    """The path of a rank-3 tensor file for ``model``: real values, labels or counts."""
    T, _ = make_cp_tensor(SHAPE, 3, n, noise_sd=0.1, binary=model == "cp_probit", seed=seed)
    values = T.values
    if model == "cp_poisson":
        values = np.random.default_rng(seed).poisson(np.exp(0.5 * T.values)).astype(float)
    path = os.fspath(tmp_path / f"{model}.h5")
    fastcep.write_tensor(path, T.coords, values, shape=SHAPE, binary=model == "cp_probit")
    return path, T.coords, values


def bits(res):
    post = res.posterior
    return np.concatenate([a.ravel() for a in (*post.means, *post.covs)])


def max_sd_difference(one, two):
    worst = 0.0
    for m1, m2, c1 in zip(one.posterior.means, two.posterior.means, one.posterior.covs, strict=True):
        sd = np.sqrt(np.diagonal(c1, axis1=1, axis2=2))
        worst = max(worst, float(np.max(np.abs(m1 - m2) / sd)))
    return worst


@pytest.mark.parametrize(
    "kw",
    [
        dict(model="cp_probit"),  # (the learned prior, the cavity's expectations)
        dict(model="cp_negbin", schedule="parallel", damping=0.3, max_iter=15),  # (generic; learned)
    ],
)
def test_a_tensor_file_read_on_the_workers_gives_the_bits_of_one_process(client, tmp_path, kw):
    """Two partitions of whole sum groups, each read, checked, counted and sketched on its worker:
    the one-process fit of the file with init="sketch" (its default on a cluster), bitwise; the
    sites stay on the workers (``res.state`` None)."""
    path, coords, values = tensor_file(tmp_path, "cp_poisson" if kw["model"] == "cp_negbin" else kw["model"])
    kw = dict(rank=3, **kw)
    one = fastcep.fit(path, None, init="sketch", **kw)
    two = fastcep.fit(path, None, client=client, **kw)
    assert two.options["init"] == "sketch" and two.options["partitions"] == 2
    assert (two.n_iter, two.converged, two.stop_reason) == (one.n_iter, one.converged, one.stop_reason)
    np.testing.assert_array_equal(bits(two), bits(one))
    np.testing.assert_allclose(two.trace.change, one.trace.change, rtol=1e-12, atol=0)
    assert two.state is None and one.state is not None
    np.testing.assert_array_equal(two.predict(coords[:50]), one.predict(coords[:50]))
    if kw["model"] == "cp_negbin":  # (its first value from the values gathered, then from sums)
        assert two.likelihood.dispersion == one.likelihood.dispersion != 1.0


def test_a_gaussian_tensor_file_standardised_on_the_workers(client, tmp_path):
    """cp_gaussian: the values' scale from the partitions' moments merged (``merge_moments``) and
    the warm-up's reference variance from their exact sums; within 1e-10 posterior sd of the
    one-process fit (the merged moments may round otherwise than one block's)."""
    path, _, _ = tensor_file(tmp_path, "cp_gaussian")
    one = fastcep.fit(path, None, model="cp_gaussian", rank=3, init="sketch")
    two = fastcep.fit(path, None, model="cp_gaussian", rank=3, client=client)
    assert two.n_iter == one.n_iter and two.converged
    assert abs(two.options["value_scale"] / one.options["value_scale"] - 1) < 1e-14
    assert max_sd_difference(one, two) < 1e-10
    assert abs(two.posterior.noise[0] / one.posterior.noise[0] - 1) < 1e-10


def test_bad_entries_and_what_a_file_fit_does_not_run_are_named(client, tmp_path):
    path, coords, values = tensor_file(tmp_path, "cp_poisson", n=2000)
    values = values.copy()
    values[1500] = 2.5  # (not a count)
    bad = os.fspath(tmp_path / "bad.h5")
    fastcep.write_tensor(bad, coords, values, shape=SHAPE)
    kw = dict(model="cp_poisson", rank=2, schedule="parallel", client=client)
    with pytest.raises(ValueError, match=r"bad\.h5', the partition of entries 1000\.\.1999 .*values"):
        fastcep.fit(bad, None, **kw)
    with pytest.raises(NotImplementedError, match="init='svd'"):
        fastcep.fit(path, None, init="svd", **kw)
    with pytest.raises(NotImplementedError, match="n_starts"):
        fastcep.fit(path, None, n_starts=2, **kw)
    with pytest.raises(ValueError, match="give values=None"):
        fastcep.fit(path, values, **kw)
    with pytest.raises(ValueError, match=r"differs from the tensor file's \(30, 25, 20\)"):
        fastcep.fit(path, None, shape=(30, 25, 21), **kw)


def test_a_killed_worker_re_reads_its_entries_and_the_fit_ends_at_the_same_fixed_point(client, tmp_path):
    """Every worker process killed (SIGKILL) after the third iteration: each partition is made
    again from its entry range of the file, standardised again, its sites flat, and the fit
    converges to the one-process fixed point within the stop rule's tolerance."""
    path, coords, _ = tensor_file(tmp_path, "cp_gaussian", n=6000)
    kw = dict(model="cp_gaussian", rank=3, prior="fixed", tol=1e-7)
    one = fastcep.fit(path, None, init="sketch", **kw)
    kill, killed = killer(client)
    two = fastcep.fit(path, None, client=client, callback=kill, **kw)
    assert killed and two.options["revived"] >= 1
    assert two.converged and two.n_iter > 3
    assert np.max(np.abs(two.predict(coords) - one.predict(coords))) < 1e-4
    client.wait_for_workers(2, timeout=60)
