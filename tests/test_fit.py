"""fastcep.fit for regression: invariants, determinism, edge data and bad input."""

import warnings

import numpy as np
import pytest

import fastcep
from fastcep.data_tools import make_regression_simulation
from fastcep.glm.rules import FLAT_PRECISION
from fastcep.kernels import chunk_rows

ALL = [(m, k) for m in ("probit", "logistic") for k in ("cep1", "cep2", "ep")]


@pytest.fixture(scope="module")
def sim():
    return {m: make_regression_simulation(m, "gaussian", n=2000, d=4, seed=3) for m in ("probit", "logistic")}


@pytest.mark.parametrize("model,method", ALL)
def test_fit_contract_and_invariants(sim, model, method):
    X, y, w = sim[model]
    res = fastcep.fit(X, y, model=model, method=method)
    assert res.converged and res.stop_reason == "tol"
    mean, var = res.posterior
    assert mean.shape == var.shape == (4,)
    assert np.all(np.isfinite(mean)) and np.all(var > 0)
    # the truth lies within a few posterior standard deviations
    assert np.all(np.abs(mean - w) < 5 * np.sqrt(var))
    # the intercept (none in the simulation) within a few posterior standard deviations of 0
    b = res.intercept
    assert abs(b.mean) < 5 * np.sqrt(b.var) and 0 < b.var < res.options["intercept_var"]
    # posterior = prior + sum of sites (the intercept: the last, constant feature); all site
    # precisions are non-negative
    st = res.state
    prior_T = np.append(np.ones(4), 1 / res.options["intercept_var"])
    np.testing.assert_allclose(st.T, prior_T + st.sites.tau.sum(0), rtol=1e-12)
    np.testing.assert_allclose(st.N, st.sites.nu.sum(0), rtol=1e-10, atol=1e-12)
    # (the state is the centred fit's: its intercept is b_c, the one at the features' mean)
    bc = res.centered_intercept
    np.testing.assert_allclose(np.append(var, bc.var), 1 / st.T, rtol=1e-15)
    assert b.mean == bc.mean - res.center @ mean and b.var == bc.var + res.center**2 @ var
    assert np.all(st.sites.tau >= 0)
    # trace
    tr = res.trace
    assert len(tr.elapsed) == len(tr.change) == len(tr.skipped) == len(tr.damping) == res.n_iter
    assert np.all(np.diff(tr.elapsed) >= 0) and tr.change[-1] < res.options["tol"]
    # predictions
    p = res.predict_proba(X[:50])
    assert p.shape == (50,) and np.all((p > 0) & (p < 1))
    assert set(np.unique(res.predict(X[:50]))) <= {0, 1}
    ll = res.log_likelihood(X, y)
    assert -0.7 < ll < 0
    assert 0.5 < res.auc(X, y) <= 1


@pytest.mark.parametrize("model,method", ALL)
def test_bitwise_identical_for_1_and_2_threads(model, method):
    X, y, _ = make_regression_simulation(model, "mixture", n=3000, d=6, seed=5)  # 3 chunks
    r1 = fastcep.fit(X, y, model=model, method=method, n_threads=1, max_iter=20)
    r2 = fastcep.fit(X, y, model=model, method=method, n_threads=2, max_iter=20)
    assert np.array_equal(r1.posterior.mean, r2.posterior.mean)
    assert np.array_equal(r1.posterior.var, r2.posterior.var)
    assert np.array_equal(r1.state.sites.tau, r2.state.sites.tau)


def test_repeat_run_same_result_and_thread_count_restored(sim):
    import numba

    X, y, _ = sim["probit"]
    before = numba.get_num_threads()
    a = fastcep.fit(X, y, model="probit", seed=1, n_threads=1)
    assert numba.get_num_threads() == before
    b = fastcep.fit(X, y, model="probit", seed=1)
    assert np.array_equal(a.posterior.mean, b.posterior.mean)


@pytest.mark.parametrize("model,method", ALL)
def test_sequential_schedule_reaches_the_parallel_fixed_point(sim, model, method):
    X, y, _ = sim[model]
    par = fastcep.fit(X, y, model=model, method=method, tol=1e-8, max_iter=3000)
    seq = fastcep.fit(X, y, model=model, method=method, schedule="sequential", damping=1.0, tol=1e-8)
    assert seq.converged
    np.testing.assert_allclose(seq.posterior.mean, par.posterior.mean, rtol=1e-5)
    np.testing.assert_allclose(seq.posterior.var, par.posterior.var, rtol=1e-5)


def test_cep_is_close_to_ep_on_the_simulation(sim):
    for model in ("probit", "logistic"):
        X, y, _ = sim[model]
        ep = fastcep.fit(X, y, model=model, method="ep", fit_intercept=False)  # the paper's model
        for method in ("cep1", "cep2"):
            r = fastcep.fit(X, y, model=model, method=method, fit_intercept=False)
            sd = np.sqrt(ep.posterior.var)
            assert np.all(np.abs(r.posterior.mean - ep.posterior.mean) < 0.05 * sd)
            np.testing.assert_allclose(r.posterior.var, ep.posterior.var, rtol=0.02)


def test_callback_can_stop_and_sees_every_iteration(sim):
    X, y, _ = sim["logistic"]
    seen = []

    def cb(info):
        seen.append(info.iteration)
        assert info.posterior.mean.shape == (4,)
        return info.iteration == 3

    res = fastcep.fit(X, y, model="logistic", callback=cb)
    assert seen == [1, 2, 3] and res.n_iter == 3 and res.stop_reason == "callback" and not res.converged


def test_warm_start_resumes(sim):
    X, y, _ = sim["probit"]
    full = fastcep.fit(X, y, model="probit", damping=0.5, max_iter=40, tol=0)
    part = fastcep.fit(X, y, model="probit", damping=0.5, max_iter=25, tol=0)
    rest = fastcep.fit(X, y, model="probit", damping=0.5, max_iter=15, tol=0, init_state=part.state)
    np.testing.assert_array_equal(rest.posterior.mean, full.posterior.mean)


def test_a_resumed_fit_goes_on_with_the_damping_where_it_was(rng):
    """``damping="auto"`` (the default) halves the damping as the fit goes; ``res.state`` carries
    its position. Before: a resumed fit started undamped again (on this overshooting problem 15
    more sweeps, 85 in all where the uninterrupted fit took 70); now 20 + 20 sweeps are 40,
    bitwise, damping by damping. A fixed damping given to the resumed fit stays the user's."""
    n, d = 60, 40
    X = rng.normal(size=(n, d))
    y = (X @ rng.normal(size=d) > 0).astype(int)
    kw = dict(model="logistic", method="cep1", tol=0)
    full = fastcep.fit(X, y, max_iter=40, **kw)
    part = fastcep.fit(X, y, max_iter=20, **kw)
    assert part.trace.damping[0] == 1.0 and part.state.damping["rho"] == 0.5
    rest = fastcep.fit(X, y, max_iter=20, init_state=part.state, **kw)
    np.testing.assert_array_equal(rest.trace.damping, full.trace.damping[20:])
    np.testing.assert_array_equal(rest.trace.change, full.trace.change[20:])
    np.testing.assert_array_equal(rest.posterior.mean, full.posterior.mean)
    fixed = fastcep.fit(X, y, max_iter=2, init_state=part.state, damping=0.3, **kw)
    assert np.all(fixed.trace.damping == 0.3)


def test_paper_stopping_rule_stops_earlier(sim):
    X, y, _ = sim["probit"]
    conv = fastcep.fit(X, y, model="probit", damping=0.1, tol=1e-8)
    paper = fastcep.fit(X, y, model="probit", damping=0.1, stopping="paper", tol=1e-5)
    assert paper.stop_reason == "paper" and paper.n_iter < conv.n_iter
    assert np.all(np.isfinite(paper.trace.site_change)) and np.all(np.isnan(conv.trace.site_change))


def test_auto_damping_recovers_an_overshooting_problem(rng):
    """p close to n and separable: undamped parallel EP diverges; 'auto' damps down and converges."""
    n, d = 60, 40
    X = rng.normal(size=(n, d))
    y = (X @ rng.normal(size=d) > 0).astype(int)
    res = fastcep.fit(X, y, model="logistic", method="cep1", max_iter=3000)
    assert res.converged
    assert res.log_likelihood(X, y) > -0.7


# ------------------------------------------------------------------ edge data
def test_zero_column_keeps_the_prior_exactly(rng):
    X = rng.normal(size=(300, 3))
    X[:, 1] = 0.0
    y = (X[:, 0] > 0).astype(int)
    for model, method in ALL:
        res = fastcep.fit(X, y, model=model, method=method, prior_var=2.0)
        assert res.posterior.mean[1] == 0.0
        assert res.posterior.var[1] == 2.0
        assert np.all(res.state.sites.tau[:, 1] == 0)


def test_constant_nonzero_column_acts_as_intercept(rng):
    X = np.column_stack([np.ones(2000), rng.normal(size=2000)])
    y = (rng.random(2000) < 0.8).astype(int)  # mostly ones: positive intercept
    res = fastcep.fit(X, y, model="probit", fit_intercept=False)
    assert res.converged and res.posterior.mean[0] > 0.5


@pytest.mark.parametrize("label", [0, 1])
def test_one_class_only(rng, label):
    X = rng.normal(size=(100, 3))
    y = np.full(100, label)
    for model, method in ALL:
        res = fastcep.fit(X, y, model=model, method=method)
        assert res.converged and np.all(np.isfinite(res.posterior.mean))
        assert np.all(res.posterior.var > 0)


def test_perfectly_separable_data_stays_finite(rng):
    X = rng.normal(size=(200, 2))
    y = (X[:, 0] > 0).astype(int)
    X[:, 0] *= 50  # huge margins
    for model, method in ALL:
        if (model, method) == ("logistic", "cep2"):
            # (its second-order term, from the prior's spread of x.w in the thousands, makes every
            # first message's precision negative: a fit that cannot start says so, where it
            # once reported the prior as converged after one sweep)
            with pytest.raises(FloatingPointError, match="every message of sweep [0-9]+ was refused"):
                fastcep.fit(X, y, model=model, method=method, prior_var=100.0)
            continue
        res = fastcep.fit(X, y, model=model, method=method, prior_var=100.0)
        assert np.all(np.isfinite(res.posterior.mean)) and res.converged
        assert res.posterior.mean[0] > 0
        assert np.all(np.isfinite(res.predict_proba(X)))
        assert np.isfinite(res.log_likelihood(X, 1 - y))  # confident and wrong: finite, very low


def test_label_encodings_are_equivalent(sim):
    X, y, _ = sim["probit"]
    ref = fastcep.fit(X, y, model="probit", max_iter=5).posterior.mean
    for yy in (2 * y - 1, y.astype(bool), y.astype(float), y.reshape(-1, 1), list(y)):
        np.testing.assert_array_equal(fastcep.fit(X, yy, model="probit", max_iter=5).posterior.mean, ref)


def test_initial_messages_are_flat():
    X = np.array([[1.0, 0.0], [2.0, 3.0]])
    res = fastcep.fit(X, [0, 1], model="probit", max_iter=1, damping=1e-15, fit_intercept=False)
    np.testing.assert_allclose(
        res.state.sites.tau, [[FLAT_PRECISION, 0], [FLAT_PRECISION, FLAT_PRECISION]], rtol=1e-6
    )


# ------------------------------------------------------------------ bad input
X_OK = np.random.default_rng(0).normal(size=(20, 3))
Y_OK = np.arange(20) % 2


@pytest.mark.parametrize(
    "kwargs,exc,match",
    [
        (dict(X=np.where(np.eye(20, 3) > 0, np.nan, X_OK)), ValueError, "finite.*rows \\[0, 1, 2\\]"),
        (dict(X=np.where(np.eye(20, 3) > 0, np.inf, X_OK)), ValueError, "finite"),
        (dict(X=X_OK[:, 0]), ValueError, "'X' parameter of fit must be a 2-D array"),
        (dict(X=np.empty((0, 3)), y=np.empty(0)), ValueError, "non-empty"),
        (dict(X=np.empty((5, 0))), ValueError, "non-empty"),
        (dict(X=[["a", "b"]] * 20), TypeError, "real numbers"),
        (dict(y=Y_OK[:-1]), ValueError, "one label per row of X \\(20\\). Got 19"),
        (dict(y=np.arange(20) % 3), ValueError, "binary labels.*values \\[2.0\\] at rows \\[2, 5"),
        (dict(y=np.where(Y_OK == 1, 1.0, np.nan)), ValueError, "'y'.*finite"),
        (dict(y=np.array(["a", "b", "c", "d"] * 5)), ValueError, "exactly two classes"),
        (dict(y=np.r_[np.zeros(10), -np.ones(10)] + np.r_[np.zeros(19), 2]), ValueError, "binary labels"),
        (dict(damping=0.0), ValueError, "'damping' parameter of fit must be a finite float > 0.0"),
        (dict(damping=1.5), ValueError, "damping"),
        (dict(damping="fast"), ValueError, "damping"),
        (dict(prior_var=0.0), ValueError, "'prior_var' parameter of fit must be a finite float > 0.0"),
        (dict(prior_var=-1.0), ValueError, "prior_var"),
        (dict(prior_var=np.ones(2)), ValueError, "prior_var"),
        (dict(prior_var=float("nan")), ValueError, "prior_var"),
        (
            dict(tol=-1.0),
            ValueError,
            "'tol' parameter of fit must be a finite float >= 0.0. Got -1.0 instead.",
        ),
        (dict(max_iter=0), ValueError, "max_iter"),
        (dict(max_iter=2.5), TypeError, "max_iter"),
        (dict(model="weibull"), ValueError, "'model' parameter of fit must be one of"),
        (dict(method="magic"), ValueError, "'method' parameter"),
        (dict(schedule="random"), ValueError, "schedule"),
        (dict(stopping="never"), ValueError, "stopping"),
        (dict(n_threads=0), ValueError, "n_threads"),
        (dict(n_threads=10_000), ValueError, "n_threads"),
        (dict(n_nodes=1), ValueError, "n_nodes"),
        (dict(callback=3), TypeError, "callback"),
        (dict(seed=-1), ValueError, "seed"),
    ],
)
def test_bad_input_raises_clear_errors(kwargs, exc, match):
    args = dict(X=X_OK, y=Y_OK, model="probit")
    args.update(kwargs)
    X, y = args.pop("X"), args.pop("y")
    with pytest.raises(exc, match=match):
        fastcep.fit(X, y, **args)


def test_sparse_coordinates_of_a_tensor_are_refused():
    """(a sparse X fits a regression: tests/test_sparse.py)"""
    sp = pytest.importorskip("scipy.sparse")
    coords = sp.csr_matrix(np.array([[0, 1, 2], [1, 0, 0]]))
    with pytest.raises(TypeError, match="coords.*not a sparse matrix"):
        fastcep.fit(coords, np.array([1.0, 2.0]), model="cp_gaussian", shape=(3, 3, 3), rank=2)


def test_bad_input_to_result_methods(sim):
    X, y, _ = sim["probit"]
    res = fastcep.fit(X, y, model="probit", max_iter=3)
    with pytest.raises(ValueError, match="4 columns"):
        res.predict_proba(X[:, :3])
    with pytest.raises(ValueError, match="finite"):
        res.predict_proba(np.full((2, 4), np.nan))
    with pytest.raises(ValueError, match="one label per row"):
        res.log_likelihood(X, y[:-1])
    with pytest.raises(ValueError, match="init_state|messages of shape"):
        fastcep.fit(X[:10], y[:10], init_state=res.state)


# ------------------------------------------------------------------ the intercept
def test_the_intercept_is_the_weight_of_a_constant_feature(rng):
    """fit_intercept=True, center=False is, bitwise, the fit without one on X with a column of
    ones appended whose weight has the prior N(0, intercept_var); the default (center=True) is,
    bitwise, that fit on X - mean(X), whose intercept b_c is reported on the user's scale as
    b = b_c - mean(X).w."""
    X = rng.normal(loc=[0.5, -0.3, 0.2], size=(1500, 3))
    y = (X @ [1.0, -0.5, 0.2] + 1.0 + rng.normal(size=1500) > 0).astype(int)
    # the centre: the column sums of the sweeps' chunks of rows, added in order (so that a
    # cluster's partitions of whole chunks give the same bits), over n
    chunk = chunk_rows(4)
    sums = [X[lo : lo + chunk].sum(axis=0) for lo in range(0, 1500, chunk)]
    xbar = (sums[0] + sums[1]) / 1500
    np.testing.assert_allclose(xbar, X.mean(axis=0), rtol=1e-15)
    for model, method in ALL:
        for center, Xb in ((False, X), (True, X - xbar)):
            Xb = np.column_stack([Xb, np.ones(1500)])
            a = fastcep.fit(X, y, model=model, method=method, intercept_var=30.0, center=center)
            b = fastcep.fit(Xb, y, model=model, method=method, fit_intercept=False, prior_var=[1, 1, 1, 30.0])
            assert a.n_iter == b.n_iter
            fitted = a.centered_intercept if center else a.intercept
            np.testing.assert_array_equal(np.append(a.posterior.mean, fitted.mean), b.posterior.mean)
            np.testing.assert_array_equal(np.append(a.posterior.var, fitted.var), b.posterior.var)
            np.testing.assert_allclose(a.predict_proba(X), b.predict_proba(Xb), rtol=1e-13)
            assert a.log_likelihood(X, y) == pytest.approx(b.log_likelihood(Xb, y), rel=1e-13)
            if center:
                np.testing.assert_array_equal(a.center, xbar)
                mu, v = b.posterior
                assert a.intercept.mean == pytest.approx(mu[3] - xbar @ mu[:3], rel=1e-14)
                assert a.intercept.var == pytest.approx(v[3] + xbar**2 @ v[:3], rel=1e-14)
            else:
                assert a.center is None and a.centered_intercept is None


def test_an_offset_is_learned_by_default(rng):
    """Data with an offset of +2 (about 80 % positives): without an intercept the mean predicted
    P was 0.50; with the default it is the rate of positives, and the log loss that of
    scikit-learn's LogisticRegression (which has an intercept by default)."""
    sklearn = pytest.importorskip("sklearn.linear_model")
    X = rng.normal(size=(5000, 3))
    y = (X @ [0.8, -0.6, 0.3] + 2.0 + rng.logistic(size=5000) > 0).astype(int)
    sk = sklearn.LogisticRegression().fit(X, y).predict_proba(X)[:, 1]
    sk_loss = -np.mean(np.where(y == 1, np.log(sk), np.log1p(-sk)))
    for model in ("probit", "logistic"):
        res = fastcep.fit(X, y, model=model)
        assert res.intercept.mean > 1.0
        assert abs(res.predict_proba(X).mean() - y.mean()) < 0.01
        assert -res.log_likelihood(X, y) < sk_loss + 0.01
        none = fastcep.fit(X, y, model=model, fit_intercept=False)
        assert none.intercept is None and -none.log_likelihood(X, y) > sk_loss + 0.1


def test_estimators_have_an_intercept():
    pytest.importorskip("sklearn")
    X, y, _ = make_regression_simulation("probit", n=500, seed=2)
    est = fastcep.BayesianProbitClassifier().fit(X, y)
    res = fastcep.fit(X, y, model="probit")
    assert est.intercept_ == res.intercept.mean and est.intercept_var_ == res.intercept.var
    est = fastcep.BayesianProbitClassifier(fit_intercept=False).fit(X, y)
    assert est.intercept_ == 0.0 and est.result_.intercept is None


# ------------------------------------------------------------------ not converged
def test_a_fit_stopped_by_max_iter_warns(sim):
    X, y, _ = sim["probit"]
    with pytest.warns(fastcep.ConvergenceWarning, match=r"max_iter=3 before converging.*tol 1.0e-05") as rec:
        res = fastcep.fit(X, y, model="probit", max_iter=3)
    assert not res.converged and res.stop_reason == "max_iter"
    assert rec[0].filename == __file__  # it points at the caller's line
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fastcep.fit(X, y, model="probit")  # converged: silent
        fastcep.fit(X, y, model="probit", max_iter=3, tol=0.0)  # a fixed number of sweeps: silent
        fastcep.fit(X, y, model="probit", max_iter=3, callback=lambda info: info.iteration == 2)


def test_vb_warns_too():
    """(The CP methods' own files hold theirs: ``short_fits.assert_max_iter_warns``.)"""
    X, y, _ = make_regression_simulation("logistic", n=300, d=3, seed=0)
    with pytest.warns(fastcep.ConvergenceWarning, match="logistic/vb"):
        fastcep.fit(X, y, model="logistic", method="vb", max_iter=2)


# ------------------------------------------------------------------ extreme rows
@pytest.mark.parametrize("model", ["probit", "logistic"])
def test_predictions_at_huge_rows_are_the_limit(sim, model):
    """A row s e_j with |s| huge: x.w ~ N(s mu_j, s^2 v_j), and p(y = 1) -> Phi(sign(s) mu_j /
    sqrt(v_j)) for both links (before: NaN or 0.5 beyond 1e155, 0 for both signs at 1e100)."""
    from scipy.stats import norm

    X, y, _ = sim[model]
    res = fastcep.fit(X, y, model=model, fit_intercept=False)
    mu, v = res.posterior
    for s in (1e8, 1e50, 1e100, 1e155, 1e200, 1e300):
        for sign in (1.0, -1.0):
            Z = sign * s * np.eye(4)
            p = res.predict_proba(Z)
            np.testing.assert_allclose(p, norm.cdf(sign * mu / np.sqrt(v)), rtol=1e-6)
            ll = [res.log_likelihood(Z, np.full(4, label)) for label in (0, 1)]
            assert np.all(np.isfinite(ll))
            np.testing.assert_allclose(
                np.exp([res._predictive(Z, np.full(4, c))[1] for c in (-1.0, 1.0)]).sum(0), 1.0
            )


# ------------------------------------------------------------------ degenerate fits
def test_a_tiny_damping_is_not_taken_for_convergence(sim):
    X, y, _ = sim["probit"]
    with pytest.warns(fastcep.ConvergenceWarning):
        res = fastcep.fit(X, y, model="probit", damping=1e-8, max_iter=20)
    assert not res.converged and res.trace.change[0] > 1.0  # the step per unit of damping


@pytest.mark.parametrize("scale_column", [False, True])
def test_features_whose_squares_overflow_are_refused(sim, scale_column):
    X, y, _ = sim["probit"]
    if scale_column:
        X = X.copy()
        X[:, 1] = 1e300  # a constant column
    else:
        X = X * 1e160
    with pytest.raises(ValueError, match=r"X holds values up to .*overflow float64.*rescale X"):
        fastcep.fit(X, y, model="probit")
    res = fastcep.fit(X / 1e160 if not scale_column else X[:, [0, 2, 3]], y, model="probit")
    assert res.converged


# ------------------------------------------------------------------ interoperability
def test_string_labels_as_the_estimators_take_them(sim):
    X, y, _ = sim["logistic"]
    words = np.where(y == 1, "yes", "no")
    a = fastcep.fit(X, words, model="logistic")
    b = fastcep.fit(X, y, model="logistic")
    np.testing.assert_array_equal(a.posterior.mean, b.posterior.mean)  # "yes" (sorted last) is 1
    assert a.options["classes"] == ["no", "yes"]
    assert set(a.predict(X[:20])) <= {"no", "yes"}
    assert a.log_likelihood(X, words) == b.log_likelihood(X, y) and a.auc(X, words) == b.auc(X, y)
    with pytest.raises(ValueError, match=r"classes \['no', 'yes'\]. Got \['maybe'\] at rows \[3\]"):
        a.log_likelihood(X[:5], ["no", "yes", "no", "maybe", "yes"])
    with pytest.raises(ValueError, match="exactly two classes.*Got 3"):
        fastcep.fit(X[:3], ["a", "b", "c"])


def test_a_misspelt_option_names_fit_and_the_option_meant(sim):
    X, y, _ = sim["probit"]
    with pytest.raises(
        TypeError, match=r"^fit\(\) got an unexpected keyword argument 'prior_vra'.*Did you mean 'prior_var'"
    ):
        fastcep.fit(X, y, prior_vra=1.0)


def test_a_resumed_run_counts_its_iterations_on_from_the_checkpoint():
    """``_loop.run(first=k)`` (a fit resumed from a checkpoint after k iterations): the step, the
    callback and the max_iter warning count the fit's iterations k + 1, ..., the trace and
    ``n_iter`` are the run's own (the checkpoint's rows go before them)."""
    from fastcep import _loop

    seen, called = [], []

    def step(it):
        seen.append(it)
        return _loop.StepReport(1.0, 0, True, {})

    with pytest.warns(fastcep.ConvergenceWarning, match="stopped at max_iter=6 before converging"):
        out = _loop.run(
            step, max_iter=6, first=3, tol=1e-3, callback=lambda info: called.append(info.iteration)
        )
    assert seen == called == [4, 5, 6]
    assert out.n_iter == 3 and out.trace.change.shape == (3,) and out.stop_reason == "max_iter"
