"""Generic CP models (``model="cp_<likelihood>"``): CEP-1 for any likelihood of the seam through its
tilted moments and a rank-one message (``kernels.tensor.generic_message``), against the textbook
versions of tests/naive.py and against the hand-written probit and Gaussian messages where they
must agree; the model, its options, values, predictions, model file and stream."""

import math

import numpy as np
import pytest
from conftest import same_posterior
from cp_tuples import cp_tuples
from numba import njit
from scipy.special import expit
from scipy.stats import norm
from test_cp_kernels import kernel_state, random_state, spd

import fastcep
import naive
from fastcep import _models as M
from fastcep import _options as O
from fastcep._quadrature import gauss_hermite
from fastcep.kernels import tensor as K
from fastcep.kernels.likelihoods import REGISTRY, Gaussian, Logistic, Probit
from fastcep.tensor import engine as E
from fastcep.tensor import likelihoods as CPL
from fastcep.tensor.engine import ENTRY_CHUNK

RULE = gauss_hermite(CPL.GENERIC_NODES)


def generic(lik):
    """The trailing driver arguments of the generic model of ``lik``."""
    return (lik, *RULE)


def logistic_tilted(y, m, v):
    return naive.tilted_by_grid(naive.logistic_log_lik, y, m, v)


@njit
def _cp_tilted(lik, y, m, v, nodes, weights):
    return K.cp_tilted(lik, y, m, v, nodes, weights)


def logistic_kernel_tilted(y, m, v):
    """The logistic's tilted as the generic kernels take it (``kernels.tensor.tilted``)."""
    return _cp_tilted(Logistic(), y, m, v, *RULE)


def scratch(R):
    return np.empty((K.PROBIT_MATS, R, R)), np.empty((K.PROBIT_VECS, R))


def binary_tensor(shape=(9, 8, 7), n=320, R=2, seed=3):
    """A small binary tensor: coords (n, K), labels {0, 1}, shape."""
    rng = np.random.default_rng(seed)
    U = [rng.normal(size=(d, R)) for d in shape]
    coords = np.stack([rng.integers(0, d, n) for d in shape], axis=1)
    f = np.sum(np.prod([U[k][coords[:, k]] for k in range(len(shape))], axis=0), axis=1)
    return coords, (f + 0.3 * rng.normal(size=n) > 0).astype(float), shape


# ---------------------------------------------------------------- the leaves against the textbook
@pytest.mark.parametrize("R", [1, 3, 6])
def test_generic_message_matches_naive(rng, R):
    """The whitened rank-one message equals the textbook one (explicit inverses) for the probit's
    closed form and the logistic's tilted (the kernel's own, and a dense grid's); it is always
    valid (log-concave likelihoods) and its precision is rank one along E[z]."""
    cases = (
        (Probit(), naive.probit_tilted, 1e-9),
        (Logistic(), logistic_kernel_tilted, 1e-9),
        (Logistic(), logistic_tilted, 1e-8),
    )
    for lik, tilted, tol in cases:
        for _ in range(120):
            Lc = spd(rng, R, rng.uniform(0.5, 5))
            ec = rng.normal(size=R)
            Ez = rng.normal(size=R) * 0.7
            Ezz = spd(rng, R, 0.1) + np.outer(Ez, Ez)
            y = float(rng.choice([-1.0, 1.0]))
            ref = naive.cp_generic_message(tilted, y, Lc, ec, Ez, Ezz)
            assert ref is not None
            Lm, em = np.empty((R, R)), np.empty(R)
            assert K.generic_message(lik, y, Lc, ec, Ez, Ezz, Lm, em, *scratch(R), *RULE)
            scale = np.max(np.abs(ref[0])) + 1e-300
            np.testing.assert_allclose(Lm, ref[0], rtol=tol, atol=tol * scale)
            np.testing.assert_allclose(em, ref[1], rtol=tol, atol=tol * (np.max(np.abs(ref[1])) + 1e-300))
            a = Lm[0, 0] / Ez[0] ** 2
            assert a > 0
            np.testing.assert_allclose(Lm, a * np.outer(Ez, Ez), rtol=1e-12, atol=1e-14 * scale)


def test_generic_coord_matches_naive(rng):
    cases = (
        (Probit(), naive.probit_tilted, 1e-10),
        (Logistic(), logistic_kernel_tilted, 1e-10),
        (Logistic(), logistic_tilted, 1e-8),
    )
    for lik, tilted, tol in cases:
        for _ in range(300):
            tc, nc = rng.uniform(0.3, 4), rng.normal()
            x, b = rng.normal(), rng.normal()
            ezz = x * x + rng.uniform(0, 1)
            y = float(rng.choice([-1.0, 1.0]))
            ref = naive.cp_generic_coord(tilted, y, tc, nc, x, b, ezz)
            out = np.empty(2)
            assert K.generic_coord(lik, y, tc, nc, x, b, ezz, *RULE, out)
            np.testing.assert_allclose(out, ref, rtol=tol, atol=tol)


@pytest.mark.parametrize("v", [1e-6, 0.01, 1.0, 3.0, 10.0, 30.0, 100.0, 1e4])
def test_the_generic_tilted_is_accurate_for_any_cavity_width(rng, v):
    """The logistic's tilted moments (``kernels.tensor.tilted``: the trapezoid rule on the
    tilted's own support) against a dense grid, for cavities narrow and wide: the tilted mean
    to 1e-12 tilted sds, its variance and log Z to 1e-10 (the seam's 32-node Gauss-Hermite rule
    on the cavity is off by 3e-2 in the variance at v = 10 and by more than the variance itself
    at v = 30)."""
    for _ in range(25):
        m = rng.normal() * (1 + math.sqrt(v)) * 1.5
        y = float(rng.choice([-1.0, 1.0]))
        ref = naive.tilted_by_grid(naive.logistic_log_lik, y, m, v, n_grid=200_001)
        got = logistic_kernel_tilted(y, m, v)
        mean_r, var_r = m + v * ref[1], v - v * v * ref[2]
        mean_k, var_k = m + v * got[1], v - v * v * got[2]
        if v >= 0.01:  # (below, the grid's own v - Var[a] cancels)
            assert abs(mean_k - mean_r) <= 1e-12 * math.sqrt(var_r) + 1e-13 * abs(m)
            assert abs(var_k - var_r) <= 1e-10 * var_r
        assert abs(got[0] - ref[0]) <= 1e-10 * (1 + abs(ref[0]))
        assert got[2] > 0 and got[2] * v < 1


def test_a_wide_cavity_or_an_improper_one_gives_no_message():
    """Not positive definite cavity, or a zero E[z] (the likelihood does not reach u): no
    message (counted as skipped by the drivers), never NaN."""
    R = 2
    Lm, em, out = np.empty((R, R)), np.empty(R), np.empty(2)
    bad = np.array([[1.0, 2.0], [2.0, 1.0]])
    ok = K.generic_message(
        Logistic(), 1.0, bad, np.zeros(R), np.ones(R), np.eye(R), Lm, em, *scratch(R), *RULE
    )
    assert not ok
    assert not K.generic_message(
        Logistic(), 1.0, np.eye(R), np.zeros(R), np.zeros(R), np.zeros((R, R)), Lm, em, *scratch(R), *RULE
    )
    assert not K.generic_coord(Logistic(), 1.0, -1.0, 0.0, 1.0, 0.0, 1.0, *RULE, out)
    assert not K.generic_coord(Logistic(), 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, *RULE, out)


# ---------------------------------------------------------------- probit: generic == hand-written
@pytest.mark.parametrize("shape", [(4, 3, 5), (3, 4)])
@pytest.mark.parametrize("R", [1, 3])
def test_probit_through_the_generic_drivers_equals_the_rank_one_probit(rng, shape, R):
    """The probit's closed-form tilted through the generic message is cp_probit's rank-one
    message: the parallel sweep, the cavity sweep and the diagonal coordinate sweep agree to
    rounding."""
    n, rho, prior_var = 40, 0.6, 1.5
    Km = len(shape)
    coords, y, Lam, eta = random_state(rng, shape, R, n, "cp_probit")
    lay, P_Lam, P_eta, M, S, E2 = kernel_state(coords, shape, Lam, eta, prior_var, "full")
    got = {}
    for code, lik in ((K.MODEL_PROBIT_RANK1, None), (K.MODEL_GENERIC, Probit())):
        rule = None if lik is None else RULE
        L2, e2 = Lam.copy(), eta.copy()
        tuples = cp_tuples(lay, y, L2, e2, P_Lam, P_eta, M, S, E2, code=code, rule=rule)
        K.sweep_full(*tuples, 0, Km, 1.0, rho, ENTRY_CHUNK, lik)
        Lc, ec = Lam.copy(), eta.copy()
        cav = cp_tuples(lay, y, Lc, ec, P_Lam, P_eta, M, S, E2, code=code, rule=rule, cavity=True)
        K.sweep_cavity_full(*cav, 0, Km, 1.0, rho, ENTRY_CHUNK, lik)
        got[code] = (L2, e2, int(tuples[2].skipped.sum()), Lc, ec, int(cav[2].skipped.sum()))
    a, b = got[K.MODEL_PROBIT_RANK1], got[K.MODEL_GENERIC]
    for i in (0, 1, 3, 4):
        np.testing.assert_allclose(b[i], a[i], rtol=1e-11, atol=1e-13)
    assert (a[2], a[5]) == (b[2], b[5])
    # diagonal covariances, coordinate by coordinate
    Lam_d = rng.uniform(0.05, 0.5, (n, Km, R))
    lay, P_Lam, P_eta, M, S, E2 = kernel_state(coords, shape, Lam_d, eta, prior_var, "diag")
    for k in range(Km):
        for r in range(R):
            outs = []
            for code, lik in ((K.MODEL_PROBIT_RANK1, None), (K.MODEL_GENERIC, Probit())):
                L2, e2 = Lam_d.copy(), eta.copy()
                tuples = cp_tuples(
                    lay, y, L2, e2, P_Lam, P_eta, M, S, E2, code=code, rule=None if lik is None else RULE
                )
                K.sweep_diag_coord(*tuples, k, r, 1.0, rho, ENTRY_CHUNK, lik)
                outs.append((L2, e2, int(tuples[2].skipped.sum())))
            np.testing.assert_allclose(outs[1][0], outs[0][0], rtol=1e-11, atol=1e-13)
            np.testing.assert_allclose(outs[1][1], outs[0][1], rtol=1e-11, atol=1e-13)
            assert outs[0][2] == outs[1][2]


def _forcing(monkeypatch):
    """Route cp_probit through the generic path (the probit's closed-form tilted in the generic
    message) for the fits that follow; returns the list of models it routed."""
    routed = []
    hand_written = CPL.kernel_model

    def kernel_model(model, probit_curvature="full", likelihood=None):
        if model == "cp_probit":
            routed.append(model)
            return K.MODEL_GENERIC, generic(Probit())
        return hand_written(model, probit_curvature, likelihood)

    monkeypatch.setattr(E, "kernel_model", kernel_model)
    return routed


@pytest.mark.parametrize(
    "opts",
    [
        {},  # the defaults: learned Wishart prior, the cavity's expectations, parallel schedule
        {"schedule": "block"},
        {"schedule": "sequential"},
        {"covariance": "diag"},
        {"prior": "fixed", "expect_under": "posterior"},
    ],
    ids=["defaults", "block", "sequential", "diag", "fixed-posterior"],
)
def test_probit_fit_through_the_generic_path_equals_the_hand_written_one(monkeypatch, opts):
    """Exactness: a cp_probit fit whose messages go through the generic path (the Probit class's
    closed-form tilted) has the posterior of the hand-written rank-one fit to 1e-8."""
    coords, y, shape = binary_tensor()
    kw = dict(model="cp_probit", shape=shape, rank=3, probit_curvature="rank1", max_iter=30, tol=0.0, seed=1)
    ref = fastcep.fit(coords, y, **kw, **opts)
    routed = _forcing(monkeypatch)
    got = fastcep.fit(coords, y, **kw, **opts)
    assert routed == ["cp_probit"]
    assert got.n_iter == ref.n_iter == 30
    assert int(got.trace.skipped.sum()) == int(ref.trace.skipped.sum())
    for k in range(len(shape)):
        np.testing.assert_allclose(got.posterior.means[k], ref.posterior.means[k], rtol=0, atol=1e-8)
        np.testing.assert_allclose(got.posterior.covs[k], ref.posterior.covs[k], rtol=0, atol=1e-8)
    # the two paths are different code: not bitwise the same
    assert any(not np.array_equal(got.posterior.means[k], ref.posterior.means[k]) for k in range(len(shape)))


def test_probit_stream_through_the_generic_path_equals_the_hand_written_one(monkeypatch):
    coords, y, shape = binary_tensor()
    kw = dict(model="cp_probit", shape=shape, rank=3, batch_size=100, probit_curvature="rank1", seed=2)
    ref = fastcep.stream(coords, y, **kw)
    routed = _forcing(monkeypatch)
    got = fastcep.stream(coords, y, **kw)
    assert routed == ["cp_probit"] * 4  # (one engine per batch)
    for k in range(len(shape)):
        np.testing.assert_allclose(got.posterior.means[k], ref.posterior.means[k], rtol=0, atol=1e-8)
        np.testing.assert_allclose(got.posterior.covs[k], ref.posterior.covs[k], rtol=0, atol=1e-8)


# ---------------------------------------------------------------- Gaussian: generic vs hand-written
def test_gaussian_through_the_generic_message_is_the_hand_written_one_when_the_other_modes_are_known(rng):
    """A Gaussian likelihood of known variance 1 / E[tau] through the generic path gives
    cp_gaussian's message Lam* = E[tau] E[z z^T], eta* = y E[tau] E[z] exactly when the other
    modes carry no uncertainty (E[z z^T] = E[z] E[z]^T; full and diagonal covariances): the
    generic message's beta / (1 - beta Ez^T Sc Ez) is then E[tau] and its shift y E[tau].

    With uncertain other modes they differ, by design: the hand-written message is the exact
    expectation of the conditional message E[tau] z z^T (linear in z z^T, so CEP-1 gets it
    exactly: full rank, E[z z^T]); the generic one replaces z by E[z] in the message (rank one,
    E[z] E[z]^T) and lets the other modes' spread enter only through the variance
    v_a = tr(Sc E[z z^T]) of a = u.z under the cavity, which also makes it depend on the cavity.
    """
    etau, rho = 2.5, 1.0
    for R, Km in ((1, 2), (3, 3), (4, 4)):
        n_obj = 3 * Km
        M = rng.normal(size=(n_obj, R))
        gidx = np.arange(Km, dtype=np.int64) * 3 + rng.integers(0, 3, Km)
        P_Lam = np.stack([spd(rng, R, 2.0) for _ in range(n_obj)])
        P_eta = rng.normal(size=(n_obj, R))
        for spread in (0.0, 0.3):
            E2 = np.stack([spread * spd(rng, R) + np.outer(m, m) for m in M])
            y = rng.normal()
            out = []
            for code, extra in ((K.MODEL_GAUSSIAN, ()), (K.MODEL_GENERIC, generic(Gaussian(1.0 / etau)))):
                Lam_e, eta_e = np.zeros((Km, R, R)), np.zeros((Km, R))
                mat, vec = np.empty((K.ENTRY_MATS, R, R)), np.empty((K.ENTRY_VECS, R))
                skipped = K.entry_update(
                    code, gidx, gidx, 0, Km, y, 0.0, Lam_e, eta_e, P_Lam, P_eta, M, E2, etau, rho, mat, vec,
                    *extra,
                )  # fmt: skip
                assert skipped == 0
                out.append((Lam_e, eta_e))
            if spread == 0.0:
                np.testing.assert_allclose(out[1][0], out[0][0], rtol=1e-10, atol=1e-12)
                np.testing.assert_allclose(out[1][1], out[0][1], rtol=1e-10, atol=1e-12)
            else:
                assert np.abs(out[1][0] - out[0][0]).max() > 1e-3
    # diagonal covariances: coordinate r of the mode-k object, E2d = M^2 (no spread)
    Km, R = 3, 3
    M = rng.normal(size=(3 * Km, R))
    gidx = np.arange(Km, dtype=np.int64) * 3
    P_Lam, P_eta = rng.uniform(0.5, 2, (3 * Km, R)), rng.normal(size=(3 * Km, R))
    for k in range(Km):
        for r in range(R):
            out = []
            for code, extra in ((K.MODEL_GAUSSIAN, ()), (K.MODEL_GENERIC, generic(Gaussian(1.0 / etau)))):
                Lam_e, eta_e, o2 = np.zeros((Km, R)), np.zeros((Km, R)), np.empty(2)
                assert not K.coord_update_diag(
                    code, gidx, k, r, 0.7, 0.0, Lam_e, eta_e, P_Lam, P_eta, M, M * M, etau, rho, o2, *extra
                )
                out.append((Lam_e[k, r], eta_e[k, r]))
            np.testing.assert_allclose(out[1], out[0], rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------- the model
def test_the_generic_models_follow_the_registry():
    assert M.CP_GENERIC == tuple(f"cp_{name}" for name in REGISTRY if name not in ("probit", "gaussian"))
    assert "cp_logistic" in O.choices("model", "cp") and "cp_logistic" in O.choices("model", "stream")
    assert CPL.kernel_model("cp_logistic")[0] == K.MODEL_GENERIC
    assert isinstance(CPL.kernel_model("cp_logistic")[1][0], Logistic)
    assert CPL.kernel_model("cp_probit", "rank1") == (K.MODEL_PROBIT_RANK1, ())
    assert M.shorthand("cp_logistic").binary and not M.shorthand("cp_gaussian").binary
    # every likelihood of the registry has its public object (its CP model's likelihood)
    assert all(M.shorthand(f"cp_{name}").name == name for name in REGISTRY)


def test_the_same_seed_gives_the_same_fit_on_any_thread_count():
    coords, y, shape = binary_tensor(n=600)
    for opts in ({}, {"covariance": "diag"}):
        kw = dict(model="cp_logistic", shape=shape, rank=3, max_iter=15, seed=4, **opts)
        same_posterior(fastcep.fit(coords, y, n_threads=1, **kw), fastcep.fit(coords, y, n_threads=2, **kw))
    kw = dict(model="cp_logistic", shape=shape, rank=3, batch_size=200, seed=4)
    same_posterior(fastcep.stream(coords, y, n_threads=1, **kw), fastcep.stream(coords, y, n_threads=2, **kw))


def test_cp_logistic_fits_and_predicts(rng):
    """A cp_logistic fit learns the labels (AUC as cp_probit's) and predicts P(y = 1) =
    E[sigmoid(f)] under the predictive N(f | mean, var); log_likelihood is the mean log
    predictive of the labels; return_var gives P (1 - P)."""
    coords, y, shape = binary_tensor(n=600)
    tr, te = slice(0, 450), slice(450, 600)
    res = fastcep.fit(
        coords[tr], y[tr], model="cp_logistic", shape=shape, rank=3, seed=0, eval_set=(coords[te], y[te])
    )
    probit = fastcep.fit(coords[tr], y[tr], model="cp_probit", shape=shape, rank=3, seed=0)
    assert res.options["prior"] == "wishart" and res.options["expect_under"] == "cavity"
    auc = res.auc(coords[te], y[te])
    assert auc > 0.8 and abs(auc - probit.auc(coords[te], y[te])) < 0.05
    assert res.trace.eval_metric[-1] == pytest.approx(auc)
    p, pv = res.predict(coords[te], return_var=True)
    np.testing.assert_allclose(pv, p * (1 - p))
    mean, var = res._f_moments(coords[te])
    ref = [
        naive.tilted_by_grid(naive.logistic_log_lik, 1.0, m, v)[0] if v > 0 else math.log(expit(m))
        for m, v in zip(mean, var, strict=True)
    ]
    np.testing.assert_allclose(p, np.exp(ref), rtol=1e-9)
    logp = np.where(y[te] > 0, np.log(p), np.log1p(-p))
    assert res.log_likelihood(coords[te], y[te]) == pytest.approx(float(np.mean(logp)), rel=1e-8)
    assert res.log_likelihood(coords[te], 2 * y[te] - 1) == res.log_likelihood(coords[te], y[te] > 0)


def test_generic_predictive_moments_of_a_real_valued_likelihood(rng):
    """E[y] and Var[y] from the public likelihood's closed forms (``mean_var``): for the Gaussian
    (mean, var + noise variance); its log predictive is the Gaussian's."""
    mean, var = rng.normal(size=20), rng.uniform(0.01, 3, 20)
    ey, vy = CPL.predictive_moments(fastcep.likelihoods.Gaussian(var=0.3), mean, var)
    np.testing.assert_array_equal(ey, mean)
    np.testing.assert_array_equal(vy, var + 0.3)
    y = rng.normal(size=20)
    np.testing.assert_allclose(
        CPL.log_predictive(Gaussian(0.3), y, mean, var), norm.logpdf(y, mean, np.sqrt(var + 0.3)), rtol=1e-12
    )


def test_the_options_of_the_generic_models():
    """The learned prior and the cavity's expectations as for cp_probit; method 'cep1' only; the
    probit curvature is cp_probit's; the stream's per-model defaults are those of the
    hand-written model of the same kind of values."""
    o = O.validate("fit", "cp", "cp_logistic", "cep1", {"rank": 2})
    assert (o["prior"], o["expect_under"], o["probit_curvature"]) == ("wishart", "cavity", "full")
    o = O.validate("fit", "cp", "cp_logistic", "cep1", {"rank": 2, "covariance": "diag"})
    assert (o["prior"], o["expect_under"]) == ("ard", "posterior")
    s = O.validate("stream", "stream", "cp_logistic", "cep1", {"rank": 2})
    p = O.validate("stream", "stream", "cp_probit", "cep1", {"rank": 2})
    assert {k: s[k] for k in ("damping", "max_iter", "prior_mean", "prior", "expect_under")} == {
        k: p[k] for k in ("damping", "max_iter", "prior_mean", "prior", "expect_under")
    }
    coords, y, shape = binary_tensor(n=60)
    for method in ("lp", "vmp", "cp_wopt"):
        with pytest.raises(ValueError, match="model='cp_logistic' supports method='cep1' only"):
            fastcep.fit(coords, y, model="cp_logistic", method=method, shape=shape, rank=2)
    with pytest.raises(ValueError, match="supports method='cep1' only"):
        fastcep.stream(coords, y, model="cp_logistic", method="post", shape=shape, rank=2)
    with pytest.raises(ValueError, match="probit_curvature='rank1' applies to model='cp_probit'"):
        fastcep.fit(coords, y, model="cp_logistic", shape=shape, rank=2, probit_curvature="rank1")


def test_the_values_are_checked_by_the_likelihood():
    coords, y, shape = binary_tensor(n=60)
    bad = y.copy()
    bad[5] = 0.5
    with pytest.raises(ValueError, match="values"):
        fastcep.fit(coords, bad, model="cp_logistic", shape=shape, rank=2)
    # labels in any binary form give the same fit
    a = fastcep.fit(coords, y, model="cp_logistic", shape=shape, rank=2, max_iter=5)
    b = fastcep.fit(coords, y > 0, model="cp_logistic", shape=shape, rank=2, max_iter=5)
    same_posterior(a, b)
    # a count likelihood's own check (its public object's): integers >= 0
    counts = np.array([0.0, 3.0, 1.0])
    poisson = fastcep.likelihoods.Poisson()
    np.testing.assert_array_equal(CPL.check_values(counts, 3, poisson, "fit"), counts)
    for wrong in ([0.0, -1.0, 2.0], [0.0, 1.5, 2.0]):
        with pytest.raises(ValueError, match="counts"):
            CPL.check_values(np.array(wrong), 3, poisson, "fit")
    assert CPL.block_errors(np.array([0.0, 1.0, 2.0])).tolist() == [2]


def test_a_stream_from_a_file_checks_binary_values(tmp_path):
    coords, y, shape = binary_tensor(n=60)
    path = tmp_path / "t.h5"
    v = y.copy()
    v[7] = 2.0
    fastcep.write_tensor(path, coords, v, shape=shape)
    with pytest.raises(ValueError, match="needs binary values"):
        fastcep.stream(str(path), model="cp_logistic", rank=2)


def test_a_cp_logistic_model_file_round_trips(tmp_path):
    coords, y, shape = binary_tensor(n=200)
    res = fastcep.fit(coords, y, model="cp_logistic", shape=shape, rank=2, max_iter=10)
    fastcep.save_model(res, tmp_path / "m.h5")
    back = fastcep.load_model(tmp_path / "m.h5")
    assert back.model == "cp_logistic"
    np.testing.assert_array_equal(back.predict(coords), res.predict(coords))
    assert back.log_likelihood(coords, y) == res.log_likelihood(coords, y)


def test_count_models_start_on_the_scale_of_f(monkeypatch):
    """A count tensor's start factorises log(1 + y), the log link's scale: sized by the raw counts
    (Alog's reach 2.5e7) the svd start put the first log-rates near 1e7 and the fit ran off at its
    first sweep. The same for the stream's first random means; the other likelihoods keep y."""
    counts = np.array([0.0, 3.0, 2.5e7])
    for lik in (fastcep.likelihoods.Poisson(), fastcep.likelihoods.NegativeBinomial(2.0)):
        np.testing.assert_array_equal(lik.link_values(counts), np.log1p(counts))
    L = fastcep.likelihoods
    for lik in (L.Gaussian(), L.StudentT(), L.Bernoulli()):
        assert lik.link_values(counts) is counts
    # the fit hands those values to its start (stopped there: nothing is compiled)
    seen = []

    class Started(Exception):
        pass

    def initial_means(coords, y, *args):
        seen.append(y)
        raise Started

    monkeypatch.setattr(E, "initial_means", initial_means)
    coords, _, shape = binary_tensor(n=40)
    y = np.round(np.exp(np.random.default_rng(0).uniform(0, 17, 40)))
    with pytest.raises(Started):
        fastcep.fit(coords, y, model="cp_poisson", shape=shape, rank=2)
    np.testing.assert_array_equal(seen[0], np.log1p(y))
    # the stream's first scale: mean square of log(1 + y), not of y
    from fastcep.streaming.adf import first_scale

    R, Km = 2, 3
    want = (np.mean(np.log1p(y) ** 2) / R) ** (1 / (2 * Km))
    assert first_scale(fastcep.likelihoods.Poisson(), y, R, Km) == pytest.approx(want, rel=1e-12)
    assert first_scale(fastcep.likelihoods.Gaussian(), y, R, Km) == pytest.approx(
        (np.mean(y**2) / R) ** (1 / (2 * Km)), rel=1e-12
    )
    assert first_scale(fastcep.likelihoods.Bernoulli(), y, R, Km) == 2.0


def test_a_posterior_that_ran_off_is_an_error_not_a_fit(monkeypatch):
    """A generic model's fit whose training log predictive density is not finite raises (its
    messages can settle by tol on a posterior that ran off: ``bench.cp_count_synthetic``);
    here the density is made NaN, the fit itself being sound."""
    from fastcep.tensor.result import CPResult

    coords, y, shape = binary_tensor(n=200)
    kw = dict(model="cp_logistic", shape=shape, rank=2, max_iter=3)
    assert math.isfinite(fastcep.fit(coords, y, **kw).log_likelihood(coords, y))
    monkeypatch.setattr(CPResult, "log_likelihood", lambda self, coords, values: math.nan)
    with pytest.raises(FloatingPointError, match="cp_logistic posterior ran off .max_iter after 3 "):
        fastcep.fit(coords, y, **kw)


def test_count_models_default_to_the_sequential_schedule():
    """The count likelihoods' parallel and block sweeps run off (``bench.cp_count_synthetic``):
    their default schedule is the sequential one; a given schedule is kept, and the others
    default to parallel."""
    given = {"shape": (3, 4), "rank": 2}
    cases = (("cp_poisson", "sequential"), ("cp_negbin", "sequential"), ("cp_logistic", "parallel"))
    for model, want in cases:
        assert O.validate("fit", "cp", model, "cep1", dict(given))["schedule"] == want
        assert O.validate("fit", "cp", model, "cep1", dict(given, schedule="block"))["schedule"] == "block"
    for model in ("cp_gaussian", "cp_probit", "cp_student_t"):
        assert O.validate("fit", "cp", model, "cep1", dict(given))["schedule"] == "parallel"
    lik = fastcep.likelihoods.NegativeBinomial()
    assert O.validate("fit", "cp", "cp", "cep1", dict(given, likelihood=lik))["schedule"] == "sequential"
