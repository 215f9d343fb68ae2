"""CP kernels against the dense textbook versions of tests/naive.py, plus exact limits."""

import numpy as np
import pytest
from cp_tuples import cp_tuples

import naive
from fastcep.kernels import tensor as K
from fastcep.kernels.linalg import (
    batch_cholesky,
    batch_cholesky_inverse,
    cholesky,
    cholesky_inverse,
    cholesky_solve,
)
from fastcep.tensor.engine import ENTRY_CHUNK
from fastcep.tensor.layout import make_layout


def spd(rng, R, scale=1.0):
    A = rng.normal(size=(R, R))
    return scale * (A @ A.T / R + np.eye(R))


@pytest.mark.parametrize("R", [1, 2, 5, 11])
def test_small_linalg_matches_numpy(rng, R):
    A = spd(rng, R)
    L = np.empty((R, R))
    assert cholesky(A, L)
    np.testing.assert_allclose(L, np.linalg.cholesky(A), rtol=1e-13, atol=1e-14)
    inv = np.empty((R, R))
    cholesky_inverse(L, inv)
    np.testing.assert_allclose(inv, np.linalg.inv(A), rtol=1e-11, atol=1e-13)
    b = rng.normal(size=R)
    x = np.empty(R)
    cholesky_solve(L, b, x)
    np.testing.assert_allclose(x, np.linalg.solve(A, b), rtol=1e-11, atol=1e-13)
    # not positive definite / singular
    assert not cholesky(-A, L)


@pytest.mark.parametrize("R", [1, 2, 5, 11])
def test_batch_linalg_matches_numpy(rng, R):
    """Cholesky factors and inverses of a batch of matrices side by side: each lane as numpy;
    a lane that is not positive definite is flagged and does not disturb the others."""
    B = 8
    mats = [spd(rng, R) for _ in range(B)]
    mats[3] = -mats[3]
    A = np.ascontiguousarray(np.stack(mats, axis=2))
    L, out, w = np.empty((R, R, B)), np.empty((R, R, B)), np.empty((R, B))
    ok = np.ones(B, dtype=np.bool_)
    ok[5] = False  # a cleared lane stays cleared
    batch_cholesky(A, L, w, ok)
    out = L.copy()
    batch_cholesky_inverse(out, w, np.empty((R, R, B)))
    np.testing.assert_array_equal(ok, [b not in (3, 5) for b in range(B)])
    assert np.all(np.isfinite(out))
    for b in range(B):
        if b == 3:
            continue
        np.testing.assert_allclose(
            np.tril(L[:, :, b]), np.linalg.cholesky(A[:, :, b]), rtol=1e-13, atol=1e-14
        )
        np.testing.assert_allclose(w[:, b], 1 / np.diag(np.linalg.cholesky(A[:, :, b])), rtol=1e-13)
        np.testing.assert_allclose(out[:, :, b], np.linalg.inv(A[:, :, b]), rtol=1e-11, atol=1e-13)
        np.testing.assert_array_equal(out[:, :, b], out[:, :, b].T)
        # the one-at-a-time kernels: the same terms in the same order (to rounding)
        Ls, inv = np.empty((R, R)), np.empty((R, R))
        assert cholesky(np.ascontiguousarray(A[:, :, b]), Ls)
        cholesky_inverse(Ls, inv)
        np.testing.assert_allclose(np.tril(L[:, :, b]), Ls, rtol=1e-14, atol=1e-15)
        np.testing.assert_allclose(out[:, :, b], inv, rtol=1e-14, atol=1e-15)


#: the kernels' model codes; "cp_probit_rank1" is cp_probit with probit_curvature="rank1"
CODES = {
    "cp_gaussian": K.MODEL_GAUSSIAN,
    "cp_probit": K.MODEL_PROBIT,
    "cp_probit_rank1": K.MODEL_PROBIT_RANK1,
}
MODELS = list(CODES)


def random_state(rng, shape, R, n, model, covariance="full"):
    """Random observed entries, messages and the posterior they imply."""
    Kmodes = len(shape)
    coords = np.stack([rng.integers(0, d, n) for d in shape], axis=1)
    y = rng.normal(size=n) if model == "cp_gaussian" else rng.choice([-1.0, 1.0], n)
    if covariance == "full":
        Lam = np.stack([np.stack([spd(rng, R, 0.3) for _ in range(Kmodes)]) for _ in range(n)])
    else:
        Lam = rng.uniform(0.05, 0.5, (n, Kmodes, R))
    eta = rng.normal(0, 0.3, (n, Kmodes, R))
    return coords, y, Lam, eta


def kernel_state(coords, shape, Lam, eta, prior_var, covariance):
    lay = make_layout(coords, shape)
    n_obj = int(lay.offsets[-1])
    R = eta.shape[2]
    if covariance == "full":
        prior = np.broadcast_to(np.eye(R) / prior_var, (n_obj, R, R)).copy()
    else:
        prior = np.full((n_obj, R), 1 / prior_var)
    problem, store, scratch = cp_tuples(lay, np.zeros(len(eta)), Lam, eta, prior_Lam=prior)
    if covariance == "full":
        K.rebuild_full(problem, store, scratch, 0, n_obj, True)
    else:
        K.rebuild_diag(problem, store, scratch)
    assert not scratch.bad.any()
    return lay, store.P_Lam, store.P_eta, store.M, store.S, store.E2


def split(arr, offsets):
    return [arr[offsets[k] : offsets[k + 1]] for k in range(len(offsets) - 1)]


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("shape", [(4, 3, 5), (3, 4), (2, 3, 2, 3)])
@pytest.mark.parametrize("R", [1, 2, 3])
def test_rebuild_and_sweep_match_naive(rng, model, shape, R):
    n, rho, prior_var, etau = 40, 0.6, 1.5, 2.5
    coords, y, Lam, eta = random_state(rng, shape, R, n, model)
    lay, P_Lam, P_eta, M, S, E2 = kernel_state(coords, shape, Lam, eta, prior_var, "full")
    nP_Lam, nP_eta, means, covs = naive.cp_posterior(coords, shape, Lam, eta, prior_var)
    np.testing.assert_allclose(M, np.concatenate(means), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(S, np.concatenate(covs), rtol=1e-10, atol=1e-12)
    alpha, beta = rng.uniform(0, 1, n), rng.uniform(0, 1, n)
    ref = naive.cp_parallel_sweep(
        model, coords, y, shape, Lam, eta, alpha, beta, means, covs, nP_Lam, nP_eta, etau, rho
    )
    code = CODES[model]
    for fused in (False, True):  # noise messages in the sweep's pass, or by their own kernel
        L2, e2, a2, b2 = Lam.copy(), eta.copy(), alpha.copy(), beta.copy()
        tuples = cp_tuples(
            lay, y, L2, e2, P_Lam, P_eta, M, None, E2, code=code, alpha=a2, beta=b2,
            with_noise=fused and model == "cp_gaussian",
        )  # fmt: skip
        sk = tuples[2].skipped
        K.sweep_full(*tuples, 0, len(shape), etau, rho, ENTRY_CHUNK, None)
        if model == "cp_gaussian" and not fused:
            K.noise_messages_full(*tuples[:2], rho)
        np.testing.assert_allclose(L2, ref[0], rtol=1e-9, atol=1e-11)
        np.testing.assert_allclose(e2, ref[1], rtol=1e-9, atol=1e-11)
        if model == "cp_gaussian":
            np.testing.assert_allclose(a2, ref[2], rtol=1e-12)
            np.testing.assert_allclose(b2, ref[3], rtol=1e-10, atol=1e-12)
        assert sk.sum() == ref[4]
    # one mode at a time (the block schedule's step; cp_gaussian's own update then forms no
    # noise term): the same messages to that mode, the others untouched
    for k in range(len(shape)):
        L2, e2, a2, b2 = Lam.copy(), eta.copy(), alpha.copy(), beta.copy()
        tuples = cp_tuples(lay, y, L2, e2, P_Lam, P_eta, M, None, E2, code=code, alpha=a2, beta=b2)
        K.sweep_full(*tuples, k, k + 1, etau, rho, ENTRY_CHUNK, None)
        other = [j for j in range(len(shape)) if j != k]
        np.testing.assert_allclose(L2[:, k], ref[0][:, k], rtol=1e-9, atol=1e-11)
        np.testing.assert_allclose(e2[:, k], ref[1][:, k], rtol=1e-9, atol=1e-11)
        np.testing.assert_array_equal(L2[:, other], Lam[:, other])
        np.testing.assert_array_equal(e2[:, other], eta[:, other])
        np.testing.assert_array_equal(b2, beta)


def test_rebuild_without_moments_sums_and_checks_only(rng):
    """rebuild_full with moments False: the same natural parameters and the same flags as with
    moments, and M, S, E2 not written (a fresh fit's start writes them); an improper object is
    flagged either way."""
    shape, R, n = (4, 3, 5), 3, 40
    coords, _, Lam, eta = random_state(rng, shape, R, n, "cp_gaussian")
    lay = make_layout(coords, shape)
    n_obj = int(lay.offsets[-1])
    prior = np.broadcast_to(np.eye(R), (n_obj, R, R)).copy()
    prior[2] = -1e6 * np.eye(R)  # (object 2's posterior is not proper)
    out = {}
    for moments in (True, False):
        tuples = cp_tuples(
            lay,
            np.zeros(n),
            Lam,
            eta,
            *(np.full((n_obj, *b), 7.0) for b in ((R, R), (R,), (R,), (R, R), (R, R))),
            prior_Lam=prior,
        )
        K.rebuild_full(*tuples, 0, n_obj, moments)
        out[moments] = tuples
    (_, with_m, sc_m), (_, without, sc) = out[True], out[False]
    np.testing.assert_array_equal(without.P_Lam, with_m.P_Lam)
    np.testing.assert_array_equal(without.P_eta, with_m.P_eta)
    np.testing.assert_array_equal(sc.bad, sc_m.bad)
    assert sc.bad[2] == 1 and sc.bad.sum() == 1
    for name in ("M", "S", "E2"):
        assert np.all(getattr(without, name) == 7.0)
        assert not np.all(getattr(with_m, name) == 7.0)


def test_a_flat_rebuild_adds_entry_0_s_messages_as_often_as_each_object_has_entries(rng):
    """rebuild_full with ``flat``: the posterior of objects whose every message is entry 0's, from
    the counts in ptr alone (ent empty: a cluster's client), is the CSR rebuild's of n copies of
    that entry, bitwise, and the textbook posterior's."""
    shape, R, n = (4, 3, 5), 3, 40
    coords, _, Lam, eta = random_state(rng, shape, R, n, "cp_gaussian")
    Lam[:], eta[:] = Lam[0], eta[0]  # (every entry's messages are entry 0's, mode by mode)
    lay = make_layout(coords, shape)
    n_obj = int(lay.offsets[-1])
    prior = np.broadcast_to(np.eye(R) / 1.5, (n_obj, R, R)).copy()
    whole = cp_tuples(lay, np.zeros(n), Lam, eta, prior_Lam=prior)
    K.rebuild_full(*whole, 0, n_obj, True)
    one = lay._replace(gidx=lay.gidx[:1], ent=np.zeros(0, dtype=np.int64))
    flat = cp_tuples(one, np.zeros(1), Lam[:1].copy(), eta[:1].copy(), prior_Lam=prior)
    K.rebuild_full(*flat, 0, n_obj, True, True)
    for name in ("P_Lam", "P_eta", "M", "S", "E2"):
        np.testing.assert_array_equal(getattr(flat[1], name), getattr(whole[1], name))
    _, _, means, covs = naive.cp_posterior(coords, shape, Lam, eta, 1.5)
    np.testing.assert_allclose(flat[1].M, np.concatenate(means), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(flat[1].S, np.concatenate(covs), rtol=1e-10, atol=1e-12)


def cavity_sweep(code, lay, y, Lam, eta, P_Lam, P_eta, etau, rho, k_lo, k_hi, M=None, E2=None, noise=None):
    """kernels.tensor.cavity.sweep_cavity_full on copies, without sums; returns (Lam, eta, skipped), and
    with noise = (alpha, beta) the updated copies of those too."""
    n = eta.shape[0]
    L2, e2 = Lam.copy(), eta.copy()
    a2, b2 = (np.zeros(n), np.zeros(n)) if noise is None else (noise[0].copy(), noise[1].copy())
    if M is None:
        M, E2 = np.zeros(P_eta.shape), np.zeros(P_Lam.shape)
    tuples = cp_tuples(
        lay, y, L2, e2, P_Lam, P_eta, M, None, E2, code=code, alpha=a2, beta=b2, with_noise=noise is not None,
        cavity=True,
    )  # fmt: skip
    sk = tuples[2].skipped
    K.sweep_cavity_full(*tuples, k_lo, k_hi, etau, rho, ENTRY_CHUNK, None)
    if noise is not None:
        return L2, e2, int(sk.sum()), a2, b2
    return L2, e2, int(sk.sum())


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("shape", [(4, 3, 5), (3, 4), (2, 3, 2, 3)])
@pytest.mark.parametrize("R", [1, 2, 3])
def test_cavity_sweep_matches_naive(rng, model, shape, R):
    """expect_under="cavity": every message from the entry's cavities of the other modes,
    against explicit inverses; the block schedule's single-mode step changes that mode only."""
    n, rho, prior_var, etau = 40, 0.6, 1.5, 2.5
    coords, y, Lam, eta = random_state(rng, shape, R, n, model)
    lay, P_Lam, P_eta, M, S, E2 = kernel_state(coords, shape, Lam, eta, prior_var, "full")
    nP_Lam, nP_eta, means, covs = naive.cp_posterior(coords, shape, Lam, eta, prior_var)
    alpha, beta = rng.uniform(0.2, 1, n), rng.uniform(0.2, 1, n)
    Km, code = len(shape), CODES[model]
    ref = naive.cp_parallel_sweep(
        model, coords, y, shape, Lam, eta, alpha, beta, means, covs, nP_Lam, nP_eta, etau, rho, cavity=True
    )
    got = cavity_sweep(code, lay, y, Lam, eta, P_Lam, P_eta, etau, rho, 0, Km, M, E2, (alpha, beta))
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(got[1], ref[1], rtol=1e-9, atol=1e-11)
    assert got[2] == ref[4]
    if model == "cp_gaussian":  # the noise messages, from the posterior
        np.testing.assert_allclose(got[3], ref[2], rtol=1e-12)
        np.testing.assert_allclose(got[4], ref[3], rtol=1e-10, atol=1e-12)
    for k in range(Km):
        blk = cavity_sweep(code, lay, y, Lam, eta, P_Lam, P_eta, etau, rho, k, k + 1)
        other = [j for j in range(Km) if j != k]
        np.testing.assert_allclose(blk[0][:, k], ref[0][:, k], rtol=1e-9, atol=1e-11)
        np.testing.assert_allclose(blk[1][:, k], ref[1][:, k], rtol=1e-9, atol=1e-11)
        np.testing.assert_array_equal(blk[0][:, other], Lam[:, other])
        np.testing.assert_array_equal(blk[1][:, other], eta[:, other])
    if model == "cp_gaussian" and R > 1:  # the cavity differs from the posterior: so do the messages
        post = naive.cp_parallel_sweep(
            model, coords, y, shape, Lam, eta, alpha, beta, means, covs, nP_Lam, nP_eta, etau, rho
        )
        assert np.abs(post[0] - ref[0]).max() > 1e-3


@pytest.mark.parametrize("model", MODELS)
def test_cavity_sweep_skips_an_entry_whose_cavity_is_improper(rng, model):
    """An entry whose message to one mode exceeds that object's posterior precision (an improper
    cavity) gets no new message to any mode, and all are counted; the other entries, in its
    batch too, get the messages of the naive sweep over them alone."""
    shape, R, n, rho, prior_var, etau = (4, 3, 5), 3, 29, 0.6, 1.5, 2.5
    coords, y, Lam, eta = random_state(rng, shape, R, n, model)
    lay, P_Lam, P_eta, M, S, E2 = kernel_state(coords, shape, Lam, eta, prior_var, "full")
    nP_Lam, nP_eta, means, covs = naive.cp_posterior(coords, shape, Lam, eta, prior_var)
    bad = 10  # one lane of a partial batch (29 entries)
    Lam[bad, 1] += 50.0 * np.eye(R)  # (after the posterior was formed)
    got = cavity_sweep(CODES[model], lay, y, Lam, eta, P_Lam, P_eta, etau, rho, 0, 3)
    assert got[2] == 3
    np.testing.assert_array_equal(got[0][bad], Lam[bad])
    np.testing.assert_array_equal(got[1][bad], eta[bad])
    keep = np.arange(n) != bad
    ref = naive.cp_parallel_sweep(
        model, coords[keep], y[keep], shape, Lam[keep], eta[keep], np.ones(n - 1), np.ones(n - 1), means,
        covs, nP_Lam, nP_eta, etau, rho, cavity=True,
    )  # fmt: skip
    np.testing.assert_allclose(got[0][keep], ref[0], rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(got[1][keep], ref[1], rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("model", MODELS)
def test_cavity_sweep_equals_posterior_sweep_when_the_entries_have_no_messages(rng, model):
    """Exact limit: with zero messages (the start of a fit) every cavity is the posterior, and
    the cavity sweep gives the posterior sweep's messages exactly (to rounding)."""
    shape, R, n, rho, etau = (4, 3, 5), 3, 30, 0.5, 1.7
    coords, y, _, _ = random_state(rng, shape, R, n, model)
    Lam, eta = np.zeros((n, 3, R, R)), np.zeros((n, 3, R))
    prior_means = rng.normal(size=(sum(shape), R))  # nonzero posterior means: the prior's
    lay = make_layout(coords, shape)
    P_Lam = np.broadcast_to(np.eye(R), (sum(shape), R, R)).copy()
    P_eta = prior_means.copy()
    M, S = prior_means.copy(), P_Lam.copy()
    E2 = S + M[:, :, None] * M[:, None, :]
    L1, e1 = Lam.copy(), eta.copy()
    tuples = cp_tuples(lay, y, L1, e1, P_Lam, P_eta, M, S, E2, code=CODES[model])
    K.sweep_full(*tuples, 0, 3, etau, rho, ENTRY_CHUNK, None)
    got = cavity_sweep(CODES[model], lay, y, Lam, eta, P_Lam, P_eta, etau, rho, 0, 3)
    np.testing.assert_allclose(got[0], L1, rtol=1e-11, atol=1e-13)
    np.testing.assert_allclose(got[1], e1, rtol=1e-11, atol=1e-13)


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("shape", [(4, 3, 5), (2, 3, 2, 3)])
@pytest.mark.parametrize("R", [1, 3])
@pytest.mark.parametrize("cavity", [False, True])
def test_sweep_with_object_sums_equals_sweep_then_rebuild(rng, model, shape, R, cavity):
    """The parallel sweep's per-group sums of the new messages, reduced per object, give the
    posterior of the CSR rebuild (to rounding: the sums run in another order), with the same
    messages; the group size changes only the rounding. The same for the cavity sweep, whose
    messages do not depend on the chunk either (nor on an entry's lane in its batch)."""
    n, rho, prior_var, etau = 200, 0.6, 1.5, 2.5
    coords, y, Lam, eta = random_state(rng, shape, R, n, model)
    lay, P_Lam, P_eta, M, S, E2 = kernel_state(coords, shape, Lam, eta, prior_var, "full")
    n_obj, Km = M.shape[0], len(shape)
    code = CODES[model]
    prior_Lam = np.broadcast_to(np.eye(R) / prior_var, (n_obj, R, R)).copy()
    prior_eta = np.zeros((n_obj, R))

    def sweep(chunk, sums):
        L2, e2, a2, b2 = Lam.copy(), eta.copy(), np.zeros(n), np.zeros(n)
        problem, store, scratch = cp_tuples(
            lay, y, L2, e2, P_Lam, P_eta, M, S, E2, code=code, prior_Lam=prior_Lam, prior_eta=prior_eta,
            alpha=a2, beta=b2, units=-(-n // chunk), with_noise=model == "cp_gaussian", with_sums=sums,
            cavity=cavity, obj_chunk=8,
        )  # fmt: skip
        driver = K.sweep_cavity_full if cavity else K.sweep_full
        driver(problem, store, scratch, 0, Km, etau, rho, chunk, None)
        # the posterior into fresh arrays
        out = store._replace(
            **{k: np.empty_like(getattr(store, k)) for k in ("P_Lam", "P_eta", "M", "S", "E2")}
        )
        if sums:
            K.reduce_object_sums(problem, out, scratch)
        else:
            K.rebuild_full(problem, out, scratch, 0, n_obj, True)
        assert not scratch.bad.any()
        return L2, e2, b2, [out.P_Lam, out.P_eta, out.M, out.S, out.E2]

    ref = sweep(64, False)
    for chunk in (64, 37, n):
        got = sweep(chunk, True)
        for a, b in zip(got[:3], ref[:3], strict=True):
            np.testing.assert_array_equal(a, b)  # the messages themselves: the same arithmetic
        for a, b in zip(got[3], ref[3], strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13)
        np.testing.assert_array_equal(got[3][0], np.transpose(got[3][0], (0, 2, 1)))  # symmetric


def test_noise_chunk_sums(rng):
    n, chunk = 1000, 64
    a, b = rng.random(n), rng.random(n)
    out = np.empty((-(-n // chunk), 2))
    K.noise_chunk_sums(a, b, chunk, out)
    assert out[:, 0].sum() == pytest.approx(a.sum(), rel=1e-14)
    assert out[:, 1].sum() == pytest.approx(b.sum(), rel=1e-14)
    # bitwise the same from differently aligned copies of the data (numpy's own sum is not)
    for shift in (1, 2, 3):
        buf = np.empty(2 * n + 8)
        a2, b2 = buf[shift : shift + n], buf[n + 4 + shift : n + 4 + shift + n]
        a2[:], b2[:] = a, b
        out2 = np.empty_like(out)
        K.noise_chunk_sums(a2, b2, chunk, out2)
        np.testing.assert_array_equal(out2, out)


def probit_scratch(R):
    return np.empty((K.PROBIT_MATS, R, R)), np.empty((K.PROBIT_VECS, R))


@pytest.mark.parametrize("R", [1, 4, 8])
def test_probit_message_matches_textbook_over_many_cavities(rng, R):
    """The whitened form equals the textbook one (explicit inverses), message and validity;
    where the textbook message is not valid, the fallback equals the textbook message with
    Ezz = Ez Ez^T (what the naive sweep does)."""
    n_ok = n_fallback = 0
    for _ in range(300):
        Lc = spd(rng, R, rng.uniform(0.2, 5))
        ec = rng.normal(size=R)
        Ez = rng.normal(size=R)
        C = spd(rng, R, 0.2)
        Ezz = C + np.outer(Ez, Ez)
        s = rng.choice([-1.0, 1.0])
        ref = naive.cp_probit_message(Lc, ec, s, Ez, Ezz)
        Lm, em = np.empty((R, R)), np.empty(R)
        flag = K.probit_message(Lc, ec, s, Ez, Ezz, Lm, em, *probit_scratch(R), False)
        assert flag == (0 if ref is None else 1)
        if ref is None:
            ref = naive.cp_probit_message(Lc, ec, s, Ez, np.outer(Ez, Ez))
            flag = K.probit_message(Lc, ec, s, Ez, Ezz, Lm, em, *probit_scratch(R), True)
            assert flag == (0 if ref is None else 2)
            n_fallback += flag == 2
        else:
            assert K.probit_message(Lc, ec, s, Ez, Ezz, Lm, em, *probit_scratch(R), True) == 1
        if ref is not None:
            n_ok += 1
            np.testing.assert_allclose(Lm, ref[0], rtol=1e-8, atol=1e-10)
            np.testing.assert_allclose(em, ref[1], rtol=1e-8, atol=1e-10)
    assert n_ok > 100
    assert n_fallback > 10


@pytest.mark.parametrize("R", [1, 4, 8])
def test_rank_one_probit_message_matches_textbook_and_is_always_valid(rng, R):
    """probit_curvature="rank1": the textbook message with E[z] E[z]^T in the curvature term
    (c keeps tr(Sc Ezz)); valid for every positive definite cavity, including the misclassified
    entries whose "full" message is indefinite; its precision is rank one along E[z]."""
    n_indefinite_full = 0
    for _ in range(300):
        Lc = spd(rng, R, rng.uniform(0.2, 5))
        ec = rng.normal(size=R)
        Ez = rng.normal(size=R)
        Ezz = spd(rng, R, 0.2) + np.outer(Ez, Ez)
        s = rng.choice([-1.0, 1.0])
        ref = naive.cp_probit_message(Lc, ec, s, Ez, Ezz, rank1=True)
        assert ref is not None
        n_indefinite_full += naive.cp_probit_message(Lc, ec, s, Ez, Ezz) is None
        Lm, em = np.empty((R, R)), np.empty(R)
        for fallback in (False, True):
            assert K.probit_message(Lc, ec, s, Ez, Ezz, Lm, em, *probit_scratch(R), fallback, True) == 1
            np.testing.assert_allclose(Lm, ref[0], rtol=1e-8, atol=1e-10)
            np.testing.assert_allclose(em, ref[1], rtol=1e-8, atol=1e-10)
        a = Lm[0, 0] / Ez[0] ** 2
        assert a > 0
        np.testing.assert_allclose(Lm, a * np.outer(Ez, Ez), rtol=1e-12, atol=1e-14)
    assert n_indefinite_full > 10


@pytest.mark.parametrize("R", [1, 3, 6])
def test_rank_one_and_full_probit_messages_agree_without_uncertainty_in_other_modes(rng, R):
    """Exact limit: with E[z z^T] = E[z] E[z]^T both curvature rules are the same message."""
    for _ in range(50):
        Lc = spd(rng, R, rng.uniform(0.2, 5))
        ec = rng.normal(size=R)
        Ez = rng.normal(size=R)
        s = rng.choice([-1.0, 1.0])
        full, rank1 = (np.empty((R, R)), np.empty(R)), (np.empty((R, R)), np.empty(R))
        if K.probit_message(Lc, ec, s, Ez, np.outer(Ez, Ez), *full, *probit_scratch(R), False) != 1:
            continue
        assert K.probit_message(Lc, ec, s, Ez, np.outer(Ez, Ez), *rank1, *probit_scratch(R), False, True) == 1
        np.testing.assert_allclose(rank1[0], full[0], rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(rank1[1], full[1], rtol=1e-9, atol=1e-12)


def test_probit_message_with_deterministic_z_is_exact_moment_matching(rng):
    """With Ezz = Ez Ez^T (no uncertainty in the other modes) the message is exact EP."""
    from scipy.special import log_ndtr

    R = 3
    for _ in range(10):
        Lc = spd(rng, R, 2.0)
        ec = rng.normal(size=R)
        z = rng.normal(size=R)
        s = rng.choice([-1.0, 1.0])
        Lm, em = np.empty((R, R)), np.empty(R)
        assert K.probit_message(Lc, ec, s, z, np.outer(z, z), Lm, em, *probit_scratch(R), False) == 1
        # exact tilted moments of N(u | mc, Sc) Phi(s z.u) by importance sampling is too noisy:
        # use the 1-D reduction a = z.u ~ N(z.mc, z^T Sc z) and Gaussian conditioning instead
        Sc = np.linalg.inv(Lc)
        mc = Sc @ ec
        m_a, v_a = z @ mc, z @ Sc @ z
        grid = np.linspace(m_a - 12 * np.sqrt(v_a), m_a + 12 * np.sqrt(v_a), 20001)
        w = np.exp(-0.5 * (grid - m_a) ** 2 / v_a + log_ndtr(s * grid))
        w /= w.sum()
        ma_t = w @ grid
        va_t = w @ (grid - ma_t) ** 2
        k = Sc @ z / v_a
        mean = mc + k * (ma_t - m_a)
        cov = Sc + np.outer(k, k) * (va_t - v_a)
        P = np.linalg.inv(cov)
        np.testing.assert_allclose(Lm, P - Lc, rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(em, P @ mean - ec, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("R", [1, 3])
def test_diag_block_sweep_matches_per_coordinate_formulas(rng, model, R):
    """One (mode k, coordinate r) block: messages from the textbook formulas, then the rebuild."""
    from scipy.special import log_ndtr

    shape, n, rho, prior_var, etau = (4, 3, 5), 30, 0.5, 1.0, 1.7
    coords, y, Lam, eta = random_state(rng, shape, R, n, model, "diag")
    lay, P_Lam, P_eta, M, S, E2 = kernel_state(coords, shape, Lam, eta, prior_var, "diag")
    code = CODES[model]
    for k in range(3):
        for r in range(R):
            Lam0, eta0, M0, E20 = Lam.copy(), eta.copy(), M.copy(), E2.copy()
            P_Lam0, P_eta0 = P_Lam.copy(), P_eta.copy()
            problem, store, scratch = cp_tuples(
                lay,
                y,
                Lam,
                eta,
                P_Lam,
                P_eta,
                M,
                S,
                E2,
                code=code,
                prior_Lam=np.full((len(M), R), 1 / prior_var),
            )
            sk = scratch.skipped
            K.sweep_diag_coord(problem, store, scratch, k, r, etau, rho, ENTRY_CHUNK, None)
            n_bad = 0
            for e in range(n):
                o = lay.gidx[e, k]
                others = [lay.gidx[e, kk] for kk in range(3) if kk != k]
                Ez = np.prod([M0[x] for x in others], axis=0)
                ezz = np.prod([E20[x, r] for x in others])
                b = Ez @ M0[o] - Ez[r] * M0[o, r]
                if model == "cp_gaussian":
                    new_t, new_n = etau * ezz, etau * Ez[r] * (y[e] - b)
                else:
                    tc = P_Lam0[o, r] - Lam0[e, k, r]
                    nc = P_eta0[o, r] - eta0[e, k, r]
                    vc, mc = 1 / tc, nc / tc
                    for e2 in (ezz, Ez[r] ** 2):  # expected form, then plain first order
                        c = 1 + e2 * vc
                        u = y[e] * (Ez[r] * mc + b) / np.sqrt(c)
                        rr = np.exp(-0.5 * u * u - 0.5 * np.log(2 * np.pi) - log_ndtr(u))
                        g = y[e] * rr * Ez[r] / np.sqrt(c)
                        A = g * g + rr * u / c * (Ez[r] ** 2 if model == "cp_probit_rank1" else e2)
                        mean, var = mc + vc * g, vc - vc * vc * A
                        new_t, new_n = 1 / var - tc, mean / var - nc
                        if new_t > 0 and var > 0:
                            break
                    if not (new_t > 0 and var > 0):
                        n_bad += 1
                        assert Lam[e, k, r] == Lam0[e, k, r]
                        continue
                assert Lam[e, k, r] == pytest.approx((1 - rho) * Lam0[e, k, r] + rho * new_t, rel=1e-9)
                assert eta[e, k, r] == pytest.approx(
                    (1 - rho) * eta0[e, k, r] + rho * new_n, rel=1e-9, abs=1e-12
                )
            assert sk.sum() == n_bad
            # only block (k, r) changed
            mask = np.ones_like(Lam, dtype=bool)
            mask[:, k, r] = False
            np.testing.assert_array_equal(Lam[mask], Lam0[mask])
            lo, hi = lay.offsets[k], lay.offsets[k + 1]
            K.rebuild_diag_coord(problem, store, scratch, lo, hi, k, r)
            nP_Lam, nP_eta, means, covs = naive.cp_posterior(
                coords, shape, Lam[..., None] * np.eye(R), eta, prior_var
            )
            np.testing.assert_allclose(M[lo:hi, r], means[k][:, r], rtol=1e-10, atol=1e-12)
            np.testing.assert_allclose(S[lo:hi, r], covs[k][:, r, r], rtol=1e-10)
            np.testing.assert_array_equal(M[:lo], M0[:lo])


def test_expected_sq_error_and_predictive_variance_are_exact(rng):
    """E[(y - f)^2] and Var f (sum of all entries of the Hadamard product) against Monte Carlo."""
    shape, R = (3, 2, 4), 3
    means = [rng.normal(size=(d, R)) for d in shape]
    covs = [np.stack([spd(rng, R, 0.3) for _ in range(d)]) for d in shape]
    M = np.concatenate(means)
    S = np.concatenate(covs)
    E2 = S + M[:, :, None] * M[:, None, :]
    offsets = np.r_[0, np.cumsum(shape)]
    e = np.array([1, 0, 2])
    gidx = (e + offsets[:-1])[None, :]
    mean, var = np.empty(1), np.empty(1)
    K.predict_full(gidx, M, E2, mean, var)
    n_mc = 400_000
    u = [rng.multivariate_normal(means[k][e[k]], covs[k][e[k]], n_mc) for k in range(3)]
    f = (u[0] * u[1] * u[2]).sum(1)
    assert mean[0] == pytest.approx(f.mean(), abs=4 * f.std() / np.sqrt(n_mc))
    assert var[0] == pytest.approx(f.var(), rel=0.02)
    # the paper's main text writes a trace here; the trace is wrong (DESIGN.md 3.2)
    trace_version = np.trace(np.prod([E2[g] for g in gidx[0]], axis=0)) - mean[0] ** 2
    assert abs(trace_version - f.var()) > 0.1 * f.var()
    y = 0.7
    esq = K.expected_sq_error(gidx[0], y, M, E2)
    assert esq == pytest.approx(np.mean((y - f) ** 2), rel=0.02)
    assert esq == pytest.approx(naive.cp_expected_sq_error(e, y, means, covs), rel=1e-12)


@pytest.mark.parametrize("R", [1, 3])
def test_other_modes_moments_match_numpy(rng, R):
    """Ez, Ezz of one entry and mode: the Hadamard products of the other modes' moments, against
    numpy."""
    n_obj, Kmodes = 9, 4
    M = rng.normal(size=(n_obj, R))
    E2 = np.stack([spd(rng, R) for _ in range(n_obj)])
    gidx_e = np.array([2, 5, 0, 7])
    Ez, Ezz = np.empty(R), np.empty((R, R))
    for k in range(Kmodes):
        others = np.delete(gidx_e, k)
        K.other_modes_moments(gidx_e, k, M, E2, Ez, Ezz)
        np.testing.assert_allclose(Ez, np.prod(M[others], axis=0), rtol=1e-14)
        np.testing.assert_allclose(Ezz, np.prod(E2[others], axis=0), rtol=1e-14)
