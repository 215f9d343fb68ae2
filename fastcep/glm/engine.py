"""Bayesian probit and logistic regression with fully factorised Gaussian messages.

The engine behind ``fastcep.fit(X, y, model="probit" | "logistic", ...)``: it checks the input
once, lays out the fit's ``GLMProblem``, ``GLMState`` and ``GLMScratch``
(``kernels.glm.state``), picks the sweep once from ``SCHEDULES`` and hands a step to the one
iteration loop (``fastcep._loop``). Each step is one call of a Numba driver that sweeps, rebuilds
the posterior and measures the change.
"""

import os
import time

import numpy as np

from .. import _loop
from .. import _options as O
from .. import _validation as V
from .._quadrature import LOGISTIC_NODES, gauss_hermite
from .._threads import ThreadGovernor, num_threads
from ..kernels import chunk_rows
from ..kernels.glm import schedules as S
from ..kernels.glm import sparse as SPK
from ..kernels.glm.state import GLMProblem, GLMScratch, GLMState
from ..likelihoods import Gaussian, StudentT, check_offset, check_scale
from ..likelihoods import resolve as resolve_likelihood
from ..results import RegressionSites, RegressionState, VBState
from . import sparse as SP
from .kjit import KJITSweeps
from .learn import EXPECTATION_NODES, GENERIC_NODES, LearnedParams
from .result import RegressionResult
from .rules import FLAT_PRECISION, Damping, check_feature_scale, outlying_counts
from .vb import VBFit

MODELS = O.choices("model", "regression")
METHODS = O.choices("method", "regression")
#: the signature defaults of ``fit_regression``, from the option table (``fastcep._options``)
DEFAULTS = O.defaults("regression", "cep1")
#: the stop reason of each stopping rule
STOP_REASONS = {"posterior": "tol", "paper": "paper"}
#: sweeps in a row that settle below tol with more than STALE_FRACTION of the messages refused
#: before a fit stops unconverged. Runaway states refuse many: a Poisson count of 1e12 1,210 of
#: 1,600 (sequential sweeps, means of 600, change 0), Gaussian(var=1e-15) 400 of 1,600 (the
#: intercept's). Binary likelihoods are not watched: a bounded likelihood's refused rows lie far
#: on their side of the boundary, where the message they would send is nearly flat; logistic EP
#: on separable data with huge margins settles with 33 or 237 of 600 refused in every sweep at
#: a finite posterior (``test_fit.py::test_perfectly_separable_data_stays_finite``).
STALE_SWEEPS = 3
STALE_FRACTION = 0.1

#: methods "is" and "kjit" stop when the change has not reached a new minimum for this many sweeps
MC_WINDOW = 10
#: a parallel sweep over fewer sites (n d) than this runs without threads (``parallel_step_serial``):
#: a parallel region costs microseconds on a quiet machine and a scheduler quantum on a busy one
SERIAL_SITES = 1 << 17


def _hand_written(likelihood, model, method, offset, n_nodes):
    """Whether the fit runs the hand-written rows of the probit or the logistic (binary labels, no
    offset), else the generic rows of its likelihood. The logistic's EP takes the generic rows
    unless n_nodes is given: its one-dimensional reduction is exact EP (the same posterior as the
    paper's two-dimensional rule to 6e-14 sd) at 1/8.9 of the time (BENCHMARKS.md, issue 22)."""
    if not likelihood.binary or offset.size != 0:
        return False
    return not (model == "logistic" and method == "ep" and n_nodes is None)


def dense_rows(likelihood, model, method, offset, n_nodes):
    """(code, nodes, weights) of a dense fit's row functions: the hand-written rows of the probit
    or the logistic with their quadrature, else the generic rows of the likelihood
    (``kernels.glm.schedules``; code -1: method "kjit", which has a sweep of its own)."""
    if _hand_written(likelihood, model, method, offset, n_nodes):
        rule = LOGISTIC_NODES if n_nodes is None else n_nodes
        nodes, weights = gauss_hermite(rule) if model == "logistic" else gauss_hermite(2)
        return S.METHOD_CODES.get((model, method), -1), nodes, weights
    nodes, weights = gauss_hermite(GENERIC_NODES)  # (any likelihood, and an offset)
    return S.GENERIC_CODES[method], nodes, weights


def sparse_rows(likelihood, model, method, offset, n_nodes):
    """(code, nodes, weights) of a sparse fit's row functions (``glm.sparse.row_code``): the
    hand-written CEP sites of the probit and the logistic where the dense fit takes its
    hand-written rows, else the generic rows."""
    code = SP.row_code(model, method, _hand_written(likelihood, model, method, offset, n_nodes))
    if code in (3, 4):  # (the logistic's hand-written CEP sites)
        return (code, *gauss_hermite(LOGISTIC_NODES if n_nodes is None else n_nodes))
    return (code, *gauss_hermite(GENERIC_NODES))


class StaleWatch:
    """Messages refused while the rest have settled keep stale values: no fixed point, and the
    state no longer moves (STALE_SWEEPS says where this was seen). ``update`` takes a sweep's
    figures and returns (accept, halt) for its ``StepReport``: such a sweep is not converged, and
    STALE_SWEEPS of them in a row end the fit with a warning. Binary likelihoods are not watched
    (``watch`` False)."""

    def __init__(self, watch, n_sites):
        self.watch, self.n_sites, self.stale = watch, n_sites, 0

    def update(self, it, accept, skipped, n_restored, measure, tol):
        settled_with_refusals = (
            self.watch and accept and skipped - n_restored > STALE_FRACTION * self.n_sites and measure < tol
        )
        self.stale = self.stale + 1 if settled_with_refusals else 0
        halt = None
        if self.stale >= STALE_SWEEPS:
            halt = ("refused", (
                f"stopped unconverged at iteration {it}: {int(skipped)} of {self.n_sites} messages were "
                f"refused in each of the last {STALE_SWEEPS} sweeps while the others had settled, so their "
                "sites hold stale messages (see res.trace.skipped); look for extreme values in y or X, or "
                "try damping=0.1"
            ))  # fmt: skip
        return accept and not settled_with_refusals, halt


def flat_messages(X, tau, nu):
    """tau, nu <- the flat start: precision FLAT_PRECISION where x != 0 (exactly 0 where the
    factor does not involve the weight), shift 0; blockwise, with no full-size temporary."""
    n, d = X.shape
    step = max(1, (1 << 21) // d)
    for lo in range(0, n, step):
        np.copyto(tau[lo : lo + step], np.where(X[lo : lo + step] != 0.0, FLAT_PRECISION, 0.0))
    nu[:] = 0.0


def _check_init_state(init_state, n, d, func):
    if not isinstance(init_state, RegressionState):
        raise V.param_error(
            "init_state", func, "a RegressionState (res.state) or None", init_state, TypeError
        )
    tau, nu = init_state.sites.tau, init_state.sites.nu
    if np.shape(tau) != (n, d) or np.shape(nu) != (n, d):
        raise V.param_error("init_state", func, f"messages of shape {(n, d)}", f"shape {np.shape(tau)}")
    if not (np.all(np.isfinite(tau)) and np.all(np.isfinite(nu)) and np.all(np.asarray(tau) >= 0)):
        raise V.param_error("init_state", func, "finite messages with precisions >= 0", "bad values")


def _initial_messages(X, init_state, tau, nu):
    """tau, nu (n, d) <- the fit's first messages: flat, or ``init_state``'s (checked already)."""
    if init_state is None:
        flat_messages(X, tau, nu)
    else:
        np.copyto(tau, init_state.sites.tau)
        np.copyto(nu, init_state.sites.nu)


def _sweep_key(base_key, it):
    """The uint64 random key of sweep ``it`` (importance sampling): fresh draws every sweep."""
    return np.random.SeedSequence([base_key, it]).generate_state(1, np.uint64)[0]


class _NoiseFloor:
    """The stopping rule of the sampling methods ("is", "kjit"): stop, stop reason "mc_noise",
    when the change has not reached a new minimum for MC_WINDOW sweeps: the fit is then at its
    Monte Carlo noise floor, and further sweeps only draw the noise again (before: 5,000 sweeps of
    10,000 draws a row with the defaults)."""

    def __init__(self):
        self.best, self.since = np.inf, 0

    def update(self, change):
        if change < self.best:
            self.best, self.since = change, 0
        else:
            self.since += 1
        return "mc_noise" if self.since >= MC_WINDOW else None


def column_stats(X):
    """What the centre of some rows needs (``feature_means``): the column sums of each chunk of
    ``chunk_rows(d + 1)`` rows (the chunks of the fit's sweeps, with the intercept's column), the
    columns' maxima and minima, and the first row (zeros for no rows)."""
    n, d = X.shape
    chunk = chunk_rows(d + 1)
    sums = np.empty((-(-n // chunk), d))
    for c in range(sums.shape[0]):
        sums[c] = X[c * chunk : (c + 1) * chunk].sum(axis=0)
    first = X[0].copy() if n else np.zeros(d)
    return sums, X.max(axis=0, initial=-np.inf), X.min(axis=0, initial=np.inf), first


def feature_means(n, stats):
    """The centre (d,) of n rows from the ``column_stats`` of their consecutive parts (in row
    order): each column's mean, the chunks' sums added in order (so that rows split into parts at
    chunk boundaries, as a cluster fit's partitions, give the same bits), and a constant column's
    value itself (so that it centres to exact zeros, a feature whose factor involves no weight)."""
    sums = np.concatenate([s[0] for s in stats])
    total = sums[0].copy()
    for c in range(1, sums.shape[0]):
        total += sums[c]
    center = total / n
    const = np.max([s[1] for s in stats], axis=0) == np.min([s[2] for s in stats], axis=0)
    center[const] = stats[0][3][const]
    return center


def with_constant(X, center=None):
    """[X - center, 1] (n, d + 1): the features (centred when ``center`` is given) and the
    intercept's constant column, in one new array."""
    n, d = X.shape
    out = np.empty((n, d + 1))
    if center is None:
        out[:, :d] = X
    else:
        np.subtract(X, center, out=out[:, :d])
    out[:, d] = 1.0
    return out


def _schedules(likelihood, drivers=S, sites=lambda problem: problem.X.size):
    """The sweep of each schedule for a likelihood (chosen once per fit), its drivers as the
    likelihood asks for them (``Likelihood.driver``: a Custom one's are uncached). ``drivers``:
    the module of the dense drivers (``schedules``) or of the sparse ones (``kernels.glm.sparse``);
    ``sites(problem)``: the messages of a sweep, below SERIAL_SITES run without threads."""
    par, ser = likelihood.driver(drivers.parallel_step), likelihood.driver(drivers.parallel_step_serial)

    def step_parallel(problem, lik, state, scratch, rho, key):
        small = sites(problem) < SERIAL_SITES
        return (ser if small else par)(problem, lik, state, scratch, rho, key)

    return {"parallel": step_parallel, "sequential": likelihood.driver(drivers.sequential_step)}


def parallel_sweep(likelihood, sparse=False):
    """The parallel schedule's sweep of a likelihood (``_schedules``), of dense or sparse rows."""
    if sparse:
        return _schedules(likelihood, SPK, _sparse_sites)["parallel"]
    return _schedules(likelihood)["parallel"]


def _sparse_sites(problem):
    return problem.data.shape[0]


def result_options(o, classes, center, rho):
    """The options a regression result records (``res.options``): the validated ``o``, the label
    classes, whether the features were centred, and the first damping."""
    out = dict(
        classes=classes, prior_var=o["prior_var"], fit_intercept=o["fit_intercept"],
        intercept_var=o["intercept_var"], center=center is not None, damping=rho,
    )  # fmt: skip
    for name in (
        "max_iter",
        "tol",
        "schedule",
        "stopping",
        "n_nodes",
        "n_samples",
        "threshold",
        "n_features",
    ):
        out[name] = o[name]
    return dict(out, n_threads=o["n_threads"], seed=o["seed"])


#: the schedules (their sweeps: ``_schedules``)
SCHEDULES = ("parallel", "sequential")


def _fit_vb(
    X, s, model, prior_T, max_iter, tol, callback, verbose, progress, start, options, init_state, center
):  # fmt: skip
    """Mean-field VB (``glm.vb``) packed as a ``RegressionResult`` (no site messages: its state
    is q(w), a ``VBState``; the evidence lower bound per iteration in ``trace.elbo``; damping
    does not apply)."""
    d = X.shape[1]
    if init_state is not None:
        ok = isinstance(init_state, VBState) and np.shape(init_state.mean) == np.shape(init_state.var) == (d,)
        if not ok or not (np.all(np.isfinite(init_state.mean)) and np.all(np.asarray(init_state.var) > 0)):
            want = f"a VBState (res.state of a VB fit) of {d} finite means and variances > 0"
            raise V.param_error("init_state", "fit", want, init_state, TypeError)
    vb = VBFit(X, s, model, prior_T, start=init_state)

    def snapshot(it, trace):
        return RegressionResult.of(
            model, "vb", vb.mu.copy(), vb.v.copy(), it, False, "running", trace, None, options, center=center
        )

    out = _loop.run(
        vb.step, max_iter=max_iter, tol=tol, callback=callback, snapshot=snapshot, finite=vb.finite,
        verbose=verbose, progress=progress, label=f"{model}/vb", hint="check the scale of X and prior_var",
        start=start,
    )  # fmt: skip
    state = VBState(vb.mu.copy(), vb.v.copy())
    return RegressionResult.of(
        model, "vb", vb.mu, vb.v, out.n_iter, out.converged, out.stop_reason, out.trace, state, options,
        center=center,
    )  # fmt: skip


def check_no_labels(path, y, func):
    """A file of labelled rows as X: y must be None."""
    if y is not None:
        raise ValueError(f"{func}: X is a file of labelled rows ({os.fspath(path)!r}); give y=None.")


def file_rows(path, y, func):
    """(X, y) of a sparse-row file (``fastcep.io.csr``), read whole; y must be None (the file
    holds the labels)."""
    from ..io.csr import read_csr

    check_no_labels(path, y, func)
    rows = read_csr(path)
    return rows.X, rows.y


def fit_regression(
    X,
    y,
    model,
    method=DEFAULTS["method"],
    *,
    prior_var=DEFAULTS["prior_var"],
    fit_intercept=DEFAULTS["fit_intercept"],
    intercept_var=DEFAULTS["intercept_var"],
    center=DEFAULTS["center"],
    offset=DEFAULTS["offset"],
    damping=DEFAULTS["damping"],
    max_iter=DEFAULTS["max_iter"],
    tol=DEFAULTS["tol"],
    schedule=DEFAULTS["schedule"],
    stopping=DEFAULTS["stopping"],
    n_nodes=DEFAULTS["n_nodes"],
    n_samples=DEFAULTS["n_samples"],
    threshold=DEFAULTS["threshold"],
    n_features=DEFAULTS["n_features"],
    n_threads=DEFAULTS["n_threads"],
    client=DEFAULTS["client"],
    checkpoint=DEFAULTS["checkpoint"],
    checkpoint_every=DEFAULTS["checkpoint_every"],
    resume=DEFAULTS["resume"],
    callback=DEFAULTS["callback"],
    seed=DEFAULTS["seed"],
    init_state=DEFAULTS["init_state"],
    verbose=DEFAULTS["verbose"],
    progress=DEFAULTS["progress"],
    cluster=None,
    **unknown,
):
    """Fit a Bayesian probit or logistic regression; see ``fastcep.fit`` for the parameters.

    method="kjit" (logistic model): EP whose tilted moments come from a
    message operator learned just in time (``fastcep.glm.kjit``) with the importance-sampling row
    of method "is" as its oracle. ``threshold`` (float >= 0, default 1e-3): a row whose operator
    predictive variance exceeds it asks the oracle (0: every row does, which reproduces method
    "is" exactly); ``n_features`` (int >= 1, default 200): the operator's random features. The
    rows sent to the oracle in each sweep are in ``res.options["oracle_calls"]``. ``cluster``:
    ``fastcep.cluster.regression``, which ``fastcep.fit`` passes with ``client=`` (the engine
    does not import the cluster code that builds on it).
    """
    given = O.arguments(locals())
    start = time.perf_counter()
    func = "fit"
    likelihood = resolve_likelihood(model, func)
    model = likelihood.name
    o = O.validate(func, "regression", model, method, given)  # (the option table: fastcep._options)
    if o.get("client") is not None:  # (the rows on a Dask cluster: ``fastcep.cluster.regression``)
        cluster = V.cluster_module(cluster, "fit_regression")
        return cluster.fit(o["client"], X, y, likelihood, model, method, o, start, func)
    if isinstance(X, (str, os.PathLike)):  # (a sparse-row file: its rows, read whole)
        X, y = file_rows(X, y, func)
    sparse = V.is_sparse(X)
    if sparse:  # (sites at the nonzeros only: ``glm.sparse``)
        SP.check_method(method, func)
    X = V.check_rows(X, "X", func)
    check_feature_scale(X, func)
    classes = V.label_classes(y, "y", func) if likelihood.binary else None
    s = likelihood.check(y, "y", func, X.shape[0])
    if isinstance(likelihood, (Gaussian, StudentT)):
        check_scale(s, "y", func)
    n, d = X.shape
    offset = check_offset(o.get("offset"), n, func)
    prior_T = V.prior_precisions(o["prior_var"], d, func)
    intercept = o["fit_intercept"]
    # (sparse features are not centred: it would fill every row)
    center = feature_means(n, [column_stats(X)]) if intercept and o["center"] and not sparse and n else None
    if intercept:  # the intercept is the weight of a last, constant feature
        X = SP.with_intercept_column(X) if sparse else with_constant(X, center)
        prior_T = np.append(prior_T, 1.0 / o["intercept_var"])
        d += 1
    damp = Damping(o["damping"], noisy=method in ("is", "kjit"))
    damp.hint = outlying_counts(s, likelihood.counts)
    done = 0  # the sweeps behind the first messages (a resumed fit's state's)
    damp.flat_start = o.get("init_state") is None
    if isinstance(o.get("init_state"), RegressionState):  # (an "auto" damping goes on where it was)
        damp.resume(o["init_state"].damping)
        done = o["init_state"].iterations or 0
    max_iter, tol, schedule, stopping = o["max_iter"], o["tol"], o["schedule"], o["stopping"]
    n_nodes, n_samples, threshold, n_features = o["n_nodes"], o["n_samples"], o["threshold"], o["n_features"]
    n_threads, callback, init_state = o["n_threads"], o["callback"], o.get("init_state")
    verbose, progress = o["verbose"], o["progress"]
    # used by methods "is" and "kjit" only; the other methods are deterministic
    rng = V.rng_from(o["seed"])
    base_key = int(rng.integers(0, 2**63))
    options = result_options(o, classes, center, damp.rho)
    label = f"{model}/{method}"
    if method == "vb":
        with num_threads(n_threads):
            vb_options = dict(options, damping=None)
            return _fit_vb(
                X,
                s,
                model,
                prior_T,
                max_iter,
                tol,
                callback,
                verbose,
                progress,
                start,
                vb_options,
                init_state,
                center,
            )

    if sparse:  # sites at the nonzeros (``glm.sparse``), the generic rows of any likelihood
        code, nodes, weights = sparse_rows(likelihood, model, method, offset, n_nodes)
        problem, state, scratch = SP.layout(X, s, prior_T, nodes, weights, code, offset)
        tau, nu = state.tau, state.nu
        if init_state is not None:
            SP.check_init_state(init_state, tau.size, d, func)

        def reset(restart=False):
            SP.initial_messages(None if restart and damp.flat_start else init_state, tau, nu, FLAT_PRECISION)

        def restore(old_t, old_n, restored):
            SPK.restore_improper(problem, state, old_t, old_n, restored)

        def rebuild():
            SPK.rebuild(problem, state, scratch)

        def change_since():
            return S.change_since(state, scratch)

        def site_change(nu_old):  # (the paper's rule: per row, the sum over its sites)
            return float(np.sum((nu - nu_old) ** 2)) / n

        reset()
        sweep = _schedules(likelihood, SPK, _sparse_sites)[schedule]
        kjit = None
    else:
        if init_state is not None:
            _check_init_state(init_state, n, d, func)
        tau, nu = np.empty((n, d)), np.empty((n, d))

        def reset(restart=False):
            _initial_messages(X, None if restart and damp.flat_start else init_state, tau, nu)

        def restore(old_t, old_n, restored):
            S.restore_improper(state.T, tau, nu, old_t, old_n, restored)

        def rebuild():
            S.rebuild(problem, state, scratch)

        def change_since():
            return S.change_since(state, scratch)

        def site_change(nu_old):
            return float(np.mean(np.sum((nu - nu_old) ** 2, axis=1)))

        reset()
        code, nodes, weights = dense_rows(likelihood, model, method, offset, n_nodes)
        chunk = chunk_rows(d)
        n_chunks = -(-n // chunk)
        problem = GLMProblem(X, s, prior_T, np.zeros(d), nodes, weights, code, chunk, n_samples, offset)
        state = GLMState(tau, nu, *(np.empty(d) for _ in range(4)))
        scratch = GLMScratch.allocate(n, d, chunk, n_chunks if schedule == "parallel" else 1)
        # (drawn after base_key: method "kjit" with threshold 0 gets the draws of method "is")
        kjit = KJITSweeps(n, n_chunks, n_features, threshold, rng) if method == "kjit" else None
        sweep = _schedules(likelihood)[schedule]
    learner = LearnedParams(likelihood, X, s, offset, gauss_hermite(EXPECTATION_NODES))
    # methods "is" and "kjit" keep negative site precisions (importance.py): in the parallel
    # schedule their sum can leave a weight's posterior or cavity improper, and an improper
    # cavity makes every row skip its messages, for good; such a weight keeps its messages from
    # before the sweep (schedules.restore_improper; two copies of the messages). In the
    # sequential schedule a row's damped update is a convex combination of two proper posteriors
    # and no guard is needed. The other methods emit a negative site precision only for a
    # likelihood that is not log-concave (``generic.site_message``), and are guarded then.
    guard = schedule == "parallel" and (method in ("is", "kjit") or not likelihood.log_concave)
    if guard:
        old_t, old_n = np.empty_like(tau), np.empty_like(nu)
        restored = np.zeros(d, dtype=np.int64)
    # (a sweep that refuses them all has diverged)
    n_sites = tau.size if sparse else int(np.count_nonzero(X))
    nu_old = np.empty_like(nu) if stopping == "paper" else None
    stale = StaleWatch(not likelihood.binary, n_sites)

    def step(it):
        rho = damp.rho
        key = _sweep_key(base_key, done + it)
        if nu_old is not None:
            np.copyto(nu_old, nu)
        if guard:
            np.copyto(old_t, tau)
            np.copyto(old_n, nu)
        if kjit is not None:
            change, skipped = kjit.step(problem, state, scratch, rho, key, schedule)
        else:
            change, skipped = sweep(problem, learner.kernel(), state, scratch, rho, key)
        n_restored = 0
        if guard:
            restore(old_t, old_n, restored)
            n_restored = int(restored.sum())
            if n_restored:
                skipped += n_restored
                rebuild()
                change = change_since()
        if kjit is not None:
            kjit.learn()
        values = {"damping": rho, "param_change": change}
        if nu_old is not None:
            values["site_change"] = site_change(nu_old)
        # every message refused: their tilted moments were not finite (the means ran off), or
        # every new message had a negative precision (CEP-2's second-order term on a start far
        # from the data): the state did not move, and a change of 0 is no convergence
        refused = 0 < n_sites <= skipped
        restart = damp.diverged(it) if refused else damp.update(change, state.mu - scratch.mu_old)
        if not restart:  # (a restart's sweep is the phase before: not this phase's evidence)
            damp.runaway(it, change, int(skipped), n_sites, (n, d))
        if restart:  # the undamped start diverged: again from the initial messages, damped
            reset(restart=True)
            rebuild()
        # the stopping rule's measure, per unit of damping: a damped sweep moves rho times the
        # undamped step, and a tiny step (damping 1e-8) is no evidence of convergence; a sweep
        # whose update the guard undid, in part, or after which the fit starts again is none either
        measure = values["site_change"] / rho**2 if stopping == "paper" else change / rho
        if learner.learned:  # (the likelihood's learned parameters: EM, after the sweep)
            measure = max(measure, learner.update(state.mu, state.v))
        stop = noise.update(change) if noise is not None else None
        accept = n_restored == 0 and not restart and not refused
        accept, halt = stale.update(it, accept, skipped, n_restored, measure, tol)
        return _loop.StepReport(measure, int(skipped), accept, values, stop, halt)

    # methods "is" and "kjit" never settle below a small tol: their messages carry Monte Carlo
    # noise; they stop when the change has stopped falling (``_NoiseFloor``)
    noise = _NoiseFloor() if method in ("is", "kjit") else None

    def snapshot(it, trace):
        mu, v = state.mu.copy(), state.v.copy()
        return RegressionResult.of(
            model, method, mu, v, it, False, "running", trace, None, options, learner.likelihood, center
        )

    def finite():  # (and proper: every variance > 0)
        return bool(np.all(np.isfinite(state.mu)) and np.all(np.isfinite(state.v)) and np.all(state.v > 0))

    with num_threads(n_threads):
        rebuild()
        out = _loop.run(
            step, max_iter=max_iter, tol=tol, callback=callback, snapshot=snapshot, finite=finite,
            verbose=verbose, progress=progress, label=label, start=start, stop_rule=STOP_REASONS[stopping],
            governor=ThreadGovernor(n_threads) if tau.size >= SERIAL_SITES else None,
        )  # fmt: skip
    if kjit is not None:
        options["oracle_calls"] = list(kjit.oracle_calls)
    learner.warn_at_bounds(func)
    state_out = RegressionState(RegressionSites(tau, nu), state.T, state.N, damp.state(), done + out.n_iter)
    return RegressionResult.of(
        model, method, state.mu, state.v, out.n_iter, out.converged, out.stop_reason, out.trace,
        state_out, options, learner.likelihood, center,
    )  # fmt: skip
