"""Bayesian CP tensor decomposition by CEP (``fit(coords, values, model="cp_gaussian" | "cp_probit")``).

The engine allocates the per-entry message store and the per-object posterior, runs the damped
parallel (or sequential) schedule with the kernels of ``fastcep.kernels.tensor``, tests convergence
and packs a ``CPResult``.
"""

import math
import sys
import time

import numpy as np

from .. import _validation as V
from .._loop import IterationInfo, Trace
from .._threads import num_threads
from ..kernels import tensor as K
from ..kernels.tensor import lp as KLP
from .init import svd_init
from .layout import check_coords, check_eval_set, check_values, make_layout
from .result import CPResult, CPState, eval_metric, second_moments

CP_MODELS = ("cp_gaussian", "cp_probit")
CP_METHODS = ("cep1", "cep2", "lp")
#: what method="lp" does with a Laplace message whose precision is not positive semi-definite
LP_INDEFINITE = {"skip": KLP.LP_SKIP, "apply": KLP.LP_APPLY, "clip": KLP.LP_CLIP}
COVARIANCES = ("full", "diag")
SCHEDULES = ("parallel", "block", "sequential")

#: initial (flat) site precision, DESIGN.md section 3
FLAT_PRECISION = 1e-6
#: entries per parallel work unit (fixed: results do not depend on the thread count)
ENTRY_CHUNK = 256
#: objects per parallel work unit of the posterior rebuild
OBJECT_CHUNK = 64
#: fixed groups of entries whose messages the parallel sweep sums per object (a constant, so
#: that the sums do not depend on the number of threads), used while the partial sums hold at
#: most SUM_FRACTION of the messages' blocks
SUM_GROUPS = 16
SUM_FRACTION = 0.25
#: most work units of the cavity sweep without sums (``expect_under="cavity"``, block schedule)
CAVITY_UNITS = 64
#: initial posterior variance of the embeddings, as a fraction of init_scale^2
INIT_VAR_FRACTION = 0.01
#: methods whose result is a point estimate (``fastcep.cp_wopt``): covariances zero, noise None;

#: curvature rules of the cp_probit message (``fit_cp``'s ``probit_curvature``)
PROBIT_CURVATURES = ("full", "rank1")

CP_DEFAULTS = {
    "prior_var": 1.0,
    "a0": 1e-3,
    "b0": 1e-3,
    "damping": 0.5,
    "max_iter": 500,
    "tol": 1e-4,
    "schedule": "parallel",
    "covariance": "full",
    "init_scale": 1.0,
    "noise_warmup": 10,
    "warmup_snr": 10.0,
    "prior_mean": 0.0,
    "init": "svd",
    "lp_indefinite": "clip",
    "probit_curvature": "full",
    "expect_under": "posterior",
}


def _exact_sum(x):
    """Correctly rounded sum: numpy's pairwise SIMD sum can differ in the last bits with the
    array's memory alignment, which made a resumed stream differ from an uninterrupted one."""
    return math.fsum(x.tolist())


def _noise_sums(a0, b0, alpha, beta, out):
    """(a0 + sum alpha, b0 + sum beta): fixed-chunk partial sums (``kernels.cp.chunk_sums``), then
    their correctly rounded sum; the same whatever the thread count or memory alignment."""
    K.chunk_sums(alpha, beta, ENTRY_CHUNK, out)
    return a0 + math.fsum(out[:, 0].tolist()), b0 + math.fsum(out[:, 1].tolist())


def _exact_var(x):
    """Variance from correctly rounded sums (see ``_exact_sum``)."""
    mean = _exact_sum(x) / len(x)
    return _exact_sum((x - mean) ** 2) / len(x)


def _allocate(n, Kmodes, R, n_obj, covariance):
    if covariance == "full":
        Lam = np.zeros((n, Kmodes, R, R))
        idx = np.arange(R)
        Lam[:, :, idx, idx] = FLAT_PRECISION
        post = (
            np.empty((n_obj, R, R)),
            np.empty((n_obj, R)),
            np.empty((n_obj, R)),
            np.empty((n_obj, R, R)),
            np.empty((n_obj, R, R)),
        )
    else:
        Lam = np.full((n, Kmodes, R), FLAT_PRECISION)
        post = tuple(np.empty((n_obj, R)) for _ in range(5))
    return Lam, np.zeros((n, Kmodes, R)), post


def _variances(S, covariance):
    """Posterior variances (n_obj, R): a view of S."""
    return S if covariance == "diag" else np.diagonal(S, axis1=1, axis2=2)


def _change(M_old, var_old, M, var):
    """The paper's change measure: largest change of a mean (in sds) or relative change of a variance."""
    return float(max(np.max(np.abs(M - M_old) / np.sqrt(var)), np.max(np.abs(var - var_old) / var)))


def check_probit_curvature(value, model, method, func):
    """The ``probit_curvature`` option: "full" or "rank1", the latter for cp_probit CEP-1 only."""
    V.check_choice(value, "probit_curvature", func, PROBIT_CURVATURES)
    if value != "full" and (model != "cp_probit" or method != "cep1"):
        raise ValueError(
            f"{func}: probit_curvature={value!r} applies to model='cp_probit' with "
            f"method='cep1' only (got model={model!r}, method={method!r})."
        )


#: where cep1 takes the expectation of the conditional moments over the other modes
EXPECT_UNDER = ("posterior", "cavity")


def check_expect_under(value, method, schedule, covariance, func):
    """The ``expect_under`` option: "cavity" for method "cep1" with full covariances and the
    parallel or block schedule only."""
    V.check_choice(value, "expect_under", func, EXPECT_UNDER)
    supported = method == "cep1" and covariance == "full" and schedule in ("parallel", "block")
    if value == "cavity" and not supported:
        raise ValueError(
            f"{func}: expect_under='cavity' supports method='cep1' with covariance='full' and "
            f"schedule='parallel' or 'block' only (got method={method!r}, covariance={covariance!r}, "
            f"schedule={schedule!r})."
        )


def cavity_scratch(n_units, Kmodes, R):
    """Per-work-unit scratch of ``kernels.cp.sweep_cavity_full`` after ``mat`` and ``vec``: one
    entry's cavity moments (cp_probit), then the batch's blocks, rows, moments and flags."""
    B = K.CAVITY_BATCH
    return (
        np.empty((n_units, Kmodes, R)),
        np.empty((n_units, Kmodes, R, R)),
        np.empty((n_units, 2, R, R, B)),
        np.empty((n_units, 2, R, B)),
        np.empty((n_units, Kmodes, R, B)),
        np.empty((n_units, Kmodes, R, R, B)),
        np.empty((n_units, B), dtype=np.bool_),
    )


def fit_cp(
    coords,
    values,
    model,
    method="cep1",
    *,
    shape=None,
    rank=None,
    prior_var=CP_DEFAULTS["prior_var"],
    a0=CP_DEFAULTS["a0"],
    b0=CP_DEFAULTS["b0"],
    damping=CP_DEFAULTS["damping"],
    max_iter=CP_DEFAULTS["max_iter"],
    tol=CP_DEFAULTS["tol"],
    schedule=CP_DEFAULTS["schedule"],
    covariance=CP_DEFAULTS["covariance"],
    init_scale=CP_DEFAULTS["init_scale"],
    noise_warmup=CP_DEFAULTS["noise_warmup"],
    warmup_snr=CP_DEFAULTS["warmup_snr"],
    prior_mean=CP_DEFAULTS["prior_mean"],
    init=CP_DEFAULTS["init"],
    lp_indefinite=CP_DEFAULTS["lp_indefinite"],
    probit_curvature=CP_DEFAULTS["probit_curvature"],
    expect_under=CP_DEFAULTS["expect_under"],
    eval_set=None,
    n_threads=None,
    callback=None,
    seed=None,
    init_state=None,
    verbose=False,
    _prior=None,
    _init_moments=None,
):
    """Fit a Bayesian CP decomposition by CEP-1 or Laplace propagation (called by ``fastcep.fit``).

    Parameters
    ----------
    coords : int array (n, K), K >= 2
        0-based coordinates of the observed entries. A repeated row is a second, independent
        observation of that entry (it has its own messages).
    values : array (n,)
        Real values (cp_gaussian) or binary labels {0, 1}, {-1, 1} or bool (cp_probit).
    model : {"cp_gaussian", "cp_probit"}
    method : {"cep1", "lp"}
        "cep2" is refused with an explanation (the paper found it worse than CEP-1 for tensors).
        "lp": Laplace propagation, the paper's baseline (section 5.2), in the same message store
        and schedule: each entry's K messages come from the mode of its joint tilted
        distribution over the K embeddings (damped Newton with the exact Hessian, at most 100
        iterations, where the paper used L-BFGS) and the marginal blocks of the inverse Hessian
        there (``kernels.cp_lp``). cp_gaussian uses E[tau] (the noise posterior mean) in the
        likelihood; the noise messages are CEP's (shape 1/2, rate E[(y - f)^2] / 2 under the
        posterior). Full covariances with schedule "parallel" or "block" only (a block
        iteration costs K parallel ones). 20-40 times slower per iteration than CEP-1 (Alog,
        rank 8) and fragile: it often settles in a fixed point far worse than CEP-1's (the
        paper's finding too); see ``lp_indefinite``.
    shape : sequence of K ints, optional
        Tensor shape (default: 1 + the largest index of each mode).
    rank : int >= 1 (required)
    prior_var : float > 0, default 1.0
        Variance of the N(0, prior_var I) prior of every embedding.
    a0, b0 : float > 0, default 1e-3
        Gamma(a0, b0) prior of the noise precision tau (cp_gaussian).
    damping : float in (0, 1], default 0.5
        ``msg <- (1 - damping) msg + damping new`` in natural parameters.
    max_iter : int, default 500
    tol : float >= 0, default 1e-4
        Stop when the relative RMS change of the training entries' predictive means over one
        iteration is below tol (invariant to the gauges of the factors).
    schedule : {"parallel", "block", "sequential"}, default "parallel"
        "parallel": every entry's messages to every mode from one posterior (full covariances;
        with covariance="diag" this is the block schedule, since simultaneous updates of the
        coupled coordinates of an object diverge). "block": mode by mode (and coordinate by
        coordinate for "diag"), each block in parallel over entries, then its objects rebuilt:
        stable for any damping, like alternating least squares. "sequential": entries in a
        seeded random order, the posterior refreshed after each (single-threaded).
    covariance : {"full", "diag"}, default "full"
        R x R posterior covariance per object, or a diagonal one (fully factorised; for large R).
    lp_indefinite : {"clip", "skip", "apply"}, default "clip"
        method="lp": what to do with a message whose precision is not positive semi-definite.
        For R >= 2 that is nearly every Laplace message: on directions orthogonal to the
        gradient of f its precision is -h'^2 (a quadratic form of the other modes' inverse
        Hessian block), negative whenever the residual term h' (E[tau] (y - f) or s phi/Phi at
        the mode) is nonzero. "skip" (the engine's rule for every method) then leaves the
        messages flat and the fit at its start (count in ``trace.skipped``); "apply" is textbook
        LP (only a positive definite Hessian at the mode is required; the posterior can lose
        positive definiteness, raising FloatingPointError); "clip" applies the positive
        semi-definite part of the precision (eigenvalues clipped at 0), with the
        precision-times-mean chosen so that cavity times message still has its mean at the mode
        (the default: the only rule that gave usable fits on Alog).
    probit_curvature : {"full", "rank1"}, default "full"
        cp_probit with method="cep1": the curvature term of the message. Both replace z (the
        Hadamard product of the other modes' embeddings) by E[z] and z^T Sc z by tr(Sc E[z z^T]);
        they differ in the second derivative of log Z, (r u / c) z z^T. "full" (DESIGN.md 3.2)
        takes E[z z^T] there: a full-rank message, replaced by the rank-one one where that is
        indefinite. "rank1" takes E[z] E[z]^T (the supplement's literal replacement, section
        1.1.2): a rank-one message along E[z], like probit EP's, always valid, and 1.5-1.7 times
        faster at rank 8. On Enron "rank1" reaches a fixed point where "full" keeps cycling, with
        a test AUC higher at ranks 3 and 10 and within 0.003 at 5 and 8 (0.851 / 0.846 / 0.851
        / 0.861 against 0.826 / 0.849 / 0.851 / 0.847 at ranks 3 / 5 / 8 / 10, prior_mean chosen
        on held-out entries),
        and on six small synthetic tensors its predictive probabilities are closer to a Gibbs
        sampler's (BENCHMARKS.md).
    expect_under : {"posterior", "cavity"}, default "posterior"
        Method "cep1": the distribution of the other modes under which the message of an entry
        to mode k takes the expected conditional moments (E[z], E[z z^T]). "posterior" (the
        paper's section 3.2 and DESIGN.md 3.2): the current posterior q; for cp_gaussian the
        fixed point is then mean-field VMP's. "cavity": the entry's cavity of each other mode,
        q(u) divided by the entry's own message to it, so that an entry's messages do not feed
        on each other. The noise precision and its messages stay the posterior's (under the
        cavities too, tau came out 26-31 % low against a Gibbs sampler). Full covariances with
        the "parallel" or "block" schedule only. The first sweep of a fresh fit has no messages
        to remove and uses the initial moments, as "posterior" does. It costs K Cholesky
        factorisations per entry and iteration (formed in batches of entries, with SIMD): on
        Alog, 1.0-2.0x cp_gaussian's "posterior" time per iteration at rank 3 and 1.9-2.6x at
        rank 8 (BENCHMARKS.md). Measured (BENCHMARKS.md): on Alog, with ``prior_mean``
        chosen on held-out training entries, it fits the training entries less closely and
        predicts the test entries better at every rank. Against a Gibbs sampler it is closer
        for cp_probit; for cp_gaussian it is further on dense synthetic tensors, where
        "posterior" is within 0.01 sd.
    init : {"svd", "random"}, default "svd"
        Initial posterior means: leading singular vectors of each mode's unfolding, or N(0,
        init_scale^2) draws (seeded).
    init_scale : float >= 0, default 1.0
    noise_warmup : int >= 0, default 10
        cp_gaussian: iterations with the noise precision held at ``warmup_snr / Var(values)``.
    warmup_snr : float > 0, default 10.0
    prior_mean : float >= 0, default 0.0
        With a positive value, the prior of each embedding is N(m, prior_var I) with m drawn
        (seeded) as |N(0, prior_mean^2)| per coordinate (the supplement writes the prior as
        N(m_s, v I)), and the fit starts from m. Small positive means break the sign symmetry
        whose all-zero fixed point very sparse binary data converge to: on Enron (1,010
        training entries) rank 8 test AUC 0.757 with 0 and 0.851 with the value chosen per fold
        on a held-out fifth of the training entries (``python -m bench.cp_quality
        --select-prior-mean 0 0.1 0.3 0.5 1``; BENCHMARKS.md). Choose it the same way.
    eval_set : (coords, values) or None
        Test entries whose RMSE (cp_gaussian) or AUC (cp_probit) is recorded every iteration in
        ``trace.eval_metric``.
    n_threads, callback, seed, init_state, verbose
        As for regression (the private ``_prior`` (prior_Lam, prior_eta) per object and
        ``_init_moments`` (means, covs) serve ``fastcep.stream``); the callback receives a
        ``fastcep.IterationInfo``, ``init_state`` a ``CPState`` (``res.state``) of a fit on the same
        entries.

    Returns
    -------
    CPResult

    Raises
    ------
    ValueError, TypeError
        On bad input, naming the parameter and the bad rows.
    FloatingPointError
        If the posterior becomes non-finite or not positive definite (try a smaller damping or
        schedule="block").
    """
    func = "fit"
    V.check_choice(model, "model", func, CP_MODELS)
    V.check_choice(method, "method", func, CP_METHODS)
    if method == "cep2":
        raise ValueError(
            f"fit: method='cep2' is not implemented for model={model!r}: its second-order term needs "
            "derivatives of the R x R conditional moments with respect to the other modes' "
            "embeddings for every message, and the paper reports that it is worse than CEP-1 for "
            "tensors (section 5.2). Use method='cep1'."
        )
    coords, shape = check_coords(coords, shape, func)
    n, Kmodes = coords.shape
    y = check_values(values, n, model, func)
    s = y if model == "cp_probit" else np.zeros(n)
    if rank is None:
        raise V.param_error("rank", func, "an int >= 1", rank, TypeError)
    R = V.check_int(rank, "rank", func, low=1, high=1000)
    pv = V.check_float(prior_var, "prior_var", func, low=0.0, low_open=True)
    a0 = V.check_float(a0, "a0", func, low=0.0, low_open=True)
    b0 = V.check_float(b0, "b0", func, low=0.0, low_open=True)
    rho = V.check_float(damping, "damping", func, low=0.0, high=1.0, low_open=True)
    max_iter = V.check_int(max_iter, "max_iter", func, low=1)
    tol = V.check_float(tol, "tol", func, low=0.0)
    V.check_choice(schedule, "schedule", func, SCHEDULES)
    V.check_choice(covariance, "covariance", func, COVARIANCES)
    V.check_choice(lp_indefinite, "lp_indefinite", func, tuple(LP_INDEFINITE))
    check_probit_curvature(probit_curvature, model, method, func)
    check_expect_under(expect_under, method, schedule, covariance, func)
    if method == "lp" and (schedule not in ("parallel", "block") or covariance != "full"):
        raise ValueError(
            f"fit: method='lp' supports schedule='parallel' or 'block' with covariance='full' only. "
            f"Got schedule={schedule!r}, covariance={covariance!r} instead."
        )
    init_scale = V.check_float(init_scale, "init_scale", func, low=0.0)
    noise_warmup = V.check_int(noise_warmup, "noise_warmup", func, low=0)
    warmup_snr = V.check_float(warmup_snr, "warmup_snr", func, low=0.0, low_open=True)
    prior_mean = V.check_float(prior_mean, "prior_mean", func, low=0.0)
    V.check_choice(init, "init", func, ("svd", "random"))
    n_threads = V.check_n_threads(n_threads, func)
    callback = V.check_callback(callback, func)
    rng = V.check_seed(seed, func)
    if eval_set is not None:
        ev_coords, ev_values = check_eval_set(eval_set, shape, model, func)
    options = dict(
        shape=shape,
        rank=R,
        prior_var=pv,
        a0=a0,
        b0=b0,
        damping=rho,
        max_iter=max_iter,
        tol=tol,
        schedule=schedule,
        covariance=covariance,
        init_scale=init_scale,
        noise_warmup=noise_warmup,
        warmup_snr=warmup_snr,
        prior_mean=prior_mean,
        init=init,
        n_threads=n_threads,
        seed=seed,
    )
    if method == "lp":
        options["lp_indefinite"] = lp_indefinite
    if model == "cp_probit" and method == "cep1":
        options["probit_curvature"] = probit_curvature
    if expect_under != "posterior":
        options["expect_under"] = expect_under

    lay = make_layout(coords, shape)
    n_obj = int(lay.offsets[-1])
    if init_state is None:
        Lam, eta, (P_Lam, P_eta, M, S, E2) = _allocate(n, Kmodes, R, n_obj, covariance)
        alpha = np.zeros(n)
        beta = np.zeros(n)
    else:
        Lam, eta, alpha, beta = _check_state(init_state, n, Kmodes, R, covariance, func)
        _, _, (P_Lam, P_eta, M, S, E2) = _allocate(1, Kmodes, R, n_obj, covariance)
    if _prior is None:
        eye = np.eye(R) if covariance == "full" else np.ones(R)
        prior_Lam = np.ascontiguousarray(np.broadcast_to(eye / pv, (n_obj, *eye.shape)))
        prior_eta = np.zeros((n_obj, R))
        m0 = None
        if prior_mean > 0.0:  # N(m, prior_var I), m = |N(0, prior_mean^2)| per coordinate (seeded)
            m0 = prior_mean * np.abs(rng.standard_normal((n_obj, R)))
            prior_eta = m0 / pv
    else:  # per-object priors (streaming: the current posterior of each object)
        m0 = None
        prior_Lam = np.ascontiguousarray(_prior[0], dtype=np.float64)
        prior_eta = np.ascontiguousarray(_prior[1], dtype=np.float64)
    bad = np.zeros(n_obj, dtype=np.int64)
    n_chunks = -(-n // ENTRY_CHUNK)
    skipped = np.zeros(n_chunks, dtype=np.int64)
    if covariance == "full":
        work = np.empty((n_chunks, K.ENTRY_MATS, R, R))
        scr = np.empty((n_chunks, K.ENTRY_VECS, R))
        Ls = np.empty((-(-n_obj // OBJECT_CHUNK), R, R))
    else:
        scr = np.empty((n_chunks, 2))
    # the parallel schedule with full covariances sums each fixed group of entries' new messages
    # per object during the sweep (kernels.cp.sweep_full with_sums; reduce_object_sums), when
    # those partial sums are small beside the messages (not for a small batch over many objects)
    n_groups = min(SUM_GROUPS, n_chunks)
    with_sums = (
        covariance == "full"
        and method == "cep1"
        and schedule == "parallel"
        and n_groups * n_obj <= SUM_FRACTION * n * Kmodes
    )
    if with_sums:
        part_L = np.empty((n_groups, n_obj, R, R))
        part_e = np.empty((n_groups, n_obj, R))
        sweep_chunk = -(-n // n_groups)
        n_groups = -(-n // sweep_chunk)  # (every group non-empty)
    else:
        part_L, part_e = np.empty((1, 0, R, R)), np.empty((1, 0, R))
        sweep_chunk = ENTRY_CHUNK
    # expect_under="cavity": the sweeps after the first (which has no messages to remove yet and
    # takes the initial moments, as "posterior" does) form each entry's cavities, in work units
    # of their own: the sum groups, else at most CAVITY_UNITS chunks (the messages do not depend
    # on the chunk; each unit's batch scratch is about 160 KB at rank 8)
    cavity = expect_under == "cavity"
    if cavity:
        cav_units = n_groups if with_sums else min(n_chunks, CAVITY_UNITS)
        cav_chunk = sweep_chunk if with_sums else -(-n // cav_units)
        cav_units = -(-n // cav_chunk)  # (every unit non-empty)
        cav_scratch = cavity_scratch(cav_units, Kmodes, R)
    if method == "lp":  # per-chunk scratch of the Laplace messages (kernels.cp_lp.sweep_lp)
        KR = Kmodes * R
        lp_scratch = (
            np.empty((n_chunks, Kmodes, R, R)),
            np.empty((n_chunks, Kmodes, R)),
            np.empty((n_chunks, Kmodes, R, R)),
            np.empty((n_chunks, Kmodes, R)),
            np.zeros((n_chunks, Kmodes), dtype=np.bool_),
            np.empty((n_chunks, KLP.LP_MATS, KR, KR)),
            np.empty((n_chunks, KLP.LP_VECS, KR)),
        )
    if model == "cp_gaussian":
        code = K.MODEL_GAUSSIAN
    else:
        code = K.MODEL_PROBIT_RANK1 if probit_curvature == "rank1" else K.MODEL_PROBIT
    # the parallel schedule computes the noise messages in the sweep's pass over the entries
    fused_noise = model == "cp_gaussian" and schedule == "parallel" and covariance == "full"

    def rebuild_objects(lo, hi):
        """Full covariances: posterior of objects lo..hi-1 = prior + messages."""
        K.rebuild_full(
            lay.ptr,
            lay.ent,
            lay.obj_mode,
            lo,
            hi,
            Lam,
            eta,
            prior_Lam,
            prior_eta,
            P_Lam,
            P_eta,
            M,
            S,
            E2,
            OBJECT_CHUNK,
            Ls,
            bad,
        )

    def rebuild():
        if covariance == "full":
            rebuild_objects(0, n_obj)
        else:
            K.rebuild_diag(
                lay.ptr, lay.ent, lay.obj_mode, Lam, eta, prior_Lam, prior_eta, P_Lam, P_eta, M, S, E2, bad
            )
        check_proper()

    def check_proper():
        if bad.any():
            raise FloatingPointError(
                f"fit: the posterior precision of {int(bad.sum())} object(s) is not positive definite; "
                "try a smaller 'damping'."
            )

    with num_threads(n_threads):
        rebuild()
        if init_state is None:
            # symmetry breaking: initial posterior means from the data (init="svd", see _cpinit)
            # or random (seeded), with small covariances (INIT_VAR_FRACTION of their mean square),
            # so that the first sweep sees E[z z^T] ~ E[z] E[z]^T like an alternating least
            # squares step; with the prior covariance, the first messages over-count the
            # spread of the means and pull them towards 0
            if _init_moments is not None:
                M[:] = _init_moments[0]
            elif _prior is None and m0 is not None:
                M[:] = m0
            elif init == "svd":
                M[:] = svd_init(coords, y, shape, R, init_scale, rng)
            else:
                M[:] = init_scale * rng.standard_normal(M.shape)
            v0 = max(INIT_VAR_FRACTION * float(np.mean(M**2)), 1e-12)
            if covariance == "full":
                S[:] = v0 * np.eye(R)
            else:
                S[:] = v0
            if _init_moments is not None:
                S[:] = _init_moments[1]
            second_moments(M, S, covariance, out=E2)
            # the posterior natural parameters get the prior's precision (P_Lam, from the flat
            # messages) centred at the initial means: the first cavities are broad (for cp_probit
            # a near-certain cavity would make the first messages carry no information) and a
            # sequential sweep starts from the initial means; the rebuild after the first sweep
            # forgets this pseudo-observation (posterior = prior + messages)
            if covariance == "full":
                P_eta[:] = np.einsum("oij,oj->oi", P_Lam, M)
            else:
                P_eta[:] = P_Lam * M
        noise_chunks = np.empty((n_chunks, 2))
        noise = np.array([*_noise_sums(a0, b0, alpha, beta, noise_chunks), 0.0])
        noise[2] = noise[0] / noise[1]
        warm = model == "cp_gaussian" and init_state is None and noise_warmup > 0
        if warm:
            # warm-up: the noise precision held at warmup_snr / Var(y) while the embeddings
            # take shape; learning it from the start lets a poor early fit inflate the noise,
            # which regularises the embeddings into a local optimum that explains the data as
            # noise (measured: 2 seeds in 5 stuck at E tau ~ 5 instead of 100 on a 30 x 25 x 20
            # rank-3 tensor)
            noise[2] = warmup_snr / max(_exact_var(y), 1e-300)
        tau_init = noise[2]
        f_old = np.zeros(n)
        f_new = np.empty(n)
        K.predict_mean(lay.gidx, M, f_old)
        elapsed, changes, skips, paper, damps, metric = [], [], [], [], [], []
        converged, stop_reason = False, "max_iter"
        start = time.perf_counter()
        it = 0
        for it in range(1, max_iter + 1):
            M_old, var_old = M.copy(), _variances(S, covariance).copy()
            cavity_sweep = cavity and (it > 1 or init_state is not None)
            if schedule in ("parallel", "block"):
                if covariance == "full":
                    # parallel: all modes from one posterior; block: mode by mode, each mode's
                    # objects rebuilt before the next (see kernels.cp.sweep_full)
                    skipped[:] = 0
                    blocks = [(0, Kmodes)] if schedule == "parallel" else [(k, k + 1) for k in range(Kmodes)]
                    for k_lo, k_hi in blocks:
                        if method == "lp":  # (full covariances: checked above)
                            KLP.sweep_lp(
                                code,
                                lay.gidx,
                                y,
                                s,
                                Lam,
                                eta,
                                P_Lam,
                                P_eta,
                                M,
                                E2,
                                noise[2],
                                rho,
                                LP_INDEFINITE[lp_indefinite],
                                k_lo,
                                k_hi,
                                ENTRY_CHUNK,
                                skipped,
                                *lp_scratch,
                                fused_noise,
                                alpha,
                                beta,
                            )
                        elif cavity_sweep:
                            K.sweep_cavity_full(
                                code, lay.gidx, y, s, Lam, eta, P_Lam, P_eta, M, E2, noise[2], rho, k_lo,
                                k_hi, cav_chunk, skipped[:cav_units], work, scr, *cav_scratch, fused_noise,
                                alpha, beta, with_sums, part_L[:n_groups], part_e[:n_groups],
                            )  # fmt: skip
                        else:
                            K.sweep_full(
                                code,
                                lay.gidx,
                                y,
                                s,
                                Lam,
                                eta,
                                P_Lam,
                                P_eta,
                                M,
                                E2,
                                noise[2],
                                rho,
                                k_lo,
                                k_hi,
                                sweep_chunk,
                                skipped[: n_groups if with_sums else n_chunks],
                                work,
                                scr,
                                fused_noise,
                                alpha,
                                beta,
                                with_sums,
                                part_L[:n_groups],
                                part_e[:n_groups],
                            )
                        if schedule == "block":
                            rebuild_objects(lay.offsets[k_lo], lay.offsets[k_hi])
                    if model == "cp_gaussian" and not fused_noise:
                        K.noise_messages_full(lay.gidx, y, alpha, beta, M, E2, rho)
                else:
                    # block coordinate schedule: mode by mode, coordinate by coordinate
                    skipped[:] = 0
                    for k in range(Kmodes):
                        for r in range(R):
                            K.sweep_diag_coord(
                                code,
                                lay.gidx,
                                y,
                                s,
                                Lam,
                                eta,
                                P_Lam,
                                P_eta,
                                M,
                                E2,
                                noise[2],
                                rho,
                                k,
                                r,
                                ENTRY_CHUNK,
                                skipped,
                                scr,
                            )
                            K.rebuild_diag_coord(
                                lay.ptr,
                                lay.ent,
                                lay.offsets[k],
                                lay.offsets[k + 1],
                                k,
                                r,
                                Lam,
                                eta,
                                prior_Lam,
                                prior_eta,
                                P_Lam,
                                P_eta,
                                M,
                                S,
                                E2,
                                bad,
                            )
                    if model == "cp_gaussian":
                        K.noise_messages_diag(lay.gidx, y, alpha, beta, M, E2, rho)
                n_skipped = int(skipped.sum())
            else:
                order = rng.permutation(n).astype(np.int64)
                if covariance == "full":
                    n_skipped = int(
                        K.sequential_full(
                            code,
                            order,
                            lay.gidx,
                            y,
                            s,
                            Lam,
                            eta,
                            alpha,
                            beta,
                            P_Lam,
                            P_eta,
                            M,
                            S,
                            E2,
                            noise,
                            warm and it <= noise_warmup,
                            rho,
                            work[0],
                            scr[0],
                            np.empty((Kmodes, R, R)),
                            np.empty((Kmodes, R)),
                            np.empty((R, R)),
                        )
                    )
                else:
                    n_skipped = int(
                        K.sequential_diag(
                            code,
                            order,
                            lay.gidx,
                            y,
                            s,
                            Lam,
                            eta,
                            alpha,
                            beta,
                            P_Lam,
                            P_eta,
                            M,
                            S,
                            E2,
                            noise,
                            warm and it <= noise_warmup,
                            rho,
                            scr[0],
                        )
                    )
            if with_sums:  # posterior = prior + the sweep's per-group sums of the messages
                K.reduce_object_sums(
                    prior_Lam, prior_eta, part_L[:n_groups], part_e[:n_groups], P_Lam, P_eta, M, S, E2,
                    OBJECT_CHUNK, Ls, bad,
                )  # fmt: skip
                check_proper()
            else:
                rebuild()  # exact posterior = prior + messages (also removes sequential drift)
            if model == "cp_gaussian":
                noise[0], noise[1] = _noise_sums(a0, b0, alpha, beta, noise_chunks)
                noise[2] = tau_init if warm and it <= noise_warmup else noise[0] / noise[1]
            # convergence: relative RMS change of the predictive means of the training entries,
            # invariant to the scaling and rotation gauges of the CP factors (which drift slowly
            # and keep per-parameter changes from settling)
            K.predict_mean(lay.gidx, M, f_new)
            change = float(np.sqrt(np.mean((f_new - f_old) ** 2) / max(np.mean(f_new**2), 1e-300)))
            param_change = _change(M_old, var_old, M, _variances(S, covariance))
            f_old, f_new = f_new, f_old
            now = time.perf_counter() - start
            elapsed.append(now)
            changes.append(change)
            skips.append(n_skipped)
            paper.append(param_change)
            damps.append(rho)
            result = None
            if eval_set is not None or callback is not None:  # a result object only when needed
                result = _pack(
                    model,
                    method,
                    covariance,
                    R,
                    shape,
                    M,
                    S,
                    noise,
                    it,
                    converged,
                    stop_reason,
                    (elapsed, changes, skips, paper, damps, metric),
                    Lam,
                    eta,
                    alpha,
                    beta,
                    options,
                )
            metric.append(eval_metric(result, ev_coords, ev_values) if eval_set is not None else np.nan)
            if verbose:
                extra = f", eval {metric[-1]:.4f}" if eval_set is not None else ""
                print(
                    f"[fastcep] {model}/{method} iter {it}: change {change:.3e}, skipped {n_skipped}"
                    f"{extra}, {now:.3f} s",
                    file=sys.stderr,
                )
            if not np.all(np.isfinite(M)):
                raise FloatingPointError(f"fit: the posterior became non-finite at iteration {it}.")
            if change < tol:
                converged, stop_reason = True, "tol"
            if callback is not None:
                if callback(IterationInfo(it, change, now, n_skipped, result)) and not converged:
                    stop_reason = "callback"
                    break
            if converged:
                break
    res = _pack(
        model,
        method,
        covariance,
        R,
        shape,
        M,
        S,
        noise,
        it,
        converged,
        stop_reason,
        (elapsed, changes, skips, paper, damps, metric),
        Lam,
        eta,
        alpha,
        beta,
        options,
        copy=False,
    )
    # the posterior's natural parameters (streaming absorbs them as the next prior)
    res._P_Lam, res._P_eta = P_Lam, P_eta
    return res


def _pack(
    model,
    method,
    covariance,
    R,
    shape,
    M,
    S,
    noise,
    it,
    converged,
    stop_reason,
    lists,
    Lam,
    eta,
    alpha,
    beta,
    options,
    copy=True,
):
    """The result object; ``copy=False`` hands over M and S (only once the fit is done with them)."""
    elapsed, changes, skips, paper, damps, metric = lists
    trace = Trace.from_columns(
        len(elapsed),
        elapsed=elapsed,
        change=changes,
        skipped=skips,
        param_change=paper,
        damping=damps,
        eval_metric=metric,
    )
    noise_post = (float(noise[0]), float(noise[1])) if model == "cp_gaussian" else None
    res = CPResult(
        model,
        method,
        covariance,
        R,
        shape,
        M.copy() if copy else M,
        S.copy() if copy else S,
        noise_post,
        it,
        converged,
        stop_reason,
        trace,
        CPState(Lam, eta, alpha, beta),
        options,
    )
    return res


def _check_state(state, n, Kmodes, R, covariance, func):
    if not isinstance(state, CPState):
        raise V.param_error("init_state", func, "a CPState (res.state) or None", state, TypeError)
    want = (n, Kmodes, R, R) if covariance == "full" else (n, Kmodes, R)
    if state.Lam.shape != want or state.eta.shape != (n, Kmodes, R) or state.alpha.shape != (n,):
        raise V.param_error("init_state", func, f"messages of shape {want}", f"shape {state.Lam.shape}")
    return (
        np.array(state.Lam, dtype=np.float64),
        np.array(state.eta, dtype=np.float64),
        np.array(state.alpha, dtype=np.float64),
        np.array(state.beta, dtype=np.float64),
    )
