"""Laplace propagation for CP models (``kernels.tensor.lp``, ``fit(method="lp")``): the messages of one
entry against the textbook LP of tests/naive.py (scipy L-BFGS-B mode, dense inverse Hessian),
exact limits, the policies for indefinite messages, the parallel sweep, and the fit."""

import numpy as np
import pytest
from cp_tuples import cp_tuples
from kernel_options import central_options_count
from short_fits import assert_max_iter_warns

import fastcep
import naive
from fastcep.data_tools import make_cp_tensor
from fastcep.kernels import tensor as K
from fastcep.kernels._config import PROBIT
from fastcep.kernels.glm import laplace
from fastcep.kernels.tensor import lp as L
from fastcep.tensor.engine import ENTRY_CHUNK
from fastcep.tensor.layout import make_layout

CODE = {"cp_gaussian": K.MODEL_GAUSSIAN, "cp_probit": K.MODEL_PROBIT}
ETAU = 3.0


def spd(rng, R, scale):
    A = rng.normal(size=(R, R))
    return scale * (A @ A.T / R + np.eye(R))


def problem(rng, model, Kmodes, R):
    """Cavities (Lc (K, R, R), ec (K, R)), a value, and a start near the cavity means."""
    Lc = np.stack([spd(rng, R, rng.uniform(0.5, 3.0)) for _ in range(Kmodes)])
    mc = rng.normal(size=(Kmodes, R))
    ec = np.einsum("kij,kj->ki", Lc, mc)
    y = rng.normal() if model == "cp_gaussian" else rng.choice([-1.0, 1.0])
    x0 = (mc + 0.1 * rng.normal(size=(Kmodes, R))).ravel()
    return Lc, ec, y, x0


def kernel_messages(model, y, Lc, ec, x0, indefinite, etau=ETAU):
    """lp_messages on fresh scratch: (mode, Lam (K, R, R), eta (K, R), ok (K,), status)."""
    Kmodes, R = ec.shape
    n = Kmodes * R
    x = x0.copy()
    Lm, em, ok = np.full((Kmodes, R, R), np.nan), np.full((Kmodes, R), np.nan), np.zeros(Kmodes, bool)
    mat, vec = np.empty((L.LP_MATS, n, n)), np.empty((L.LP_VECS, n))
    status = L.lp_messages(CODE[model], y, y, etau, Lc, ec, x, Kmodes, R, indefinite, Lm, em, ok, mat, vec)
    return x, Lm, em, ok, status


# ------------------------------------------------------------------ one entry
@pytest.mark.parametrize("model", ["cp_gaussian", "cp_probit"])
@pytest.mark.parametrize("Kmodes, R", [(2, 1), (3, 1), (2, 3), (3, 2), (3, 4), (4, 2)])
def test_messages_match_textbook_lp(rng, model, Kmodes, R):
    """Mode, messages and validity against scipy's L-BFGS-B mode and the dense inverse Hessian."""
    n_valid = 0
    for _ in range(6):
        Lc, ec, y, x0 = problem(rng, model, Kmodes, R)
        x_ref, L_ref, e_ref, pd_ref, valid_ref = naive.cp_lp_messages(model, y, y, ETAU, Lc, ec, x0)
        x, Lm, em, ok, status = kernel_messages(model, y, Lc, ec, x0, L.LP_APPLY)
        assert status == L.CONVERGED and pd_ref
        np.testing.assert_allclose(x, x_ref, rtol=1e-9, atol=1e-11)
        scale = 1.0 + np.abs(L_ref).max()
        np.testing.assert_allclose(Lm, L_ref, rtol=1e-8, atol=1e-10 * scale)
        np.testing.assert_allclose(em, e_ref, rtol=1e-8, atol=1e-10 * (1.0 + np.abs(e_ref).max()))
        assert ok.all()  # LP_APPLY: every finite message of a positive definite Hessian
        _, _, _, ok_skip, _ = kernel_messages(model, y, Lc, ec, x0, L.LP_SKIP)
        np.testing.assert_array_equal(ok_skip, valid_ref)
        n_valid += valid_ref.sum()
    if R == 1:
        assert n_valid > 0  # scalar messages: the positive ones are valid under LP_SKIP


@pytest.mark.parametrize("model", ["cp_gaussian", "cp_probit"])
def test_textbook_derivatives_match_finite_differences(rng, model):
    """The reference itself: its gradient and Hessian against central differences."""
    Lc, ec, y, x0 = problem(rng, model, 3, 2)
    phi, g, H = naive.cp_lp_phi(model, y, y, ETAU, Lc, ec, x0)
    h = 1e-6
    eye = np.eye(x0.size)
    g_fd = np.array([naive.cp_lp_phi(model, y, y, ETAU, Lc, ec, x0 + h * e)[0] for e in eye])
    g_fd -= np.array([naive.cp_lp_phi(model, y, y, ETAU, Lc, ec, x0 - h * e)[0] for e in eye])
    np.testing.assert_allclose(g_fd / (2 * h), g, rtol=1e-6, atol=1e-7)
    H_fd = np.array([naive.cp_lp_phi(model, y, y, ETAU, Lc, ec, x0 + h * e)[1] for e in eye])
    H_fd -= np.array([naive.cp_lp_phi(model, y, y, ETAU, Lc, ec, x0 - h * e)[1] for e in eye])
    np.testing.assert_allclose(H_fd / (2 * h), H, rtol=1e-6, atol=1e-7)


def certain_other_modes(rng, Kmodes, R, j):
    """Cavities where every mode but j has variance ~1e-12: the others are fixed at their means."""
    Lc = np.stack([spd(rng, R, 1e12 if k != j else 1.5) for k in range(Kmodes)])
    mc = rng.normal(size=(Kmodes, R))
    ec = np.einsum("kij,kj->ki", Lc, mc)
    g = np.prod(np.delete(mc, j, axis=0), axis=0)  # grad of f with respect to u_j
    return Lc, ec, mc, g


@pytest.mark.parametrize("R", [1, 3])
def test_gaussian_with_certain_other_modes_is_exact_moment_matching(rng, R):
    """Then the tilted in u_j is N(u_j; cavity) N(y; g.u_j, 1/tau), Gaussian: its Laplace
    approximation is exact, and the message is the exact EP (= CEP-1) message (tau g g^T, tau y g)."""
    Kmodes, j = 3, 1
    for _ in range(5):
        Lc, ec, mc, g = certain_other_modes(rng, Kmodes, R, j)
        y = rng.normal()
        x, Lm, em, ok, status = kernel_messages("cp_gaussian", y, Lc, ec, mc.ravel(), L.LP_SKIP)
        assert status == L.CONVERGED and ok[j]
        Lam_ep, eta_ep = naive.cp_gaussian_message(y, g, np.outer(g, g), ETAU)
        np.testing.assert_allclose(Lm[j], Lam_ep, rtol=1e-7, atol=1e-8)
        np.testing.assert_allclose(em[j], eta_ep, rtol=1e-7, atol=1e-8)


@pytest.mark.parametrize("R", [1, 3])
def test_probit_with_certain_other_modes_is_the_one_dimensional_laplace(rng, R):
    """Then the tilted in u_j is N(u_j; mc, Sc) Phi(s g.u_j): its mode is mc + s h'(a) Sc g with
    a the root of the 1-D mode equation of the regression LP (``kernels.laplace.tilted_mode``,
    an independent solver), its curvature -h''(a) g g^T."""
    Kmodes, j = 3, 0
    for _ in range(5):
        Lc, ec, mc, g = certain_other_modes(rng, Kmodes, R, j)
        s = rng.choice([-1.0, 1.0])
        x, Lm, em, ok, status = kernel_messages("cp_probit", s, Lc, ec, mc.ravel(), L.LP_SKIP)
        assert status == L.CONVERGED and ok[j]
        Sc = np.linalg.inv(Lc[j])
        a = laplace.tilted_mode(PROBIT, s * g @ mc[j], g @ Sc @ g)
        h1, h2 = laplace.log_lik_derivs(PROBIT, a)
        u = mc[j] + s * h1 * Sc @ g
        np.testing.assert_allclose(x[j * R : (j + 1) * R], u, rtol=1e-8, atol=1e-10)
        Lam = -h2 * np.outer(g, g)
        np.testing.assert_allclose(Lm[j], Lam, rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(em[j], (Lam + Lc[j]) @ u - ec[j], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("model", ["cp_gaussian", "cp_probit"])
def test_indefinite_messages_and_the_three_policies(rng, model):
    """For R >= 2, v^T Lam_k v < 0 on directions v orthogonal to grad_k f (whenever h' != 0):
    LP_SKIP refuses those messages, LP_APPLY returns them, LP_CLIP returns their positive
    semi-definite part with the tilted mode as the mean of cavity times message."""
    Kmodes, R = 3, 3
    for _ in range(5):
        Lc, ec, y, x0 = problem(rng, model, Kmodes, R)
        x, Lm, em, ok, _ = kernel_messages(model, y, Lc, ec, x0, L.LP_APPLY)
        U = x.reshape(Kmodes, R)
        for k in range(Kmodes):
            gk = np.prod(np.delete(U, k, axis=0), axis=0)
            P = np.eye(R) - np.outer(gk, gk) / (gk @ gk)  # projector on the complement of g_k
            assert np.linalg.eigvalsh(P @ Lm[k] @ P)[0] < -1e-6 * np.abs(Lm[k]).max()
        _, _, _, ok_skip, _ = kernel_messages(model, y, Lc, ec, x0, L.LP_SKIP)
        assert ok.all() and not ok_skip.any()
        x_c, Lcl, ecl, ok_c, _ = kernel_messages(model, y, Lc, ec, x0, L.LP_CLIP)
        np.testing.assert_array_equal(x_c, x)
        for k in range(Kmodes):
            w, V = np.linalg.eigh(Lm[k])
            if w[-1] <= 0.0:
                assert not ok_c[k]
                continue
            assert ok_c[k]
            np.testing.assert_allclose(Lcl[k], (V * np.maximum(w, 0.0)) @ V.T, rtol=1e-9, atol=1e-11)
            mean = np.linalg.solve(Lc[k] + Lcl[k], ec[k] + ecl[k])
            np.testing.assert_allclose(mean, x[k * R : (k + 1) * R], rtol=1e-9, atol=1e-11)


def test_sym_eig_matches_numpy(rng):
    for R in (1, 2, 5, 9):
        A = rng.normal(size=(R, R))
        A = A + A.T
        V, w = np.empty((R, R)), np.empty(R)
        L.sym_eig(A, np.empty((R, R)), V, w)
        np.testing.assert_allclose(np.sort(w), np.linalg.eigvalsh(A), rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose((V * w) @ V.T, A, atol=1e-13)
        np.testing.assert_allclose(V.T @ V, np.eye(R), atol=1e-13)


@pytest.mark.parametrize("indefinite", [L.LP_SKIP, L.LP_APPLY, L.LP_CLIP])
def test_improper_cavity_or_nan_gives_no_message(rng, indefinite):
    """A cavity with a negative eigenvalue makes phi unbounded below (no mode, no positive definite
    Hessian); a NaN makes it undefined: no message of the entry may be applied."""
    Lc, ec, y, x0 = problem(rng, "cp_gaussian", 3, 2)
    bad = Lc.copy()
    bad[1] = -np.eye(2)
    *_, ok, status = kernel_messages("cp_gaussian", y, bad, ec, x0, indefinite)
    assert not ok.any()
    nan = ec.copy()
    nan[0, 0] = np.nan
    *_, ok, status = kernel_messages("cp_gaussian", y, Lc, nan, x0, indefinite)
    assert not ok.any() and status == L.FAILED


# ------------------------------------------------------------------ the parallel sweep
def sweep_state(rng, model, shape, R, n):
    """Random entries and messages, the posterior they imply (kernels.tensor.posterior.rebuild_full)."""
    coords = np.stack([rng.integers(0, d, n) for d in shape], axis=1)
    y = rng.normal(size=n) if model == "cp_gaussian" else rng.choice([-1.0, 1.0], n)
    Lam = np.stack([np.stack([spd(rng, R, 0.3) for _ in shape]) for _ in range(n)])
    eta = rng.normal(0, 0.3, (n, len(shape), R))
    lay = make_layout(coords, shape)
    n_obj = int(lay.offsets[-1])
    prior_Lam = np.broadcast_to(np.eye(R), (n_obj, R, R)).copy()
    problem, store, scratch = cp_tuples(lay, y, Lam, eta, prior_Lam=prior_Lam)
    K.rebuild_full(problem, store, scratch, 0, n_obj, True)
    assert not scratch.bad.any()
    return lay, y, Lam, eta, store.P_Lam, store.P_eta, store.M, store.E2


@pytest.mark.parametrize("model", ["cp_gaussian", "cp_probit"])
@pytest.mark.parametrize("shape, R", [((4, 3, 5), 1), ((4, 3, 5), 2), ((3, 4), 3)])
def test_sweep_matches_textbook_per_entry_and_noise_is_ceps(rng, model, shape, R):
    n, rho = 30, 0.6
    lay, y, Lam, eta, P_Lam, P_eta, M, E2 = sweep_state(rng, model, shape, R, n)
    Kmodes = len(shape)
    want_L, want_e, want_skip = Lam.copy(), eta.copy(), 0
    for e in range(n):
        o = lay.gidx[e]
        Lc = np.stack([P_Lam[o[k]] - Lam[e, k] for k in range(Kmodes)])
        ec = np.stack([P_eta[o[k]] - eta[e, k] for k in range(Kmodes)])
        x0 = np.concatenate([M[o[k]] for k in range(Kmodes)])
        _, Ln, en, pd, _ = naive.cp_lp_messages(model, y[e], y[e], ETAU, Lc, ec, x0)
        if not pd:
            want_skip += Kmodes
            continue
        want_L[e] = (1 - rho) * Lam[e] + rho * Ln
        want_e[e] = (1 - rho) * eta[e] + rho * en
    for k_lo, k_hi in ((0, Kmodes), (1, 2)):  # the parallel schedule, one block of the block schedule
        L2, e2 = Lam.copy(), eta.copy()
        a2, b2 = np.full(n, 0.3), np.full(n, 0.7)
        tuples = cp_tuples(
            lay, y, L2, e2, P_Lam, P_eta, M, None, E2, code=CODE[model], alpha=a2, beta=b2, lp=True,
            lp_rule=L.LP_APPLY, with_noise=model == "cp_gaussian",
        )  # fmt: skip
        sk = tuples[2].skipped
        L.sweep_lp(*tuples, k_lo, k_hi, ETAU, rho, ENTRY_CHUNK)
        sl = slice(k_lo, k_hi)
        np.testing.assert_allclose(L2[:, sl], want_L[:, sl], rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(e2[:, sl], want_e[:, sl], rtol=1e-9, atol=1e-12)
        others = [k for k in range(Kmodes) if not k_lo <= k < k_hi]
        np.testing.assert_array_equal(L2[:, others], Lam[:, others])
        assert sk.sum() == want_skip * (k_hi - k_lo) // Kmodes
        if model == "cp_gaussian":  # the noise messages are CEP's, bit for bit
            a3, b3 = np.full(n, 0.3), np.full(n, 0.7)
            K.noise_messages_full(
                *cp_tuples(lay, y, L2, e2, P_Lam, P_eta, M, None, E2, alpha=a3, beta=b3)[:2], rho
            )
            np.testing.assert_array_equal(a2, a3)
            np.testing.assert_array_equal(b2, b3)


# ------------------------------------------------------------------ fit
def gaussian_split(seed, shape=(15, 12, 10), rank=2):
    n = int(np.prod(shape) * 0.5)
    T, factors = make_cp_tensor(shape, rank, n, noise_sd=0.1, seed=seed)
    f = np.prod([factors[k][T.coords[:, k]] for k in range(3)], axis=0).sum(1)
    perm = np.random.default_rng(0).permutation(n)
    tr, te = perm[: int(0.8 * n)], perm[int(0.8 * n) :]
    floor = np.sqrt(np.mean((f[te] - T.values[te]) ** 2))
    return T, tr, te, floor


def test_fit_lp_clip_reaches_the_noise_floor():
    # One generating seed: LP is erratic. On seeds 1, 2 and 4 of this design the same call
    # settles in fixed points 5-50x the noise floor (CEP-1: <= 1.09x on all five), with every
    # policy and schedule, also at rank 1 where no message is clipped (the paper's "poor local
    # maxima"); this test holds the implementation to CEP-1's answer where LP does find it.
    T, tr, te, floor = gaussian_split(5)
    kw = dict(model="cp_gaussian", shape=T.shape, rank=2, seed=0, max_iter=100)
    lp = fastcep.fit(T.coords[tr], T.values[tr], method="lp", lp_indefinite="clip", **kw)
    cep = fastcep.fit(T.coords[tr], T.values[tr], **kw)
    assert lp.converged and lp.method == "lp" and lp.options["lp_indefinite"] == "clip"
    assert lp.rmse(T.coords[te], T.values[te]) <= 1.1 * floor
    assert lp.rmse(T.coords[te], T.values[te]) == pytest.approx(
        cep.rmse(T.coords[te], T.values[te]), rel=0.01
    )
    a, b = lp.posterior.noise
    assert 80 < a / b < 125  # true precision 100
    for k in range(3):
        assert np.all(np.linalg.eigvalsh(lp.posterior.covs[k]) > 0)


def test_fit_lp_skip_applies_no_message_at_rank_two():
    """The engine's rule (never apply a non-positive-definite message) with LP at R >= 2: a
    Laplace message is indefinite unless h' = 0 at the mode, so almost none is applied and the
    fit stays near its start (measured: 4 of 2,160 applied in the first iteration, none after)."""
    T, tr, te, floor = gaussian_split(5)
    n = len(tr)
    res = fastcep.fit(
        T.coords[tr],
        T.values[tr],
        model="cp_gaussian",
        method="lp",
        lp_indefinite="skip",
        shape=T.shape,
        rank=2,
    )
    assert res.options["lp_indefinite"] == "skip"
    assert np.all(res.trace.skipped >= 0.99 * 3 * n)
    assert res.rmse(T.coords[te], T.values[te]) > 3 * floor


def test_fit_lp_probit_learns_and_is_deterministic():
    T, _ = make_cp_tensor((20, 15, 10), 2, 1500, binary=True, seed=3, factor_scale=1.2)
    kw = dict(
        model="cp_probit", method="lp", lp_indefinite="clip", shape=T.shape, rank=2, seed=1, max_iter=15
    )
    r1 = fastcep.fit(T.coords, T.values, n_threads=1, **kw)
    r2 = fastcep.fit(T.coords, T.values, n_threads=2, **kw)
    r3 = fastcep.fit(T.coords, T.values, n_threads=2, **kw)
    for k in range(3):
        np.testing.assert_array_equal(r1.posterior.means[k], r2.posterior.means[k])
        np.testing.assert_array_equal(r1.posterior.covs[k], r2.posterior.covs[k])
        np.testing.assert_array_equal(r2.posterior.means[k], r3.posterior.means[k])
    np.testing.assert_array_equal(r1.trace.skipped, r2.trace.skipped)
    assert r1.auc(T.coords, T.values) > 0.85


def test_fit_lp_gaussian_thread_count_invariance_block_schedule():
    T, tr, _, _ = gaussian_split(3)
    kw = dict(model="cp_gaussian", method="lp", lp_indefinite="apply", schedule="block", shape=T.shape)
    r1 = fastcep.fit(T.coords[tr], T.values[tr], rank=2, seed=4, max_iter=5, n_threads=1, **kw)
    r2 = fastcep.fit(T.coords[tr], T.values[tr], rank=2, seed=4, max_iter=5, n_threads=2, **kw)
    for k in range(3):
        np.testing.assert_array_equal(r1.posterior.means[k], r2.posterior.means[k])
        np.testing.assert_array_equal(r1.posterior.covs[k], r2.posterior.covs[k])
    assert r1.posterior.noise == r2.posterior.noise


COORDS = np.array([[0, 0, 0], [1, 2, 3], [2, 1, 0]])
VALUES = np.array([0.5, -1.0, 2.0])


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(schedule="sequential"), "method='lp' supports.*schedule='sequential'"),
        (dict(covariance="diag"), "method='lp' supports.*covariance='diag'"),
        (dict(lp_indefinite="drop"), "'lp_indefinite' parameter"),
        (dict(lp_indefinite=None), "'lp_indefinite' parameter"),
    ],
)
def test_bad_combinations_raise(kw, match):
    with pytest.raises(ValueError, match=match):
        fastcep.fit(COORDS, VALUES, model="cp_gaussian", method="lp", rank=2, **kw)


def test_every_lp_kernel_uses_the_central_options():
    assert central_options_count(L) >= 8


def test_a_fit_stopped_by_max_iter_warns():
    assert_max_iter_warns("lp")
