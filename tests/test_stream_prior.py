"""fastcep.stream with a learned prior (``prior="wishart" | "ard"``, ``fastcep.streaming.prior``):
the ledger's sums and messages, resume and checkpoints, determinism and bad input."""

import numpy as np
import pytest
from conftest import same_posterior
from edits import edited

import fastcep
from fastcep.data_tools import make_cp_tensor
from fastcep.results import HYPER_KINDS, HyperState
from fastcep.tensor import hyper as H
from fastcep.tensor.result import second_moments

SHAPE = (30, 25, 20)
KINDS = HYPER_KINDS


@pytest.fixture(scope="module")
def gaussian():
    T, _ = make_cp_tensor(SHAPE, 3, 4000, noise_sd=0.1, seed=11)
    return T


def _stream(T, **kw):
    """A cp_gaussian rank-3 stream of the whole tensor ``T`` (``kw``: the stream's options)."""
    return fastcep.stream(T.coords, T.values, model="cp_gaussian", rank=3, shape=SHAPE, **kw)


@pytest.mark.parametrize("kind", KINDS)
def test_the_ledger_sums_are_the_seen_objects_moments(gaussian, kind):
    """After every batch the hyper-posterior's sums are those of the seen objects' posterior
    moments (recomputed from scratch), and the hyper-posterior is their VMP update."""
    T = gaussian
    offsets = np.concatenate([[0], np.cumsum(SHAPE)])
    checked = []

    def check(info):
        st = info.result.state
        seen = st.seen
        E2 = second_moments(st.M, st.S, "full")
        for k in range(3):
            lo, hi = offsets[k], offsets[k + 1]
            mask = seen[lo:hi]
            assert st.prior.counts[k] == mask.sum()
            np.testing.assert_allclose(st.prior.sum_M[k], st.M[lo:hi][mask].sum(0), rtol=1e-9, atol=1e-9)
            np.testing.assert_allclose(st.prior.sum_E2[k], E2[lo:hi][mask].sum(0), rtol=1e-9, atol=1e-9)
        want = H.update_from_sums(
            H.initial(kind, 3, 3, 1.0), st.prior.counts, st.prior.sum_M, st.prior.sum_E2
        )
        for name in HyperState._fields[1:]:
            np.testing.assert_array_equal(getattr(st.prior.hyper, name), getattr(want, name))
        assert len(st.prior.msg_Lam) == info.iteration + 1  # one version a batch, and the start's
        checked.append(info.iteration)

    res = _stream(
        T,
        batch_size=500,
        prior=kind,
        callback=check,
    )
    assert checked == list(range(1, 9)) and res.hyper.kind == kind


@pytest.mark.parametrize("kind", KINDS)
def test_at_the_end_every_object_holds_the_last_prior_message(gaussian, kind):
    """An object never seen is the last prior itself; a seen one's posterior precision exceeds it."""
    T = gaussian
    keep = T.coords[:, 0] != 29  # object 29 of mode 0 never seen
    res = fastcep.stream(
        T.coords[keep],
        T.values[keep],
        model="cp_gaussian",
        rank=3,
        shape=SHAPE,
        batch_size=500,
        prior=kind,
        max_iter=5,
    )
    st = res.state
    Lam, eta = H.messages(res.hyper, 3, "full")
    np.testing.assert_array_equal(st.P_Lam[29], Lam[0])
    np.testing.assert_array_equal(st.P_eta[29], eta[0])
    assert np.all(st.prior.version == len(st.prior.msg_Lam) - 1)
    assert np.all(np.linalg.eigvalsh(st.P_Lam[:29] - Lam[0])[:, 0] > 0)


@pytest.mark.parametrize("kind", KINDS)
def test_resume_and_init_state_give_the_uninterrupted_stream(tmp_path, gaussian, kind):
    T = gaussian
    kw = dict(
        model="cp_gaussian", rank=3, shape=SHAPE, batch_size=400, shuffle=True, seed=4, prior=kind, max_iter=4
    )
    src = dict(coords=T.coords, values=T.values)
    full = fastcep.stream(**src, **kw)
    ck = tmp_path / "ck.h5"
    part = fastcep.stream(**src, checkpoint=ck, max_batches=4, checkpoint_every=2, **kw)
    assert part.state.prior is not None and part.stop_reason == "max_batches"
    rest = fastcep.stream(**src, checkpoint=ck, resume=True, **kw)
    same_posterior(rest, full)
    part = fastcep.stream(**src, max_batches=3, **kw)
    same_posterior(fastcep.stream(**src, init_state=part.state, **kw), full)
    # thread count
    same_posterior(fastcep.stream(**src, n_threads=1, **kw), fastcep.stream(**src, n_threads=2, **kw))
    with pytest.raises(ValueError, match="init_state was streamed with prior="):
        fastcep.stream(**src, init_state=part.state, **dict(kw, prior="fixed"))
    with pytest.raises(ValueError, match=r"prior \w+ in the checkpoint, fixed now"):
        fastcep.stream(**src, checkpoint=ck, resume=True, **dict(kw, prior="fixed"))


def test_a_corrupt_learned_prior_in_a_checkpoint_is_refused(tmp_path, gaussian):
    T = gaussian
    kw = dict(model="cp_gaussian", rank=3, shape=SHAPE, batch_size=500, prior="wishart", max_iter=3)
    ck = tmp_path / "ck.h5"
    fastcep.stream(T.coords, T.values, checkpoint=ck, max_batches=2, checkpoint_every=1, **kw)
    for name, value, match in (
        ("prior/version", np.full(75, 99), "versions or counts are out of range"),
        ("prior/hyper/nu", np.array([0.5, 40.0, 40.0]), "nu <= R - 1"),
        ("prior/sum_M", np.full((3, 3), np.nan), "non-finite"),
    ):
        bad = tmp_path / "bad.h5"
        bad.write_bytes(ck.read_bytes())
        with edited(bad) as f:
            del f[name]
            f[name] = value
        with pytest.raises(fastcep.FileFormatError, match=match):
            fastcep.stream(T.coords, T.values, checkpoint=bad, resume=True, **kw)


def test_a_learned_prior_needs_full_covariances_for_wishart(gaussian):
    T = gaussian
    with pytest.raises(ValueError, match="prior='wishart' needs covariance='full'"):
        fastcep.stream(T.coords, T.values, model="cp_gaussian", rank=3, prior="wishart", covariance="diag")
    res = _stream(
        T,
        prior="ard",
        covariance="diag",
        batch_size=1000,
    )
    assert res.hyper.kind == "ard" and res.posterior.covs[0].shape == (30, 3)
