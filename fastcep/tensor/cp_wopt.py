"""CP-WOPT (Acar et al. 2011): CP decomposition of an incomplete tensor by L-BFGS.

``fit(coords, values, model="cp_gaussian" | "cp_probit", method="cp_wopt", rank=R)`` minimises

    F(U) = 1/2 sum_{observed e} (y_e - sum_r prod_k U_k[e_k, r])^2 + reg/2 sum_k ||U_k||_F^2

over all factor matrices jointly with scipy's L-BFGS-B; the objective and its gradient come from
``fastcep.kernels.cp_wopt`` (parallel over entries, then over objects through the CSR grouping
of ``fastcep.tensor.layout.make_layout``: race-free, identical on any thread count). It is the tensor baseline
of the paper (sections 5.2 and 5.3, via the Tensor Toolbox's ``cp_wopt``): a point estimate, with
no posterior covariances and no noise model; binary tensors are fitted as {0, 1} targets of the
same least-squares objective.
"""

import contextlib
import time

import numpy as np
from scipy.optimize import minimize

from .. import _loop
from .. import _options as O
from .. import _validation as V
from .._threads import num_threads
from ..kernels import tensor as KCP
from ..kernels.tensor import cp_wopt as K
from ..metrics import auc as _auc
from ..metrics import rmse as _rmse
from .engine import initial_means
from .layout import check_coords, check_eval_set, check_memory, check_values, make_layout, standardized
from .result import CPResult, FactorState

METHOD = "cp_wopt"
#: entries per parallel work unit of the residual pass (fixed: results do not depend on threads)
WOPT_ENTRY_CHUNK = 1024
#: objects per parallel work unit of the gradient pass
WOPT_OBJECT_CHUNK = 16
#: L-BFGS memory (pairs of correction vectors; scipy's default)
LBFGS_MEMORY = 10
#: options of the Bayesian fit (``fastcep.tensor.fit_cp``) that have no meaning for a point
#: estimate: ``Refused`` in the option table (``fastcep._options``)
NOT_APPLICABLE = tuple(opt.name for opt in O.OPTIONS if isinstance(O.spec(opt.name, "cp", METHOD), V.Refused))
#: the signature defaults of ``fit_cp_wopt``, from the option table
WOPT_DEFAULTS = O.defaults("cp", METHOD)


class _Problem:
    """The objective on a flat parameter vector (n_obj R,), with the buffers of its kernel and the
    residuals of the last evaluation (``res`` at ``x_last``)."""

    def __init__(self, lay, y, R, reg):
        n = lay.gidx.shape[0]
        n_obj = int(lay.offsets[-1])
        self.lay, self.y, self.R, self.reg, self.n_obj = lay, y, R, reg, n_obj
        # the entries and their layout (no prior, no message model: code -1)
        no_prior = np.empty((0, R, R)), np.empty((0, R))
        self.problem = KCP.CPProblem(
            lay.gidx, y, y, lay.ptr, lay.ent, lay.obj_mode, *no_prior, -1, WOPT_OBJECT_CHUNK
        )
        self.res = np.empty(n)
        self.sse = np.empty(-(-n // WOPT_ENTRY_CHUNK))
        n_obj_chunks = -(-n_obj // WOPT_OBJECT_CHUNK)
        self.sq = np.empty(n_obj_chunks)
        self.z = np.empty((n_obj_chunks, R))
        self.x_last = None
        self.f_last = np.nan
        self.n_evals = 0

    def __call__(self, x):
        """(F(x), dF/dx) for scipy (the gradient a fresh array: scipy keeps references to it)."""
        U = np.ascontiguousarray(x, dtype=np.float64).reshape(self.n_obj, self.R)
        G = np.empty((self.n_obj, self.R))
        f = K.value_and_grad(
            self.problem, U, self.reg, WOPT_ENTRY_CHUNK, self.res, self.sse, self.sq, G, self.z
        )
        self.x_last = np.array(x, dtype=np.float64)
        self.f_last = float(f)
        self.n_evals += 1
        return self.f_last, G.ravel()

    def fitted(self, x):
        """Training reconstructions f (n,) at x (from the last evaluation's residuals when at x)."""
        if self.x_last is None or not np.array_equal(self.x_last, x):
            self(x)
        return self.y - self.res


def _blas_single_thread():
    """BLAS limited to one thread while L-BFGS-B runs (if threadpoolctl is installed): its BLAS
    calls are on vectors of n_obj R numbers, where OpenBLAS threads only spin against numba's
    (measured: 200 iterations on a 20 x 15 x 10 rank-2 tensor 2-6x slower without the limit)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def _pack(model, R, shape, U, n_iter, converged, stop_reason, trace, options):
    """A point estimate as a CPResult: covariances zero, noise None."""
    return CPResult(
        model, METHOD, "full", R, shape, U, np.zeros((U.shape[0], R, R)), None, n_iter, converged,
        stop_reason, trace, FactorState(U.copy()), dict(options),
    )  # fmt: skip


def fit_cp_wopt(
    coords,
    values,
    model,
    *,
    likelihood=WOPT_DEFAULTS["likelihood"],
    shape=WOPT_DEFAULTS["shape"],
    rank=WOPT_DEFAULTS["rank"],
    reg=WOPT_DEFAULTS["reg"],
    max_iter=WOPT_DEFAULTS["max_iter"],
    tol=WOPT_DEFAULTS["tol"],
    init=WOPT_DEFAULTS["init"],
    init_scale=WOPT_DEFAULTS["init_scale"],
    standardize=WOPT_DEFAULTS["standardize"],
    eval_set=WOPT_DEFAULTS["eval_set"],
    n_threads=WOPT_DEFAULTS["n_threads"],
    callback=WOPT_DEFAULTS["callback"],
    seed=WOPT_DEFAULTS["seed"],
    verbose=WOPT_DEFAULTS["verbose"],
    progress=WOPT_DEFAULTS["progress"],
    init_state=WOPT_DEFAULTS["init_state"],
    **unknown,
):
    """CP decomposition of an incomplete tensor by CP-WOPT (called by ``fastcep.fit`` for
    ``method="cp_wopt"``).

    Minimises ``F(U) = 1/2 sum_e (y_e - f_e)^2 + reg/2 sum_k ||U_k||_F^2``, with
    ``f_e = sum_r prod_k U_k[e_k, r]`` and e over the observed entries, over all factor matrices
    jointly with scipy's L-BFGS-B (memory 10, no bounds), as Acar et al. (2011), "Scalable
    tensor factorizations for incomplete data".

    Parameters
    ----------
    coords : int array (n, K), K >= 2
        0-based coordinates of the observed entries (a repeated row counts twice).
    values : array (n,)
        Real values (cp_gaussian), or binary labels {0, 1}, {-1, 1} or bool (cp_probit), which
        are fitted as {0, 1} targets of the same least-squares objective (as the Tensor
        Toolbox's ``cp_wopt`` that the paper used on binary tensors; there is no link function,
        and the offset of about the fraction of ones costs one of the R components).
    model : {"cp_gaussian", "cp_probit", "cp"}
        "cp" with ``likelihood`` ``Gaussian()`` or ``"gaussian"`` is cp_gaussian, with
        ``Bernoulli("probit")`` or ``"probit"`` cp_probit (``fastcep._models.resolve``).
    likelihood : fastcep.likelihoods.Likelihood, str or None
        With model "cp" only.
    shape : sequence of K ints, optional
        Tensor shape (default: 1 + the largest index of each mode).
    rank : int >= 1 (required)
    reg : float >= 0, default 0.0
        Weight of the L2 penalty on the factors. 0 is Acar et al.'s objective, which overfits
        sparse noisy data (the test error passes a minimum and rises as L-BFGS converges); a
        positive value also pulls the rows of objects without observed entries to 0 (with 0
        they keep their initial values).
    max_iter : int >= 1, default 500
        Cap on the L-BFGS iterations.
    tol : float >= 0, default 1e-9
        Stop when the objective's decrease over one iteration, relative to the objective of the
        all-zero factors ``F_0 = 1/2 sum_e y_e^2`` (1 if that is 0), is below tol: L-BFGS-B's
        ``ftol`` test (default 2.2e-9) with a scale fixed by the data rather than clipped at 1.
    init : {"svd", "sketch", "random"}, default "svd"
        Initial factors: leading singular vectors of each mode's unfolding (missing entries as
        0; ``fastcep.tensor.init.svd_init``) or of a hashed sketch of it (``sketch_init``), or
        N(0, init_scale^2) draws; all seeded.
    init_scale : float >= 0, default 1.0
        Multiplies the svd initial factors; the standard deviation of the random ones.
    eval_set : (coords, values) or None
        Test entries whose RMSE (cp_gaussian) or AUC (cp_probit, of the reconstruction as a
        score) is recorded after every iteration in ``trace.eval_metric``.
    n_threads : int or None
        Numba threads for this call (None: numba's current setting). Results do not depend on it.
    callback : callable or None
        Called after every L-BFGS iteration with a ``fastcep.IterationInfo`` (``skipped``
        is 0; ``result`` a ``CPResult`` of the current factors); returning True stops the fit.
    seed : int, Generator or None
        Seeds the initial factors (same seed, same factors, whatever the thread count).
    verbose : bool, default False
        Print one line per iteration to stderr.
    **unknown
        The options of the Bayesian fit that do not apply to a point estimate (``NOT_APPLICABLE``:
        "prior_var", "a0", "b0", "damping", "schedule", "covariance", "noise_warmup",
        "warmup_snr", "prior_mean", "probit_curvature", "expect_under") raise a
        ValueError naming them unless None; other names a TypeError listing the valid ones.

    Returns
    -------
    CPResult
        ``method="cp_wopt"``, ``covariance="full"``, ``state`` a ``FactorState`` (its factors,
        for ``init_state=``): ``posterior.means[k]`` (d_k, R) are the factor matrices,
        ``posterior.covs[k]`` (d_k, R, R) zeros and ``posterior.noise`` None.
        ``predict(coords)`` returns the reconstruction ``sum_r prod_k U_k[i_k, r]`` for both
        models (for cp_probit a score for AUC, not a probability) and, with ``return_var``, a
        predictive variance of 0. ``stop_reason`` is "tol", "max_iter", "callback" or
        "line_search" (L-BFGS-B found no further decrease: the objective is flat to rounding
        error, or the gradient is inaccurate; ``converged`` is False then). The trace holds
        per iteration: ``elapsed``, ``change`` (the relative decrease of the objective tested
        against tol), ``prediction_change`` (the relative RMS change of the training
        reconstructions, the stopping measure of the CEP fit, for comparison), ``objective``
        (F, minimised), ``eval_metric``; ``skipped`` 0 and the other columns NaN.

    Raises
    ------
    ValueError, TypeError
        On bad input, naming the parameter and the bad rows.
    FloatingPointError
        If the objective or the factors become non-finite (try a smaller init_scale).
    """
    given = O.arguments(locals())
    start = time.perf_counter()
    state = {}
    func = "fit"
    o = O.validate(func, "cp", model, METHOD, given)  # (the option table: fastcep._options)
    model, lik = o["model"], o["likelihood"]  # (model="cp" with the likelihood of a hand-written one)
    coords, shape = check_coords(coords, o["shape"], func)
    n, Kmodes = coords.shape
    y = check_values(values, n, lik, func)
    y, v_center, v_scale = standardized(y, model, o["standardize"])
    if model == "cp_probit":
        y = np.where(y > 0, 1.0, 0.0)  # check_values gives signs +-1; CP-WOPT fits {0, 1}
    check_memory(n, shape, o["rank"], "diag", func)  # (a point estimate: no covariances)
    R, reg, max_iter, tol, init, init_scale = (
        o[k] for k in ("rank", "reg", "max_iter", "tol", "init", "init_scale")
    )
    eval_set, n_threads, callback, seed = o["eval_set"], o["n_threads"], o["callback"], o["seed"]
    verbose, progress = o["verbose"], o["progress"]
    rng = V.rng_from(seed)
    if eval_set is not None:
        ev_coords, ev_values = check_eval_set(eval_set, shape, lik, func)
        if model == "cp_probit" and np.unique(ev_values).size < 2:
            raise V.param_error("eval_set[1]", func, "labels of both classes (for the AUC)", "one class")
    options = dict(
        shape=shape,
        rank=R,
        standardize=o["standardize"],
        value_center=v_center,
        value_scale=v_scale,
        reg=reg,
        max_iter=max_iter,
        tol=tol,
        init=init,
        init_scale=init_scale,
        n_threads=n_threads,
        seed=seed,
    )

    lay = make_layout(coords, shape)
    n_obj = int(lay.offsets[-1])
    init_state = o["init_state"]
    if init_state is not None:  # (res.state of an earlier fit: L-BFGS's memory starts afresh)
        if not isinstance(init_state, FactorState) or np.shape(init_state.U) != (n_obj, R):
            want = f"a FactorState (res.state of a CP-WOPT fit) with U ({n_obj}, {R})"
            raise V.param_error("init_state", func, want, init_state, TypeError)
        U0 = np.array(init_state.U, dtype=np.float64)
    else:  # (the CEP fit's start: the same draws)
        U0 = initial_means(coords, y, shape, R, init, init_scale, None, rng)
    problem = _Problem(lay, y, R, reg)
    f_zero = 0.5 * float(np.dot(y, y))
    scale = f_zero if f_zero > 0.0 else 1.0
    if eval_set is not None:
        ev_gidx = np.ascontiguousarray(ev_coords + lay.offsets[:-1][None, :])
        ev_pred = np.empty(len(ev_gidx))

    def snapshot(it, trace):
        return _pack(
            model, R, shape, state["x"].reshape(n_obj, R).copy(), it, False, "callback", trace, options
        )

    evaluate = None
    if eval_set is not None:

        def evaluate(result):
            KCP.predict_mean(ev_gidx, state["x"].reshape(n_obj, R), ev_pred)
            if model == "cp_gaussian":
                return _rmse(ev_values, ev_pred * v_scale + v_center)
            return _auc(ev_values > 0, ev_pred)

    rec = _loop.Recorder(
        tol=tol, callback=callback, snapshot=snapshot, evaluate=evaluate,
        finite=lambda: np.isfinite(state["F"]), verbose=verbose, progress=progress,
        label=f"{model}/{METHOD}",
        hint="try a smaller 'init_scale'", start=start,
    )  # fmt: skip

    def on_iteration(intermediate_result):
        """After each L-BFGS iteration: the one loop's bookkeeping (trace, convergence test,
        user callback); StopIteration ends scipy's iterations."""
        x, F = intermediate_result.x, float(intermediate_result.fun)
        f_new = problem.fitted(x)
        change = (state["F"] - F) / scale
        pred_change = float(
            np.sqrt(np.mean((f_new - state["f"]) ** 2) / max(float(np.mean(f_new**2)), 1e-300))
        )
        state["F"], state["f"], state["x"] = F, f_new, x
        values = {"prediction_change": pred_change, "objective": F}
        if rec.record(rec.n_iter + 1, _loop.StepReport(change, 0, values=values)):
            raise StopIteration

    with num_threads(n_threads), _blas_single_thread():
        F0, _ = problem(U0.ravel())
        if not np.isfinite(F0):
            raise FloatingPointError(
                f"fit: the CP-WOPT objective at the initial factors is not finite ({F0}); "
                "try a smaller 'init_scale'."
            )
        state.update(F=F0, f=problem.fitted(U0.ravel()).copy(), x=U0.ravel())
        opt = minimize(
            problem,
            U0.ravel(),
            jac=True,
            method="L-BFGS-B",
            callback=on_iteration,
            options={
                "maxiter": max_iter,
                "maxfun": max(15000, 50 * max_iter),
                "maxcor": LBFGS_MEMORY,
                "ftol": 0.0,  # the stopping rule is the scale-free test above
                "gtol": 0.0,
            },
        )
    U = np.ascontiguousarray(opt.x, dtype=np.float64).reshape(n_obj, R)
    if not np.all(np.isfinite(U)) or not np.isfinite(opt.fun):
        raise FloatingPointError(
            f"fit: the CP-WOPT objective or factors became non-finite after {rec.n_iter} "
            "iteration(s); try a smaller 'init_scale'."
        )
    if rec.converged or rec.stop_reason == "callback":
        stop_reason = None  # the recorder's
    elif opt.status == 1:  # iteration (or evaluation) cap
        stop_reason = "max_iter"
    elif opt.status == 0:  # a gradient of exactly 0, or no change of the objective
        stop_reason = "tol"
    else:  # the line search found no decrease
        stop_reason = "line_search"
    out = rec.outcome(stop_reason)
    res = _pack(model, R, shape, U, out.n_iter, out.stop_reason == "tol", out.stop_reason, out.trace, options)
    res.options["n_evals"] = problem.n_evals
    res.options["optimizer_message"] = str(opt.message)
    return res
