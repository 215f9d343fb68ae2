"""Likelihood parameters in CP fits and streams (issue 22): ``model="cp", likelihood=<object or
name>``, known parameters and learned ones (the regression's update, ``fastcep.glm.learn``, from
the entries' posterior marginals), the fitted likelihood in the result, its state, model files
and checkpoints.

The registered likelihood with a parameter is the Gaussian; ``Gaussian()`` (learned variance)
runs the hand-written cp_gaussian, so the tests of the generic path's learned variance take the
generic route by removing that fast path (``generic_gaussian``)."""

import math

import h5py
import numpy as np
import pytest
from conftest import same_posterior
from edits import edited
from scipy.stats import norm

import fastcep
import naive
from fastcep import _models as M
from fastcep import _options as O
from fastcep._quadrature import gauss_hermite
from fastcep.data_tools import make_cp_tensor
from fastcep.glm import learn
from fastcep.kernels.likelihoods import REGISTRY
from fastcep.likelihoods import Bernoulli, Custom, Gaussian
from fastcep.tensor.engine import entry_marginals

NOISE_SD = 0.3
SHAPE = (15, 12, 10)


@pytest.fixture(scope="module")
def tensor():
    """A rank-2 tensor of 900 observed entries with Gaussian noise of sd NOISE_SD."""
    T, _ = make_cp_tensor(SHAPE, rank=2, n_obs=900, noise_sd=NOISE_SD, seed=11)
    return T.coords, T.values


@pytest.fixture
def generic_gaussian(monkeypatch):
    """``model="cp", likelihood=Gaussian()`` (learned variance) through the generic path."""
    monkeypatch.delitem(M.HAND_WRITTEN, "cp_gaussian")


def fit(coords, values, **kw):
    return fastcep.fit(coords, values, **dict(dict(model="cp", shape=SHAPE, rank=2, seed=0), **kw))


def stream(coords, values, **kw):
    return fastcep.stream(coords, values, **dict(dict(model="cp", shape=SHAPE, rank=2, batch_size=300), **kw))


def marginals(res, coords):
    """The textbook marginals of the entries' f under a result's posterior."""
    return naive.cp_entry_marginals(coords, res.posterior.means, res.posterior.covs)


# ---------------------------------------------------------------- the model that runs
def test_model_cp_resolves_to_the_model_that_runs(tensor):
    """A likelihood equal to a hand-written model's runs it (bitwise its shorthand's fit), one
    equal to a generic shorthand's defaults is that shorthand, any other is "cp"."""
    cases = {
        "gaussian": "cp_gaussian",
        Gaussian(): "cp_gaussian",
        "probit": "cp_probit",
        Bernoulli("probit"): "cp_probit",
        "logistic": "cp_logistic",
        Bernoulli("logistic"): "cp_logistic",
        Gaussian(var=0.5): "cp",
    }
    for lik, model in cases.items():
        for family, func in (("cp", "fit"), ("stream", "stream")):
            o = O.validate(func, family, "cp", "cep1", {"rank": 2, "likelihood": lik})
            assert o["model"] == model, lik
            assert o["likelihood"] == (M.resolve("cp", lik)[1])
    o = O.validate("fit", "cp", "cp_gaussian", "cep1", {"rank": 2})
    assert (o["model"], o["likelihood"]) == ("cp_gaussian", Gaussian())
    # the per-model defaults of a stream follow the likelihood's kind of values
    s = O.validate("stream", "stream", "cp", "cep1", {"rank": 2, "likelihood": Gaussian(var=0.5)})
    g = O.validate("stream", "stream", "cp_gaussian", "cep1", {"rank": 2})
    assert (s["damping"], s["max_iter"], s["prior_mean"]) == (g["damping"], g["max_iter"], g["prior_mean"])
    coords, values = tensor
    a = fit(coords, values, likelihood="gaussian", max_iter=4)
    b = fit(coords, values, model="cp_gaussian", max_iter=4)
    assert a.model == b.model == "cp_gaussian"
    same_posterior(a, b)
    assert a.likelihood == b.likelihood
    # cp_gaussian's likelihood: the noise variance its predictions add, E[1 / tau]
    noise_a, noise_b = b.posterior.noise
    assert b.likelihood == Gaussian(var=noise_b / (noise_a - 1.0))
    mean, var = b.predict(coords, return_var=True)
    np.testing.assert_array_equal(var, b._f_moments(coords)[1] + b.likelihood.var)
    # method 'vmp' of a likelihood that is cp_gaussian's
    v = fit(coords, values, likelihood="gaussian", method="vmp", max_iter=3)
    assert v.model == "cp_gaussian" and v.likelihood.var > 0


def test_a_known_variance_gaussian_fits_through_model_cp(tensor):
    """Gaussian(var=...) goes the generic way with its variance fixed: the model "cp", the
    likelihood as given in the result and its state, predictions from its closed forms."""
    coords, values = tensor
    lik = Gaussian(var=NOISE_SD**2)
    res = fit(coords[:700], values[:700], likelihood=lik, eval_set=(coords[700:], values[700:]))
    assert res.model == "cp" and res.converged
    assert res.likelihood == lik and res.state.likelihood == lik
    assert res.options["likelihood"] == {"name": "gaussian", "var": NOISE_SD**2}
    assert res.rmse(coords[:700], values[:700]) < 1.1 * NOISE_SD
    assert res.trace.eval_metric[-1] == pytest.approx(res.rmse(coords[700:], values[700:]))
    m, v = res._f_moments(coords[700:])
    mean, var = res.predict(coords[700:], return_var=True)
    np.testing.assert_array_equal(mean, m)
    np.testing.assert_array_equal(var, v + NOISE_SD**2)
    logp = norm.logpdf(values[700:], m, np.sqrt(v + NOISE_SD**2))
    assert res.log_likelihood(coords[700:], values[700:]) == pytest.approx(float(np.mean(logp)), rel=1e-12)
    # the marginals of the textbook
    ref = marginals(res, coords[700:])
    np.testing.assert_allclose(m, ref[0], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(v, ref[1], rtol=1e-9, atol=1e-12)


# ---------------------------------------------------------------- learned parameters
@pytest.mark.parametrize("opts", [{}, {"covariance": "diag"}], ids=["full", "diag"])
def test_a_learned_variance_recovers_the_noise_variance(generic_gaussian, tensor, opts):
    """The generic Gaussian's learned variance: within a few percent of the simulation's, equal to
    the Gamma update from the final posterior's marginals (the last update follows the last
    sweep), and close to the hand-written cp_gaussian's."""
    coords, values = tensor
    res = fit(coords, values, likelihood=Gaussian(), **opts)
    assert res.model == "cp" and res.converged
    assert res.likelihood.learned == () and res.state.likelihood == res.likelihood
    assert res.options["likelihood"] == {"name": "gaussian", "var": None}
    assert abs(res.likelihood.var / NOISE_SD**2 - 1.0) < 0.05
    ref = naive.gaussian_noise_var(values, *marginals(res, coords))
    assert res.likelihood.var == pytest.approx(ref, rel=1e-9)
    hand = fit(coords, values, model="cp_gaussian", standardize="none", **opts)
    assert abs(res.likelihood.var / hand.likelihood.var - 1.0) < 0.05
    mean, var = res.predict(coords, return_var=True)
    np.testing.assert_array_equal(var, res._f_moments(coords)[1] + res.likelihood.var)


def test_the_updates_equal_the_textbook(rng, tensor):
    """The entries' marginals, the Gamma update and the EM step (``fastcep.glm.learn``) against
    the slow numpy versions of tests/naive.py: the EM maximiser of sum E[log N(y | f, var)] is
    mean((y - m)^2 + s2), found by the bounded search to its tolerance and by a grid."""
    coords, values = tensor
    res = fit(coords, values, model="cp_gaussian", standardize="none", max_iter=5)
    for covariance in ("full", "diag"):
        r = (
            res
            if covariance == "full"
            else fit(coords, values, model="cp_gaussian", covariance="diag", max_iter=5)
        )
        M = np.concatenate(r.posterior.means)
        S = np.concatenate(r.posterior.covs)
        E2 = S + M * M if covariance == "diag" else S + M[:, :, None] * M[:, None, :]
        gidx = np.ascontiguousarray(coords + np.concatenate([[0], np.cumsum(SHAPE)[:-1]])[None, :])
        m, s2 = entry_marginals(gidx, covariance, np.empty(len(coords)), np.empty(len(coords)), M, E2)
        ref = marginals(r, coords)
        np.testing.assert_allclose(m, ref[0], rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(s2, ref[1], rtol=1e-9, atol=1e-12)
    y = rng.normal(size=300) * 1.3 + 0.2
    m, s2 = y + rng.normal(size=300) * 0.4, rng.uniform(0.01, 0.3, 300)
    a, b = learn.gamma_posterior(y, m, s2, 2e-3, 5e-3, total=math.fsum)
    assert a == 2e-3 + 150 and b / a == pytest.approx(
        naive.gaussian_noise_var(y, m, s2, 2e-3, 5e-3), rel=1e-14
    )
    rule = gauss_hermite(learn.EXPECTATION_NODES)
    closed = float(np.mean((y - m) ** 2 + s2))
    for start in (0.05, closed, 3.0):
        got = learn.em_step(
            Gaussian(var=start), "var", start, y, m, s2, *rule, learn.expectation_scratch(300)
        )
        assert got == pytest.approx(closed, rel=1e-6)
    grid, step = naive.em_by_grid(naive.gaussian_log_lik_of, y, m, s2, 0.01, 10.0, n_grid=201)
    assert abs(math.log(grid / closed)) <= 2 * step
    # the learner with CP marginals: the update of a fit
    learner = learn.LikelihoodLearner(
        Gaussian(), values, lambda: marginals(res, coords), rule, prior=(1e-3, 1e-3), total=math.fsum
    )
    assert learner.likelihood.var == pytest.approx(np.var(values))  # (the first value: the data's)
    change = learner.update()
    want = naive.gaussian_noise_var(values, *marginals(res, coords))
    assert learner.likelihood.var == pytest.approx(want, rel=1e-12)
    assert change == pytest.approx(abs(math.log(want / np.var(values))), rel=1e-10)


@pytest.mark.parametrize(
    "opts", [{"covariance": "diag"}, {"schedule": "block"}, {"schedule": "sequential"}, {}], ids=str
)
def test_a_resumed_fit_is_the_uninterrupted_one(generic_gaussian, tensor, opts):
    """16 iterations = 12 + 4 resumed from ``res.state`` (its messages, posterior,
    hyper-posterior and the learned variance), bitwise, the default schedule's per-group sums
    included (the state carries the posterior they formed; before, a resumed fit summed prior +
    messages again in another order: to rounding). A state of another likelihood is refused."""
    coords, values = tensor
    kw = dict(likelihood=Gaussian(), tol=0.0, **opts)
    full = fit(coords, values, max_iter=16, **kw)
    half = fit(coords, values, max_iter=12, **kw)
    more = fit(coords, values, max_iter=4, init_state=half.state, **kw)
    assert half.likelihood != full.likelihood
    same_posterior(more, full)
    assert more.likelihood == full.likelihood and more.state.likelihood == full.state.likelihood
    with pytest.raises(ValueError, match="init_state"):
        fit(coords, values, max_iter=2, init_state=half.state._replace(likelihood=Bernoulli()), **kw)


def test_a_resumed_count_fit_draws_the_orders_the_uninterrupted_one_would():
    """The count models sweep their entries in a seeded random order each iteration (the
    sequential schedule). Before: a resumed fit drew its orders from ``seed`` again, and 12 + 4
    iterations ended 3.6e-3 away from 16 (posterior means); now the state carries the
    generator's position (``CPState.rng_state``): bitwise. The user's ``seed`` generator is
    never moved by a resume, and a state no bit generator takes is refused."""
    T, _ = make_cp_tensor((12, 10, 8), rank=2, n_obs=500, noise_sd=0.1, seed=0)
    y = np.random.default_rng(0).poisson(np.exp(T.values)).astype(float)
    kw = dict(model="cp_poisson", shape=T.shape, rank=2, seed=0, tol=0.0)
    full = fastcep.fit(T.coords, y, max_iter=16, **kw)
    half = fastcep.fit(T.coords, y, max_iter=12, **kw)
    assert half.options["schedule"] == "sequential" and half.state.rng_state["bit_generator"] == "PCG64"
    gen = np.random.default_rng(7)
    before = gen.bit_generator.state
    more = fastcep.fit(T.coords, y, max_iter=4, init_state=half.state, **dict(kw, seed=gen))
    same_posterior(more, full)
    assert gen.bit_generator.state == before
    with pytest.raises(ValueError, match="init_state.*names a numpy bit generator"):
        fastcep.fit(T.coords, y, max_iter=1, init_state=half.state._replace(rng_state={"x": 1}), **kw)


def test_the_thread_count_does_not_change_the_fit_or_the_stream(generic_gaussian, tensor):
    coords, values = tensor
    for opts in ({}, {"covariance": "diag"}):
        one = fit(coords, values, likelihood=Gaussian(), max_iter=12, n_threads=1, **opts)
        two = fit(coords, values, likelihood=Gaussian(), max_iter=12, n_threads=2, **opts)
        same_posterior(one, two)
        assert one.likelihood == two.likelihood
    one = stream(coords, values, likelihood=Gaussian(), n_threads=1)
    two = stream(coords, values, likelihood=Gaussian(), n_threads=2)
    same_posterior(one, two)
    assert one.likelihood == two.likelihood
    np.testing.assert_array_equal(one.state.noise, two.state.noise)


# ---------------------------------------------------------------- streams
def test_a_stream_learns_the_variance_from_its_batches(generic_gaussian, tensor):
    """The running Gamma posterior of the noise precision (the state's noise): a = a0 + n / 2
    after n entries, b its batches' sums; the variance b / a near the simulation's, kept from
    batch to batch. A known variance stays as given."""
    coords, values = tensor
    res = stream(coords, values, likelihood=Gaussian(), max_iter=30)
    assert res.model == "cp"
    a, b = res.state.noise
    assert a == 1e-3 + 0.5 * len(values)
    assert res.likelihood == Gaussian(var=b / a) and res.state.likelihood == res.likelihood
    assert abs(res.likelihood.var / NOISE_SD**2 - 1.0) < 0.1
    # batch by batch: after each, b grows by the batch's sum E[(y - f)^2] / 2
    seen = []
    stream(
        coords,
        values,
        likelihood=Gaussian(),
        max_iter=30,
        callback=lambda i: seen.append(i.result.likelihood.var),
    )
    assert len(seen) == 3 and seen[-1] == res.likelihood.var
    known = stream(coords, values, likelihood=Gaussian(var=0.2))
    assert known.likelihood == Gaussian(var=0.2) and known.state.likelihood is None
    # resumed from its state: the uninterrupted stream
    part = stream(coords, values, likelihood=Gaussian(), max_iter=30, max_batches=2)
    rest = stream(coords, values, likelihood=Gaussian(), max_iter=30, init_state=part.state)
    same_posterior(rest, res)
    assert rest.likelihood == res.likelihood


def test_a_checkpoint_carries_the_learned_variance(generic_gaussian, tensor, tmp_path):
    coords, values = tensor
    ck = tmp_path / "ck.h5"
    kw = dict(likelihood=Gaussian(), checkpoint=ck, checkpoint_every=1)
    full = stream(coords, values, likelihood=Gaussian())
    stream(coords, values, max_batches=2, **kw)
    with h5py.File(ck, "r") as f:
        assert f.attrs["format_version"] >= 4 and "likelihood" in f.attrs
    state, _ = fastcep.io.read_checkpoint(ck, None)
    assert state.likelihood.var > 0 and state.batches_done == 2
    back = stream(coords, values, resume=True, **kw)
    same_posterior(back, full)
    assert back.likelihood == full.likelihood
    # another likelihood does not resume it
    with pytest.raises(fastcep.FileFormatError, match="other settings"):
        stream(coords, values, resume=True, **dict(kw, likelihood=Gaussian(var=0.2)))
    # a checkpoint without the learned values is refused
    stream(coords, values, max_batches=2, **kw)
    with edited(ck) as f:
        del f.attrs["likelihood"]
    with pytest.raises(fastcep.FileFormatError, match="holds no values of the likelihood's learned"):
        stream(coords, values, resume=True, **kw)


def test_an_older_checkpoint_still_resumes(tensor, tmp_path):
    """A version-3 checkpoint (before the likelihood's values) of a model without learned
    generic parameters resumes as before."""
    coords, values = tensor
    ck = tmp_path / "ck.h5"
    kw = dict(model="cp_gaussian", checkpoint=ck)
    full = stream(coords, values, model="cp_gaussian")
    stream(coords, values, max_batches=2, **kw)
    with edited(ck) as f:
        assert "likelihood" not in f.attrs
        f.attrs["format_version"] = 3
    same_posterior(stream(coords, values, resume=True, **kw), full)


# ---------------------------------------------------------------- model files
def test_model_files_carry_the_likelihood(generic_gaussian, tensor, tmp_path):
    coords, values = tensor
    for res in (
        fit(coords, values, likelihood=Gaussian(var=0.1), max_iter=5),
        fit(coords, values, likelihood=Gaussian(), max_iter=5),
        fit(coords, values > 0, model="cp_logistic", max_iter=3),
        stream(coords, values, likelihood=Gaussian()),
    ):
        fastcep.save_model(res, tmp_path / "m.h5")
        back = fastcep.load_model(tmp_path / "m.h5")
        assert back.model == res.model and back.likelihood == res.likelihood
        y = values if not res.likelihood.binary else values > 0
        for a, b in zip(
            back.predict(coords, return_var=True), res.predict(coords, return_var=True), strict=True
        ):
            np.testing.assert_array_equal(a, b)
        assert back.log_likelihood(coords, y) == res.log_likelihood(coords, y)
    with h5py.File(tmp_path / "m.h5", "r") as f:
        assert f.attrs["format_version"] >= 5
    # an older file (version 4: no likelihood) reads with its model's
    res = fit(coords, values > 0, model="cp_logistic", max_iter=3)
    fastcep.save_model(res, tmp_path / "v4.h5")
    with edited(tmp_path / "v4.h5") as f:
        del f.attrs["likelihood"]
        f.attrs["format_version"] = 4
    back = fastcep.load_model(tmp_path / "v4.h5")
    assert back.likelihood == Bernoulli("logistic")
    np.testing.assert_array_equal(back.predict(coords), res.predict(coords))
    # a bad likelihood attribute
    fastcep.save_model(fit(coords, values, likelihood=Gaussian(var=0.1), max_iter=2), tmp_path / "cp.h5")
    for path, bad, match in (
        ("cp.h5", '{"name": "gaussian", "var": -1.0}', "likelihood's parameters"),
        ("cp.h5", '{"name": "nope"}', "a built-in's name"),
        ("v4.h5", '{"name": "probit"}', "likelihood 'probit' for model 'cp_logistic'"),
    ):
        with edited(tmp_path / path) as f:
            f.attrs["likelihood"] = bad
            f.attrs["format_version"] = 5
        with pytest.raises(fastcep.FileFormatError, match=match):
            fastcep.load_model(tmp_path / path)
    with edited(tmp_path / "cp.h5") as f:  # (model "cp" needs its likelihood)
        del f.attrs["likelihood"]
    with pytest.raises(fastcep.FileFormatError, match="missing or unreadable content .*likelihood"):
        fastcep.load_model(tmp_path / "cp.h5")
    with edited(tmp_path / "cp.h5") as f:
        f.attrs["format_version"] = 4
    with pytest.raises(fastcep.FileFormatError, match="model 'cp' without its likelihood"):
        fastcep.load_model(tmp_path / "cp.h5")


# ---------------------------------------------------------------- bad input
def test_bad_likelihoods_raise_clear_errors(tensor, tmp_path):
    coords, values = tensor
    labels = values > 0
    with pytest.raises(ValueError, match="model='cp_probit' names its likelihood"):
        fit(coords, labels, model="cp_probit", likelihood=Bernoulli("probit"))
    with pytest.raises(ValueError, match="model='cp_gaussian' names its likelihood"):
        stream(coords, values, model="cp_gaussian", likelihood=Gaussian(var=0.1))
    with pytest.raises(ValueError, match="model='cp' needs a likelihood"):
        fit(coords, values)
    with pytest.raises(
        ValueError, match="The 'likelihood' parameter of fit must be .* 'gaussian', .*Got 'gauss'"
    ):
        fit(coords, values, likelihood="gauss")
    with pytest.raises(ValueError, match="The 'likelihood' parameter of stream must be"):
        stream(coords, values, likelihood="nope")
    with pytest.raises(TypeError, match="The 'likelihood' parameter of fit must be a likelihood object"):
        fit(coords, values, likelihood=0.3)
    if "poisson" not in REGISTRY:  # (a built-in without compiled leaves yet)
        with pytest.raises(ValueError, match="'poisson' has no compiled leaves in the seam's registry"):
            fit(coords, np.round(np.abs(values) * 3), likelihood="poisson")
    with pytest.raises(ValueError, match="supports method='cep1' only"):
        fit(coords, values, likelihood=Gaussian(var=0.1), method="vmp")
    with pytest.raises(TypeError, match="unexpected keyword argument 'likelihood'"):
        fastcep.fit(np.eye(3), np.array([0, 1, 1]), likelihood="probit")
    with pytest.raises(ValueError, match="must be binary|binary labels"):
        fit(coords, values, likelihood="logistic")
    # a Custom likelihood is not written to a model file
    numba = pytest.importorskip("numba")

    @numba.njit
    def logpdf(y, f):
        return -0.5 * (y - f) ** 2

    res = fit(coords, values, likelihood=Gaussian(var=0.1), max_iter=2)
    res.likelihood = Custom(logpdf)
    with pytest.raises(ValueError, match="a Custom likelihood cannot be written"):
        fastcep.save_model(res, tmp_path / "c.h5")
    assert not (tmp_path / "c.h5").exists()


def test_the_command_line_takes_a_likelihood_name(tensor, tmp_path, monkeypatch, capsys):
    """``fastcep fit/stream --model cp --likelihood NAME``; evaluate scores a non-binary model by
    its likelihood."""
    import json

    from fastcep.cli import main

    coords, values = tensor
    monkeypatch.chdir(tmp_path)
    fastcep.write_tensor("t.h5", coords, values, shape=SHAPE)
    for command in (["fit", "--max-iter", "3"], ["stream", "--batch-size", "300"]):
        argv = [command[0], "t.h5", "-o", "m.h5", "--model", "cp", "--likelihood", "gaussian", "--rank", "2"]
        assert main([*argv, *command[1:], "--json", "--quiet"]) == 0
        assert json.loads(capsys.readouterr().out)["model"] == "cp_gaussian"
    assert main(["evaluate", "m.h5", "t.h5"]) == 0
    assert "(Gaussian predictive)" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["fit", "t.h5", "-o", "m.h5", "--model", "cp", "--likelihood", "nope", "--rank", "2"])


class EMGaussian(fastcep.likelihoods.Likelihood):
    """The Gaussian's leaves under another class: its variance is learned by the EM step (the
    path of the parameters without a conjugate update: a dispersion, a scale)."""

    name = "gaussian"

    def __init__(self, var=None):
        self.var = var
        self.learned = ("var",) if var is None else ()

    def params(self):
        return {"var": self.var}

    def mean_var(self, m, v):
        return m, v + self.var


def test_the_em_objective_is_the_textbook_sum_threaded_or_not():
    """``expected_log_lik``, the objective of a learned parameter: the textbook sum of E[log p(y |
    f)] (the Gaussian's is exact under the rule), in one chunk or several; without threads
    (``em_step``'s choice for one chunk, where a parallel region on a busy core cost a quantum a
    call) the same bits as with them."""
    from fastcep.kernels.glm import generic

    rng = np.random.default_rng(5)
    rule = gauss_hermite(learn.EXPECTATION_NODES)
    lik = Gaussian(var=0.7).kernel()
    for n in (300, 2 * generic.EXPECT_CHUNK + 7):
        y, m, s2 = rng.normal(size=n), rng.normal(size=n), rng.uniform(0.01, 2.0, n)
        part = learn.expectation_scratch(n)
        got = generic.expected_log_lik(lik, y, m, s2, *rule, part)
        want = naive.expected_log_lik(naive.gaussian_log_lik_of(0.7), y, m, s2)
        assert got == pytest.approx(want, rel=1e-12)
        if part.shape[0] == 1:
            assert generic.expected_log_lik_serial(lik, y, m, s2, *rule, part) == got
        else:
            assert part.shape[0] == 3


def test_an_em_learned_parameter_in_a_fit_and_a_stream(tensor):
    """A parameter learned by EM (``glm.learn.em_step``): in a fit, the maximiser of sum E[log
    p(y | f)] under the final marginals (for the Gaussian, mean((y - m)^2 + s2)); in a stream, the
    running average of the batches' estimates of its log, resumed bitwise from the state."""
    coords, values = tensor
    res = fit(coords, values, likelihood=EMGaussian())
    assert res.model == "cp" and isinstance(res.likelihood, EMGaussian) and res.converged
    m, s2 = marginals(res, coords)
    assert res.likelihood.var == pytest.approx(float(np.mean((values - m) ** 2 + s2)), rel=1e-5)
    assert abs(res.likelihood.var / NOISE_SD**2 - 1.0) < 0.05
    full = stream(coords, values, likelihood=EMGaussian(), max_iter=30)
    assert abs(full.likelihood.var / NOISE_SD**2 - 1.0) < 0.15
    part = stream(coords, values, likelihood=EMGaussian(), max_iter=30, max_batches=1)
    rest = stream(coords, values, likelihood=EMGaussian(), max_iter=30, init_state=part.state)
    same_posterior(rest, full)
    assert rest.likelihood == full.likelihood
