"""Bayesian CP decomposition by mean-field variational message passing (``method="vmp"``).

The paper's tensor baseline (section 5.2; Matchbox's augmented model for binary entries) and,
with the previous posterior as the prior, the per-batch fitter of POST (``fastcep.stream(...,
method="post")``). The same Gaussian embedding posteriors as CEP (full R x R covariance per
object, a Gamma posterior of the noise precision for cp_gaussian) found by coordinate ascent:
mode by mode, every object of a mode updated exactly given the others (in parallel over
objects, ``fastcep.kernels.tensor.vmp``), then q(tau). Every step maximises the evidence lower bound
(ELBO) over one block, so ``trace.elbo`` never decreases.
"""

import math
import time

import numpy as np
from scipy.special import digamma, gammaln

from .. import _loop
from .. import _options as O
from .. import _validation as V
from .._threads import num_threads, plan
from ..kernels.tensor import vmp as K
from ..kernels.tensor.state import CPProblem, CPStore
from .engine import (
    ENTRY_CHUNK,
    INIT_VAR_FRACTION,
    default_prior,
    initial_means,
    moments_change,
    reference_var,
    run_engine,
)
from .layout import check_coords, check_eval_set, check_memory, check_values, make_layout, standardized
from .result import CPResult, VMPState, second_moments

#: objects per parallel work unit of the mode updates (results do not depend on it)
VMP_OBJECT_CHUNK = 16

#: the signature defaults of ``fit_vmp``, from the option table (``fastcep._options``; the
#: options of ``fit_cp`` that have no meaning for coordinate ascent are ``Refused`` there)
VMP_DEFAULTS = O.defaults("cp", "vmp")


def _kl_gamma(a, b, a0, b0):
    """KL(Gamma(a, b) || Gamma(a0, b0)), shape-rate parameterisation."""
    return float(
        (a - a0) * digamma(a)
        - gammaln(a)
        + gammaln(a0)
        + a0 * (math.log(b) - math.log(b0))
        + a * (b0 - b) / b
    )


def fit_vmp(
    coords,
    values,
    model,
    *,
    likelihood=VMP_DEFAULTS["likelihood"],
    shape=VMP_DEFAULTS["shape"],
    rank=VMP_DEFAULTS["rank"],
    prior_var=VMP_DEFAULTS["prior_var"],
    a0=VMP_DEFAULTS["a0"],
    b0=VMP_DEFAULTS["b0"],
    max_iter=VMP_DEFAULTS["max_iter"],
    tol=VMP_DEFAULTS["tol"],
    init=VMP_DEFAULTS["init"],
    init_scale=VMP_DEFAULTS["init_scale"],
    standardize=VMP_DEFAULTS["standardize"],
    prior_mean=VMP_DEFAULTS["prior_mean"],
    init_snr=VMP_DEFAULTS["init_snr"],
    covariance=VMP_DEFAULTS["covariance"],
    eval_set=VMP_DEFAULTS["eval_set"],
    n_threads=VMP_DEFAULTS["n_threads"],
    callback=VMP_DEFAULTS["callback"],
    seed=VMP_DEFAULTS["seed"],
    verbose=VMP_DEFAULTS["verbose"],
    progress=VMP_DEFAULTS["progress"],
    init_state=VMP_DEFAULTS["init_state"],
    damping=None,
    schedule=None,
    noise_warmup=None,
    warmup_snr=None,
    probit_curvature=None,
    expect_under=None,
    **unknown,
):
    """Fit a Bayesian CP decomposition by mean-field VMP (``fastcep.fit(..., method="vmp")``).

    q(u_o) = N(m_o, S_o) per object with a full R x R covariance, q(tau) = Gamma(a, b) for
    cp_gaussian; cp_probit uses the augmented model z_e ~ N(f_e, 1), y_e = 1[z_e > 0] (Matchbox,
    the paper's VMP baseline) with truncated-normal q(z_e). One iteration updates the objects of
    mode 1, ..., K in turn (each mode exactly given the others, in parallel over its objects;
    cp_probit: each entry's q(z) just before), then q(tau); the evidence lower bound after it goes
    to ``trace.elbo`` and never decreases. Formulas in ``fastcep.kernels.tensor.vmp``.

    Parameters
    ----------
    coords : int array (n, K), K >= 2
        0-based coordinates of the observed entries (a repeated row is a repeated observation).
    values : array (n,)
        Real values (cp_gaussian) or binary labels {0, 1}, {-1, 1} or bool (cp_probit).
    model : {"cp_gaussian", "cp_probit", "cp"}
        "cp" with ``likelihood`` ``Gaussian()`` or ``"gaussian"`` is cp_gaussian, with
        ``Bernoulli("probit")`` or ``"probit"`` cp_probit (``fastcep._models.resolve``).
    likelihood : fastcep.likelihoods.Likelihood, str or None
        With model "cp" only.
    shape : sequence of K ints, optional
        Tensor shape (default: 1 + the largest index of each mode).
    rank : int >= 1 (required)
    prior_var : float > 0, default 1.0
        Variance of the N(0, prior_var I) prior of every embedding.
    a0, b0 : float > 0, default 1e-3
        Gamma(a0, b0) prior (shape, rate) of the noise precision tau (cp_gaussian).
    max_iter : int >= 1, default 500
    tol : float >= 0, default 1e-4
        Stop when the relative RMS change of the training entries' predictive means over one
        iteration is below tol (as ``fit_cp``).
    init : {"svd", "random"}, default "svd"
        Initial means: leading singular vectors of each mode's unfolding (``fastcep.tensor.init``)
        or N(0, init_scale^2) draws (seeded); initial covariances are small (1% of the mean
        square of the initial means). A zero start is a fixed point of the updates.
    init_scale : float >= 0, default 1.0
    prior_mean : float >= 0, default 0.0
        As in ``fit_cp``: a positive value gives every embedding the prior N(m, prior_var I) with
        m = |N(0, prior_mean^2)| per coordinate (seeded), and the fit starts from m.
    init_snr : float > 0 or None, default 10.0
        cp_gaussian: the starting point of q(tau) has mean ``init_snr / Var(values)`` (the first
        mode update needs one; None: the prior mean a0 / b0, which ``fastcep.stream`` uses after
        its first batch, where the prior is the previous posterior). Only a starting point: q(tau)
        is updated exactly in every iteration. A low value over-regularises the first updates
        (measured on a 30 x 25 x 20 rank-3 tensor with noise sd 0.1, init="random": with 0.5, 1
        seed in 4 ended at E[tau] 2.7 instead of 100; with 1 or 10, none of 4).
    covariance : {"full"}
        Only full covariances ("diag" is refused).
    eval_set : (coords, values) or None
        Test entries whose RMSE (cp_gaussian) or AUC (cp_probit) goes to ``trace.eval_metric``
        after every iteration.
    n_threads : int or None
        Threads for this call; results are identical for any thread count.
    callback : callable or None
        ``callback(info)`` after every iteration with a ``fastcep.IterationInfo``
        (``skipped`` is always 0); returning True stops the fit.
    seed : int, Generator or None
        Seeds the initial means (same seed, same result).
    verbose : bool, default False
        One line per iteration on stderr.
    init_state : VMPState or None
        ``res.state`` of an earlier VMP fit on the same data: it continues from its moments and
        q(tau), as the fit it came from would have, to rounding (the second moments are
        recomputed).
    damping, schedule, noise_warmup, warmup_snr, probit_curvature, expect_under
        Options of CEP that do not apply to VMP: passing anything but None raises ValueError.
    **unknown
        Any other name raises TypeError listing the valid ones. Every option's constraint and
        default: the option table (``fastcep._options``; ``help(fastcep.fit)``).

    Returns
    -------
    CPResult
        ``method="vmp"``, ``covariance="full"``, ``state`` a ``VMPState``; ``posterior.noise`` (a, b) for
        cp_gaussian; ``trace.elbo`` the ELBO after every iteration, ``trace.change`` the stopping
        measure, ``trace.param_change`` the largest change of a mean (in sds) or relative change
        of a variance, ``trace.damping`` NaN.

    Raises
    ------
    ValueError, TypeError
        On bad input, naming the parameter and the bad rows.
    FloatingPointError
        If a posterior precision is not positive definite or the ELBO becomes non-finite.
    """
    given = O.arguments(locals())
    func = "fit"
    o = O.validate(func, "cp", model, "vmp", given)  # (the option table: fastcep._options)
    model, lik = o["model"], o["likelihood"]  # (model="cp" with the likelihood of a hand-written one)
    coords, shape = check_coords(coords, o["shape"], func)
    n, Kmodes = coords.shape
    y = check_values(values, n, lik, func)
    y, center, scale = standardized(y, model, o["standardize"])
    s = y if model == "cp_probit" else np.zeros(n)
    R, pv, a0, b0, max_iter, tol = o["rank"], o["prior_var"], o["a0"], o["b0"], o["max_iter"], o["tol"]
    check_memory(n, shape, R, "full", func)
    init, init_scale, prior_mean, init_snr = o["init"], o["init_scale"], o["prior_mean"], o["init_snr"]
    eval_set, n_threads, callback, seed = o["eval_set"], o["n_threads"], o["callback"], o["seed"]
    verbose, progress = o["verbose"], o["progress"]
    rng = V.rng_from(seed)
    if eval_set is not None:
        eval_set = check_eval_set(eval_set, shape, lik, func)
    options = dict(
        shape=shape,
        rank=R,
        standardize=o["standardize"],
        value_center=center,
        value_scale=scale,
        prior_var=pv,
        a0=a0,
        b0=b0,
        max_iter=max_iter,
        tol=tol,
        covariance="full",
        init=init,
        init_scale=init_scale,
        prior_mean=prior_mean,
        init_snr=init_snr,
        n_threads=n_threads,
        seed=seed,
    )

    start = time.perf_counter()
    lay = make_layout(coords, shape)
    n_obj = int(lay.offsets[-1])
    prior_Lam, prior_eta, m0 = default_prior(n_obj, R, "full", pv, prior_mean, rng)
    threads, governor = plan(n_threads, len(y) * lay.gidx.shape[1] * R * R)
    with num_threads(threads):
        # symmetry breaking as in fit_cp: initial means from the data or random (seeded), small
        # covariances, so that the first update of mode 1 sees E[z z^T] ~ E[z] E[z]^T
        state = o["init_state"]
        if state is None:
            start_at = dict(init_means=initial_means(coords, y, shape, R, init, init_scale, m0, rng))
        else:
            start_at = _check_vmp_state(state, n_obj, R, model, func)
        engine = VMPEngine(
            lay, y, s, model, R, prior_Lam=prior_Lam, prior_eta=prior_eta, a0=a0, b0=b0,
            init_snr=init_snr, func=func, **start_at,
        )  # fmt: skip
        return run_engine(
            engine, shape, options, max_iter=max_iter, tol=tol, callback=callback, eval_set=eval_set,
            verbose=verbose, progress=progress, label=f"{model}/vmp", start=start,
            hint="check the scale of the values and the priors", governor=governor,
        )  # fmt: skip


def _check_vmp_state(state, n_obj, R, model, func):
    """The engine's start (``init_means``, ``init_covs``, ``init_b``) from a checked VMPState."""
    if not isinstance(state, VMPState):
        raise V.param_error(
            "init_state", func, "a VMPState (res.state of a VMP fit) or None", state, TypeError
        )
    M, S = np.asarray(state.M, dtype=np.float64), np.asarray(state.S, dtype=np.float64)
    if M.shape != (n_obj, R) or S.shape != (n_obj, R, R):
        raise V.param_error(
            "init_state", func, f"a VMPState with M ({n_obj}, {R}) and S ({n_obj}, {R}, {R})",
            f"M {M.shape}, S {S.shape}",
        )  # fmt: skip
    b = float(state.b)
    if not (np.all(np.isfinite(M)) and np.all(np.isfinite(S))) or (model == "cp_gaussian" and not b > 0):
        raise V.param_error("init_state", func, "finite moments and a rate b > 0", "other numbers")
    E2 = getattr(state, "E2", None)
    if E2 is not None:
        E2 = np.asarray(E2, dtype=np.float64)
        if E2.shape != S.shape or not np.all(np.isfinite(E2)):
            raise V.param_error(
                "init_state", func, f"a VMPState whose E2 is finite, ({n_obj}, {R}, {R})", E2.shape
            )
    return dict(init_means=M, init_covs=S, init_b=b if model == "cp_gaussian" else None, init_E2=E2)


class VMPEngine:
    """One VMP fit's posterior and its iteration (``step``), for the one loop: ``fit_vmp`` builds
    one from checked input, ``fastcep.stream(..., method="post")`` one per batch from the batch's
    layout and the posterior so far as the prior.

    Parameters
    ----------
    lay : Layout
    y, s : arrays (n,)
        Values (label signs for cp_probit) and label signs (zeros for cp_gaussian).
    model : str
    R : int
    prior_Lam, prior_eta : arrays (n_obj, R, R), (n_obj, R)
        Per-object prior natural parameters.
    a0, b0 : float
        Gamma prior of the noise precision (cp_gaussian).
    init_means, init_covs : arrays (n_obj, R), (n_obj, R, R) or None
        Initial moments (covs None: INIT_VAR_FRACTION of the means' mean square).
    init_snr : float or None
        cp_gaussian: E[tau] starts at init_snr / Var(y) (None: at a0 / b0).
    init_b : float or None
        cp_gaussian: q(tau)'s rate to start from (a resumed fit's), before init_snr.
    func : str
        Names the public function in errors.
    """

    def __init__(
        self, lay, y, s, model, R, *, prior_Lam, prior_eta, a0, b0, init_means, init_covs=None, init_snr=None,
        init_b=None, init_E2=None, func="fit",
    ):  # fmt: skip
        n = lay.gidx.shape[0]
        n_obj = int(lay.offsets[-1])
        self.lay, self.y, self.s, self.model, self.R, self.n = lay, y, s, model, R, n
        self.Kmodes = lay.gidx.shape[1]
        self.prior_Lam, self.prior_eta, self.a0, self.b0 = prior_Lam, prior_eta, a0, b0
        self.code = K.MODEL_GAUSSIAN if model == "cp_gaussian" else K.MODEL_PROBIT
        n_obj_chunks = -(-n_obj // VMP_OBJECT_CHUNK)
        self.mat = np.empty((n_obj_chunks, K.OBJECT_MATS, R, R))
        self.vec = np.empty((n_obj_chunks, K.OBJECT_VECS, R))
        self.entry_part = np.empty(-(-n // ENTRY_CHUNK))
        self.kl_part = np.empty(n_obj_chunks)
        self.c0 = np.empty(n_obj)
        self.P_Lam = np.empty((n_obj, R, R))
        self.P_eta = np.empty((n_obj, R))
        self.logdet = np.empty(n_obj)
        self.E2 = np.empty((n_obj, R, R))
        self.f_old = np.empty(n)
        self.f_new = np.empty(n)
        K.prior_constants(prior_Lam, prior_eta, self.c0, VMP_OBJECT_CHUNK, self.mat, self.vec)
        if not np.all(np.isfinite(self.c0)):
            raise ValueError(
                f"{func}: the prior precision of {int(np.sum(~np.isfinite(self.c0)))} object(s) is not "
                "positive definite."
            )
        self.M = np.array(init_means, dtype=np.float64)
        if init_covs is None:
            v0 = max(INIT_VAR_FRACTION * float(np.mean(self.M**2)), 1e-12)
            self.S = np.ascontiguousarray(np.broadcast_to(v0 * np.eye(R), (n_obj, R, R)))
        else:
            self.S = np.array(init_covs, dtype=np.float64)
        # the CP drivers' problem and store (``kernels.tensor.state``): VMP keeps no messages
        self.problem = CPProblem(
            lay.gidx, y, s, lay.ptr, lay.ent, lay.obj_mode, prior_Lam, prior_eta, self.code, VMP_OBJECT_CHUNK
        )
        none = np.empty((0, self.Kmodes, R, R)), np.empty((0, self.Kmodes, R)), np.empty(0), np.empty(0)
        self.store = CPStore(*none, self.P_Lam, self.P_eta, self.M, self.S, self.E2, np.full(3, np.nan))
        if init_E2 is None:
            second_moments(self.M, self.S, "full", out=self.E2)
        else:  # (a resumed fit: the bits the fit it resumes had)
            self.E2[:] = init_E2
        K.entry_pass(self.code, lay.gidx, y, s, self.M, self.E2, self.f_old, ENTRY_CHUNK, self.entry_part)
        self.a = a0 + 0.5 * n
        if model == "cp_gaussian" and init_b is not None:  # (a resumed fit: as it left off)
            self.b = init_b
            self.etau = self.a / init_b
        elif model == "cp_gaussian":
            self.etau = a0 / b0 if init_snr is None else init_snr / reference_var(y)
            self.b = self.a / self.etau
        else:
            self.etau, self.b = 1.0, math.nan
        self.elbo = math.nan

    def step(self, it):
        """One round: every mode's objects in turn, then q(tau) and the ELBO; its ``StepReport``."""
        lay, M, S = self.lay, self.M, self.S
        M_old, var_old = M.copy(), np.diagonal(S, axis1=1, axis2=2).copy()
        for k in range(self.Kmodes):
            lo, hi = int(lay.offsets[k]), int(lay.offsets[k + 1])
            K.update_mode(self.problem, self.store, k, lo, hi, self.etau, self.logdet, self.mat, self.vec)
            if not np.all(np.isfinite(self.logdet[lo:hi])):
                bad = int(np.sum(~np.isfinite(self.logdet[lo:hi])))
                raise FloatingPointError(
                    f"fit: the posterior precision of {bad} object(s) of mode {k} is not positive "
                    f"definite at iteration {it} (method='vmp')."
                )
        K.entry_pass(
            self.code, lay.gidx, self.y, self.s, M, self.E2, self.f_new, ENTRY_CHUNK, self.entry_part
        )
        total = math.fsum(self.entry_part.tolist())
        if self.model == "cp_gaussian":
            # q(tau) = Gamma(a0 + n / 2, b0 + E[sum (y - f)^2] / 2), then the ELBO's data term
            a = self.a
            self.b = b = self.b0 + 0.5 * total
            self.etau = a / b
            lik = 0.5 * self.n * (float(digamma(a)) - math.log(b) - math.log(2.0 * math.pi))
            lik -= 0.5 * self.etau * total + _kl_gamma(a, b, self.a0, self.b0)
        else:
            lik = total
        K.kl_pass(self.prior_Lam, self.prior_eta, self.c0, M, S, self.logdet, VMP_OBJECT_CHUNK, self.kl_part)
        self.elbo = lik - math.fsum(self.kl_part.tolist())
        f_new, f_old = self.f_new, self.f_old
        change = float(np.sqrt(np.mean((f_new - f_old) ** 2) / max(np.mean(f_new**2), 1e-300)))
        self.f_old, self.f_new = f_new, f_old
        param_change = moments_change(M_old, var_old, M, np.diagonal(S, axis1=1, axis2=2))
        return _loop.StepReport(change, 0, values={"param_change": param_change, "elbo": self.elbo})

    def finite(self):
        return bool(math.isfinite(self.elbo) and np.all(np.isfinite(self.M)))

    def result(self, shape, n_iter, converged, stop_reason, trace, options, copy=True):
        """The result object; ``copy=False`` hands over M and S."""
        noise = (float(self.a), float(self.b)) if self.model == "cp_gaussian" else None
        M, S = (self.M.copy(), self.S.copy()) if copy else (self.M, self.S)
        args = (self.model, "vmp", "full", self.R, shape, M, S, noise)
        state = VMPState(self.M.copy(), self.S.copy(), float(self.b), self.E2.copy())
        return CPResult(*args, n_iter, converged, stop_reason, trace, state, options)
