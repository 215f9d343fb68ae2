"""The option table of ``fastcep.fit`` and ``fastcep.stream``, checked by one validator.

``OPTIONS`` declares every option once, as scikit-learn's ``_parameter_constraints``: its name, a
one-line doc and, per family, its constraint and default (``fastcep._validation.Spec``). The
families are "regression" (``fit`` with model "probit" or "logistic"), "cp" (``fit`` with a CP
model: methods "cep1", "cep2" and "lp" in the message engine, the baselines "vmp" and
"cp_wopt") and "stream" (``fastcep.stream``). A spec is looked up under "family/method" first,
then under "family" (within its ``methods``); ``Refused`` marks an option that does not apply to
a method, and a name with no spec is unknown there. ``RULES`` holds the checks that involve more
than one option.

``validate`` is the one check of every entry point (``fit_regression``, ``fit_cp``, ``fit_vmp``,
``fit_cp_wopt``, ``stream``), whose signature defaults come from ``defaults``; the estimators
take their defaults, the command line its choices and help strings, and ``fit`` and ``stream``
the "Options" section of their docstrings (``document``) from the same table.
"""

import difflib
import textwrap

from . import _validation as V
from ._models import (
    CP_FAST_PATHS,
    CP_MODELS,
    GENERIC_METHODS,
    REGRESSION_LIKELIHOODS,
    REGRESSION_METHODS,
    resolve,
)
from ._validation import (
    REQUIRED,
    Bool,
    ByModel,
    Callable,
    Choice,
    Client,
    DataCheck,
    Either,
    Int,
    Maybe,
    Option,
    PathLike,
    Real,
    Refused,
    Required,
    ScalarOr,
    Seed,
    Spec,
    Threads,
)
from .kernels.likelihoods import REGISTRY, is_log_concave

FAMILIES = ("regression", "cp", "stream")
#: the CP methods of the message engine (``fastcep.tensor.engine.fit_cp``)
CEP = ("cep1", "lp")
#: why a CP fit refuses method="cep2"
NO_CP_CEP2 = (
    "is not implemented for the CP models: its second-order term needs derivatives of the R x R "
    "conditional moments with respect to the other modes' embeddings for every message, and the "
    "paper reports that it is worse than CEP-1 for tensors (section 5.2). Use method='cep1'."
)

POSITIVE = Real(0.0, low_open=True)
NON_NEGATIVE = Real(0.0)
DAMPING = Real(0.0, 1.0, low_open=True)
#: the CP models (``fastcep._models``: "cp" takes the ``likelihood`` option)
CP_MODEL = Choice(*CP_MODELS)
CP_SCHEDULE = Choice("parallel", "block", "sequential")
#: the probit curvature's spec in fit and stream (what None stands for: ``_rank_one_default``)
RANK_ONE = Spec(
    Maybe(Choice("full", "rank1")), None,
    "None: 'rank1' for cp_probit with 'cep1', else 'full' (which applies to every other case)",
)  # fmt: skip
#: why the Bayesian options do not apply to CP-WOPT (its refusal names them all, ``REFUSALS``)
POINT_ESTIMATE = "a point estimate by L-BFGS"

OPTIONS = (
    Option("model", "The likelihood: regression or CP of binary labels, real values or counts.", {
        "regression": Spec(
            Choice(*REGRESSION_LIKELIHOODS), "probit",
            "or a likelihood object (fastcep.likelihoods): Bernoulli, Gaussian, Poisson, "
            "NegativeBinomial, StudentT, Custom",
        ),
        "cp": Spec(
            CP_MODEL,
            note="'cp_gaussian': real values, Gaussian noise; 'cp_probit': binary; 'cp_<name>': any "
            "other likelihood of the seam's registry (fastcep.kernels.likelihoods.REGISTRY), by CEP-1 "
            "with rank-one messages from its tilted moments (method 'cep1' only; "
            "fastcep.tensor.likelihoods): 'cp_logistic' binary; 'cp': the likelihood option's",
        ),
        "stream": Spec(CP_MODEL, note="as fit's ('cp_<name>' and 'cp': method 'cep1' only)"),
    }),
    Option("method", "The inference method (the paper's CEP, or a baseline).", {
        "regression": Spec(
            Choice(*REGRESSION_METHODS), "cep1",
            "see the method parameter above",
        ),
        "cp": Spec(
            Choice(*CEP, "vmp", "cp_wopt", refused={"cep2": NO_CP_CEP2}), "cep1",
            "'cep2' is refused (the paper found it worse than CEP-1 for tensors); 'lp' Laplace "
            "propagation, 'vmp' mean-field VMP, 'cp_wopt' CP-WOPT by L-BFGS",
        ),
        "stream": Spec(
            Choice("cep1", "post"), "cep1",
            "ADF-CEP, or POST: streaming variational Bayes, each batch fitted by VMP",
        ),
    }),
    Option("likelihood", "model='cp': the likelihood, a fastcep.likelihoods object or a name.", {
        "cp": Spec(
            DataCheck("a likelihood object (fastcep.likelihoods), a name or None"), None,
            "with model='cp' only (required there); 'cp_<name>' is the shorthand of likelihood='<name>' "
            "(its defaults). A parameter None is learned, once per iteration, from the posterior "
            "marginals of the entries' f (fastcep.glm.learn); the fitted likelihood is "
            "res.likelihood. A likelihood equal to a hand-written model's runs it: Gaussian() "
            "(learned variance) is cp_gaussian, Bernoulli('probit') cp_probit; a Gaussian of known "
            "variance and any other go the generic way (CEP-1, method 'cep1' only)",
        ),
        "stream": Spec(
            DataCheck("a likelihood object (fastcep.likelihoods), a name or None"), None,
            "as fit's; a learned parameter is learned within each batch, the batches before as its "
            "prior, and carried to the next (fastcep.streaming.adf)",
        ),
    }),
    Option("shape", "Tensor shape, K ints (default: 1 + the largest index of each mode).", {
        "cp": Spec(DataCheck("sequence of K ints or None"), None),
        "stream": Spec(DataCheck("sequence of K ints or None"), None, "arrays only: a file has its own"),
    }),
    Option("rank", "Rank R of the decomposition.", {
        "cp/lp": Spec(Required(Int(1, 1000), "an int >= 1"), None),
        "cp/vmp": Spec(Required(Int(1, 1000), "an int >= 1"), None),
        "cp/cp_wopt": Spec(Required(Int(1, 1000), "an int >= 1"), None),
        "cp": Spec(
            Maybe(Int(1, 1000)), None,
            "None: a generous rank from the data's size, n // (2 (d_1 + ... + d_K)) between 3 and "
            "20, pruned by the learned prior; fastcep.tensor.layout.default_rank: Alog 20, Enron "
            "3, DBLP 7; res.effective_rank counts the columns kept, res.rank and "
            "options['rank_from_data'] say what was chosen; a fixed prior (prior='fixed', "
            "prior_mean) needs a rank",
        ),
        "stream/post": Spec(Required(Int(1, 1000), "an int >= 1"), None),
        "stream": Spec(Maybe(Int(1, 1000)), None, "None: as fit's, from the stream's length"),
    }),
    Option("prior_var", "Variance of the zero-mean Gaussian prior of each weight or embedding.", {
        "regression": Spec(
            ScalarOr(POSITIVE, "array of d floats > 0"), 1.0, "an array gives each weight its own"
        ),
        "cp": Spec(POSITIVE, 1.0, "the prior N(0, prior_var I) of every embedding"),
        "cp/cp_wopt": Refused(POINT_ESTIMATE),
        "stream": Spec(POSITIVE, 1.0),
    }),
    Option("fit_intercept", "Fit an intercept b: p(y | x) through x.w + b (as scikit-learn's default).", {
        "regression": Spec(
            Bool(), True, "b has its own prior N(0, intercept_var); the paper's models have none"
        ),
    }),
    Option("intercept_var", "Variance of the intercept's zero-mean Gaussian prior.", {
        "regression": Spec(
            POSITIVE, 100.0,
            "broad: an offset of a few units costs the prior nothing; with center=True the prior "
            "is that of the intercept at the features' mean, b + mean(X).w",
        ),
    }),
    Option("center", "With an intercept, fit on features centred at their training means.", {
        "regression": Spec(
            Bool(), True,
            "the intercept is then the linear predictor at the features' mean, nearly uncorrelated "
            "with the weights, so the factorised fit settles in tens of sweeps on features far from "
            "0 (age in years: thousands of sweeps un-centred) and its variances are closer to the "
            "marginal ones; the posterior is reported on the user's scale (res.intercept, "
            "res.center); False fits x.w + b as given; without an intercept it does nothing; a sparse X is "
            "never centred (it would fill every row)",
        ),
    }),
    Option("offset", "A known term added to each row's linear predictor f (n floats; None: none).", {
        "regression": Spec(
            DataCheck("array of n finite floats or None"), None,
            "the log of an exposure for counts; methods 'cep1', 'cep2' and 'ep'; give it to predict too",
        ),
    }),
    Option("a0", "Shape of the Gamma(a0, b0) prior of the noise precision (cp_gaussian).", {
        "cp": Spec(POSITIVE, 1e-3),
        "cp/cp_wopt": Refused(POINT_ESTIMATE),
        "stream": Spec(POSITIVE, 1e-3),
    }),
    Option("b0", "Rate of the Gamma(a0, b0) prior of the noise precision (cp_gaussian).", {
        "cp": Spec(POSITIVE, 1e-3),
        "cp/cp_wopt": Refused(POINT_ESTIMATE),
        "stream": Spec(POSITIVE, 1e-3),
    }),
    Option("damping", "Message damping: msg <- (1 - damping) msg + damping new.", {
        "regression": Spec(
            Either(Choice("auto"), DAMPING, "a float in (0, 1] or 'auto'"), "auto",
            "'auto' runs undamped (0.5 if the means oscillate) and, if the change stalls, starts "
            "again at 0.1, halved down to 0.005 while it stalls (``fastcep.glm.engine``); "
            "'is' and 'kjit' start at 0.1 (damping averages their Monte Carlo noise) and stop at "
            "their noise floor (stop reason 'mc_noise'); ignored by 'vb'",
        ),
        "cp": Spec(DAMPING, 0.5, "in natural parameters", methods=CEP),
        "cp/vmp": Refused("VMP takes exact coordinate steps (no damping)"),
        "cp/cp_wopt": Refused(POINT_ESTIMATE),
        "stream": Spec(
            Maybe(DAMPING), None,
            "the exception to fit's default: per batch (the inner iterations) and per model, "
            "because a batch is few entries on top of a posterior that later batches refine: on "
            "DBLP (cp_probit, batch 1000) 3 undamped parallel sweeps a batch reach AUC 0.80 in 12 s "
            "a pass, 10 sweeps at damping 0.5 0.79 in 37 s; undamped parallel sweeps can overshoot "
            "on dense continuous data",
            none=ByModel(cp_probit=1.0, cp_gaussian=0.5),
        ),
        "stream/post": Refused("VMP takes exact coordinate steps", value=1.0),
    }),
    Option("n_starts", "Fits from this many seeded starts, keeping the highest training log-likelihood.", {
        "cp": Spec(
            Int(1, 100), 1, "the first start is seed's own; each start's training log-likelihood is in "
            "res.options['starts'] (BENCHMARKS.md, issue 21: 3 starts lower Alog's RMSE at ranks 8 and 10)",
            methods=CEP,
        ),
    }),
    Option("max_iter", "Cap on the iterations (sweeps, VMP rounds or L-BFGS iterations).", {
        "regression": Spec(Int(1), 5000),
        "cp": Spec(Int(1), 500),
        "stream": Spec(
            Maybe(Int(1)), None,
            "the exception to fit's default: per batch and per model, for the reason given for damping",
            none=ByModel(cp_probit=3, cp_gaussian=50),
        ),
        "stream/post": Spec(
            Maybe(Int(1)), None,
            "VMP iterations per batch, measured: on a 20 x 15 x 10 rank-2 binary tensor "
            "(1,200 entries in 3 batches, 5 seeds) median test AUC 0.55 with 20, 0.72 with 50",
            none=ByModel(cp_probit=50, cp_gaussian=50),
        ),
    }),
    Option("tol", "Stopping threshold on each iteration's change.", {
        "regression": Spec(
            NON_NEGATIVE, 1e-5,
            "stopping='posterior': the largest change of a posterior mean (in posterior sds) or "
            "variance (relative) over a sweep; 'paper': the mean over rows of the summed squared "
            "change of the sites' precision-times-means (use a tol such as 1e-5 with it); both "
            "per unit of damping (divided by the damping, squared for 'paper'), so that a small "
            "damping's small steps are not taken for convergence",
        ),
        "cp": Spec(NON_NEGATIVE, 1e-4, "relative RMS change of the training entries' predictive means"),
        "cp/cp_wopt": Spec(
            NON_NEGATIVE, 1e-9, "the objective's decrease relative to that of the all-zero factors"
        ),
        "stream": Spec(
            NON_NEGATIVE, 1e-3,
            "the exception to fit's default: per batch, the relative change of the batch's "
            "predictions, looser than a whole fit's because later batches refine the posterior",
        ),
    }),
    Option("schedule", "Order of the message updates.", {
        "regression": Spec(
            Choice("parallel", "sequential"), "parallel",
            "'parallel': all messages from one posterior (multi-threaded); 'sequential': the "
            "posterior refreshed after every row",
        ),
        "cp": Spec(
            Maybe(CP_SCHEDULE), None,
            "'block': mode by mode, stable for any damping; 'sequential': entries in a seeded random "
            "order (see ``fastcep.tensor.fit_cp``). None: 'sequential' for the count likelihoods, "
            "whose parallel and block sweeps run off (BENCHMARKS.md, issue 22: on a synthetic "
            "Poisson tensor the parallel fit ran off, the sequential one recovered f; on Alog's "
            "counts the negative binomial's parallel fit failed or degraded), else 'parallel'",
            methods=CEP,
            none=ByModel(
                cp_probit="parallel", cp_gaussian="parallel", cp_poisson="sequential", cp_negbin="sequential"
            ),
        ),
        "cp/vmp": Refused("VMP updates mode by mode, each mode's objects in parallel (no other schedule)"),
        "cp/cp_wopt": Refused(POINT_ESTIMATE),
        "stream": Spec(Maybe(CP_SCHEDULE), None, "the inner fits'", none="parallel"),
        "stream/post": Refused("VMP updates mode by mode", value="parallel"),
    }),
    Option("stopping", "Stopping rule: the posterior's change, or the sites' (the authors' code).", {
        "regression": Spec(
            Choice("posterior", "paper"), "posterior",
            "'paper' can stop long before convergence (see tol)",
        ),
    }),
    Option("covariance", "Posterior covariance of each embedding: full R x R, or diagonal.", {
        "cp": Spec(Choice("full", "diag"), "full", "'diag': fully factorised, for large R", methods=CEP),
        "cp/vmp": Spec(
            Choice("full", what="'full' for method='vmp' (diagonal covariances are CEP only)"), "full"
        ),
        "cp/cp_wopt": Refused(POINT_ESTIMATE),
        "stream": Spec(Choice("full", "diag"), "full"),
        "stream/post": Spec(
            Choice("full", what="'full' for method='post' (diagonal covariances are CEP only)"), "full"
        ),
    }),
    Option("n_nodes", "Gauss-Hermite nodes of the logistic's hand-written moments.", {
        "regression": Spec(
            Maybe(Int(2, 200)), None,
            "None: 9 for CEP, LP and IS; EP takes the exact one-dimensional reduction (one "
            "quadrature of a = x.w per row, as every likelihood's EP). An int with EP: the paper's "
            "two-dimensional rule with that many nodes per dimension, the same posterior to 6e-14 "
            "sd and 8.9x slower (BENCHMARKS.md, issue 22)",
        ),
    }),
    Option("n_samples", "Importance samples per row and sweep of methods 'is' and 'kjit'.", {
        "regression": Spec(Int(2), 10_000, "the paper used 500,000"),
    }),
    Option("threshold", "'kjit': operator variance above which a row asks the sampling oracle.", {
        "regression": Spec(NON_NEGATIVE, 1e-3, "0: every row does, which reproduces method 'is'"),
    }),
    Option("n_features", "'kjit': random Fourier features of the message operator.", {
        "regression": Spec(Int(1, 5000), 200),
    }),
    Option("reg", "'cp_wopt': weight of the L2 penalty on the factors.", {
        "cp/cp_wopt": Spec(
            NON_NEGATIVE, 0.0, "0 is Acar et al.'s objective, which overfits sparse noisy data"
        ),
    }),
    Option("init", "Initial means: singular vectors of the unfoldings or of a sketch, or random (seeded).", {
        "cp": Spec(
            Maybe(Choice("svd", "sketch", "random")), None,
            "None: 'svd', and 'sketch' for a tensor file read on a cluster's workers. 'sketch': of a "
            "hashed range sketch of each unfolding (``fastcep.tensor.init``), which needs no pass "
            "that pairs entries: the start a cluster computes where the entries are read",
            none="svd",
        ),
    }),
    Option("standardize", "cp_gaussian: fit the values divided by a scale; predict on theirs.", {
        "cp": Spec(
            Choice("scale", "center", "none"), "scale",
            "'scale': y / sqrt(mean(y^2)), so that results at values c y are those at y, scaled (the "
            "priors and the start are for values of size 1); 'center': (y - mean) / sd, which makes "
            "an offset b vanish too, at the price of a fixed offset the CP model must then undo "
            "where the data have none (an exact low-rank tensor is no longer one); 'none': the "
            "paper's model, the values as they are. The posterior of the embeddings is that of the "
            "standardized values; options['value_center'] and options['value_scale'] hold the "
            "transform",
        ),
        "stream": Spec(
            Choice("scale", "center", "none"), "scale", "from all the stream's values (one pass over a file)"
        ),
    }),
    Option("init_scale", "Scale of the initial means (the sd of random ones).", {
        "cp": Spec(NON_NEGATIVE, 1.0),
        "stream": Spec(
            Maybe(NON_NEGATIVE), None,
            "the sd of the random initial means of new objects with a zero prior mean (None: "
            "(mean(f^2) / R)^(1 / 2K) of the first batch's values f on the scale of f: y, log(1 + y) for "
            "counts; 2.0 for cp_probit)",
        ),
    }),
    Option("noise_warmup", "cp_gaussian: iterations with the noise precision held fixed.", {
        "cp": Spec(Int(0), 10, "held at warmup_snr / Var(values)", methods=CEP),
        "cp/vmp": Refused("VMP updates q(tau) every iteration (see 'init_snr' for its starting point)"),
        "cp/cp_wopt": Refused(POINT_ESTIMATE),
    }),
    Option("warmup_snr", "cp_gaussian: signal-to-noise ratio of the warm-up's noise precision.", {
        "cp": Spec(POSITIVE, 10.0, methods=CEP),
        "cp/vmp": Refused("VMP has no noise warm-up (see 'init_snr')"),
        "cp/cp_wopt": Refused(POINT_ESTIMATE),
    }),
    Option("init_snr", "'vmp', cp_gaussian: q(tau) starts with mean init_snr / Var(values).", {
        "cp/vmp": Spec(Maybe(POSITIVE), 10.0, "None: the prior mean a0 / b0"),
    }),
    Option("prior_mean", "Positive: prior means m = |N(0, prior_mean^2)| (seeded), the fit starts at m.", {
        "cp": Spec(
            NON_NEGATIVE, 0.0,
            "breaks the sign symmetry of sparse binary data; choose it on held-out entries",
        ),
        "cp/cp_wopt": Refused(POINT_ESTIMATE),
        "stream": Spec(
            Maybe(NON_NEGATIVE), None,
            "for objects first seen mid-stream, per model: on DBLP a zero prior mean collapsed "
            "every embedding to 0 (AUC 0.50 at batch 1000), positive means gave 0.76-0.80",
            none=ByModel(cp_probit=0.1, cp_gaussian=0.0),
        ),
    }),
    Option("prior", "The embeddings' prior: learned (hierarchical) or fixed N(m, prior_var I).", {
        "cp": Spec(
            Maybe(Choice("fixed", "hierarchical", "ard", "wishart")), None,
            "None: 'wishart' for 'cep1' with full covariances, 'ard' with diagonal ones, 'fixed' "
            "for 'lp' (the paper's baseline) or with a prior_mean; 'wishart': a learned mean and "
            "precision matrix per mode (BPMF), full covariances only; 'ard': zero mean, one learned "
            "precision per rank column shared by the modes (BCPF); 'hierarchical': the learned one "
            "that suits the covariance ('wishart', or 'ard' with diagonal ones); prior_var is their "
            "start",
            methods=CEP,
        ),
        "cp/vmp": Refused("VMP keeps the fixed prior"),
        "cp/cp_wopt": Refused(POINT_ESTIMATE),
        "stream": Spec(
            Maybe(Choice("fixed", "hierarchical", "ard", "wishart")), None,
            "None: 'wishart' for 'cep1' with full covariances, 'ard' with diagonal ones, 'fixed' for "
            "'post' (the baseline); learned from the objects seen so far, one update a batch "
            "(``fastcep.streaming.prior``); prior_mean then offsets the prior of new objects",
        ),
    }),
    Option("lp_indefinite", "'lp': what to do with a message whose precision is not PSD.", {
        "cp": Spec(
            Choice("skip", "apply", "clip"), "clip",
            "'clip': its eigenvalues clipped at 0; 'skip': left flat; 'apply': as is",
            methods=CEP,
        ),
    }),
    Option("init_state", "Resume from res.state of an earlier run on the same data.", {
        "regression": Spec(DataCheck("RegressionState or None"), None),
        "regression/vb": Spec(DataCheck("VBState or None"), None, "res.state of a VB fit: q(w)'s moments"),
        "cp": Spec(DataCheck("CPState or None"), None, methods=CEP),
        "cp/vmp": Spec(DataCheck("VMPState or None"), None, "res.state of a VMP fit: its moments and q(tau)"),
        "cp/cp_wopt": Spec(DataCheck("FactorState or None"), None, "res.state of a CP-WOPT fit: its factors"),
        "stream": Spec(DataCheck("StreamState or None"), None, "of a stream of the same tensor and settings"),
    }),
    Option("probit_curvature", "cp_probit, 'cep1': the message's curvature, E[z z^T] or E[z] E[z]^T.", {
        "cp": RANK_ONE._replace(methods=CEP),
        "cp/vmp": Refused("VMP has no CEP probit messages (it augments the probit likelihood)"),
        "cp/cp_wopt": Refused(POINT_ESTIMATE),
        "stream": RANK_ONE,
    }),
    Option("expect_under", "'cep1': the other modes' moments under the posterior or the cavity.", {
        "cp": Spec(
            Maybe(Choice("posterior", "cavity")), None,
            "None: 'cavity' where it applies ('cep1', full covariances, the parallel or block "
            "schedule) and the likelihood is log-concave, else 'posterior'",
            methods=CEP,
        ),
        "cp/vmp": Refused("VMP's updates are expectations under the posterior (there are no cavities)"),
        "cp/cp_wopt": Refused(POINT_ESTIMATE),
        "stream": Spec(
            Maybe(Choice("posterior", "cavity")), None,
            "None: 'cavity' where it applies (method 'cep1', full covariances, the parallel or block "
            "schedule) and the likelihood is log-concave, else 'posterior'",
        ),
    }),
    Option("eval_set", "Test entries whose RMSE or AUC goes to trace.eval_metric.", {
        "cp": Spec(DataCheck("(coords, values) or None"), None, "after every iteration"),
        "stream": Spec(DataCheck("(coords, values) or None"), None, "at every checkpoint and at the end"),
    }),
    Option("batch_size", "Entries per batch (the last may be smaller).", {
        "stream": Spec(Int(1), 1000),
    }),
    Option("shuffle", "Visit the entries in a seeded random order.", {
        "stream": Spec(Bool(), False, "files: random blocks of whole chunks, random within each"),
    }),
    Option("checkpoint", "HDF5 file written atomically every checkpoint_every batches and at the end.", {
        "stream": Spec(Maybe(PathLike()), None),
        "regression": Spec(
            Maybe(PathLike()), None,
            "a cluster fit's (client=): the client's posterior, damping and trace every checkpoint_every "
            "sweeps and at the end",
        ),
        "cp": Spec(
            Maybe(PathLike()), None,
            "a cluster fit's (client=): the client's posterior, noise, learned prior and trace every "
            "checkpoint_every iterations and at the end",
            methods=CEP,
        ),
    }),
    Option("checkpoint_every", "Batches (a fit: iterations) between checkpoints.", {
        "stream": Spec(Int(1), 10),
        "regression": Spec(Int(1), 10, "sweeps"),
        "cp": Spec(Int(1), 10, "iterations", methods=CEP),
    }),
    Option("resume", "Continue from the checkpoint if it exists (the settings must match).", {
        "stream": Spec(Bool(), False),
        "regression": Spec(
            Bool(), False,
            "a cluster fit starts from the checkpoint's posterior, its sites flat on the workers, and ends "
            "at the uninterrupted fit's fixed point",
        ),
        "cp": Spec(
            Bool(), False,
            "a cluster fit starts from the checkpoint's posterior, its sites flat on the workers, and ends "
            "at the uninterrupted fit's fixed point",
            methods=CEP,
        ),
    }),
    Option("max_batches", "Stop after this many batches in this call (None: no limit).", {
        "stream": Spec(Maybe(Int(0)), None),
    }),
    Option("n_threads", "Threads for this call (None: numba's setting); results do not depend on it.", {
        family: Spec(Threads(), None) for family in FAMILIES
    }),
    Option("client", "Run on a Dask cluster: the rows stay on its workers (the 'dask' extra).", {
        "regression": Spec(
            Client(), None,
            "dense or scipy.sparse X (a NumPy, SciPy or Dask array, split by rows), methods 'cep1', 'cep2', "
            "'ep', the parallel schedule; the same posterior as one process (dense: bitwise when each "
            "partition but the last holds a multiple of the engine's chunk of rows; sparse: within 1e-10 sd)",
        ),
        "cp": Spec(
            Client(), None,
            "method 'cep1', full covariances, the parallel schedule, the hand-written models and log-concave "
            "likelihoods whose parameters are given; the entries' messages stay on the workers, the same "
            "posterior as one process (bitwise where that fit sums the same groups)",
            methods=CEP,
        ),
        "stream": Spec(
            Client(), None,
            "method 'cep1': the entries cut into one shard per worker (a file's row ranges read there), each "
            "streamed by ADF from the prior, combined as EP over shards and refined (passes)",
        ),
        "stream/post": Refused("POST's streams run in one process so far"),
    }),
    Option("passes", "Passes of a cluster stream (client=): each shard's ADF pass from the prior, then "
           "refinements against the other shards' messages (EP over shards).", {
        "stream": Spec(Maybe(Int(1)), None, "None: 3", none=3),
        "stream/post": Refused("POST's streams run in one process so far"),
    }),
    Option("callback", "callback(info) after every iteration (an IterationInfo); True stops the run.", {
        "regression": Spec(Callable(), None),
        "cp": Spec(Callable(), None),
        "stream": Spec(Callable(), None, "after every batch"),
    }),
    Option("seed", "Seeds the random draws: the same seed, the same result on any thread count.", {
        "regression": Spec(Seed(), 0, "draws of methods 'is' and 'kjit'; the others are deterministic"),
        "cp": Spec(Seed(), 0, "the initial means and the sequential schedule's order"),
        "stream": Spec(
            Int(0), 0,
            "an int: it seeds the shuffle and each batch's new objects (as [seed, batch]) and is "
            "recorded in checkpoints",
        ),
    }),
    Option("verbose", "Print one line per iteration to stderr.", {
        "regression": Spec(Bool(), False),
        "cp": Spec(Bool(), False),
        "stream": Spec(Bool(), False, "one line per batch"),
    }),
    Option("progress", "Keep a status line on stderr, rewritten in place.", {
        "regression": Spec(Bool(), False),
        "cp": Spec(Bool(), False),
        "stream": Spec(Bool(), False, "a progress line: the batch, entries, rate, time left"),
    }),
)  # fmt: skip

BY_NAME = {opt.name: opt for opt in OPTIONS}
#: the rows that pick the family's options rather than being options (``validate``'s arguments;
#: the CP likelihood, which comes with the model, is resolved with it by ``_model_likelihood``)
_SELECTORS = ("model", "method", "likelihood")
#: the arguments of an entry point that are data or the model and method, not options
_NOT_OPTIONS = ("X", "y", "coords", "values", "model", "method", "unknown", "cluster")


def spec(name, family, method=None):
    """The spec of option ``name`` for ``family`` and ``method``: a ``Spec``, a ``Refused`` or
    None (unknown there)."""
    specs = BY_NAME[name].specs
    if method is not None and f"{family}/{method}" in specs:
        return specs[f"{family}/{method}"]
    found = specs.get(family)
    if found is not None and method is not None and found.methods is not None and method not in found.methods:
        return None
    return found


def choices(name, family, method=None):
    """The values of a ``Choice`` option (a tuple; None if it is not one), e.g.
    ``choices("model", "cp")``."""
    check = spec(name, family, method).constraint
    check = check.inner if isinstance(check, V.Maybe) else check
    return check.values if isinstance(check, V.Choice) else None


def defaults(family, method):
    """{name: default} of every option (and model and method) that applies to ``method`` of
    ``family``: the signature defaults of the entry points."""
    out = {}
    for opt in OPTIONS:
        found = spec(opt.name, family, method)
        if isinstance(found, Spec) and found.default is not REQUIRED:
            out[opt.name] = found.default
    return out


def arguments(call_locals):
    """The options of an entry point's call, from its ``locals()`` taken first thing: every
    named option and the catch-all ``**unknown``, without the data, model and method."""
    out = {k: v for k, v in call_locals.items() if k not in _NOT_OPTIONS}
    out.update(call_locals.get("unknown", {}))
    return out


# ------------------------------------------------------------------------------ refusals
def _refuse_vb(func, name, value, reason, names):
    return ValueError(f"{func}: {name} is not supported with method='vb' ({reason}).")


def _refuse_vmp(func, name, value, reason, names):
    return ValueError(
        f"{func}: the {name!r} option does not apply to method='vmp': {reason}. "
        f"Got {name}={value!r}; leave it out."
    )


def _refuse_post(func, name, value, reason, names):
    return ValueError(
        f"{func}: the {name!r} option does not apply to method='post' ({reason}). "
        f"Got {name}={value!r}; leave it out."
    )


def _refuse_cp_wopt(func, name, value, reason, names):
    return V.param_error(
        name,
        func,
        "left unset with method='cp_wopt', a point estimate by L-BFGS without messages, "
        "posterior covariances, prior or noise model (the options "
        + ", ".join(repr(a) for a in names)
        + " do not apply; 'reg' sets the L2 penalty)",
        value,
    )


#: how each method refuses an option that does not apply to it (a ``Refused`` spec) and is not None
REFUSALS = {"vb": _refuse_vb, "vmp": _refuse_vmp, "post": _refuse_post, "cp_wopt": _refuse_cp_wopt}


# --------------------------------------------------------------------- cross-option rules
def _generic_methods(func, model, method, o):
    """Beyond the binary likelihoods, the methods of the likelihood seam (DESIGN.md section 7)."""
    if o.get("offset") is not None and method not in GENERIC_METHODS:
        raise ValueError(
            f"{func}: an offset takes method "
            + " or ".join(repr(m) for m in GENERIC_METHODS)
            + f" (the rows of any likelihood); got method={method!r}."
        )
    if model not in ("probit", "logistic") and method not in GENERIC_METHODS:
        raise ValueError(
            f"{func}: method={method!r} is written for the binary likelihoods ('probit', 'logistic'); "
            f"model={model!r} takes method " + " or ".join(repr(m) for m in GENERIC_METHODS) + "."
        )


def _kjit_is_logistic(func, model, method, o):
    if method == "kjit" and model != "logistic":
        raise ValueError(
            f"{func}: method='kjit' is not available for model={model!r}: "
            "kjit is implemented for the logistic model, as in the paper."
        )


def _probit_curvature(func, model, method, o):
    """ "rank1" is a rule of the cp_probit CEP-1 message."""
    value = o.get("probit_curvature", "full")
    if value != "full" and (model != "cp_probit" or method != "cep1"):
        raise ValueError(
            f"{func}: probit_curvature={value!r} applies to model='cp_probit' with "
            f"method='cep1' only (got model={model!r}, method={method!r})."
        )


def _expect_under(func, model, method, o):
    """The cavity sweep exists for CEP-1 with full covariances and the parallel or block schedule."""
    if o.get("expect_under", "posterior") != "cavity":
        return
    covariance, schedule = o["covariance"], o["schedule"]
    if not (method == "cep1" and covariance == "full" and schedule in ("parallel", "block")):
        raise ValueError(
            f"{func}: expect_under='cavity' supports method='cep1' with covariance='full' and "
            f"schedule='parallel' or 'block' only (got method={method!r}, covariance={covariance!r}, "
            f"schedule={schedule!r})."
        )


def _generic_cep1_only(func, model, method, o):
    """The generic CP models (``CP_GENERIC`` and "cp") have CEP-1's messages only."""
    if model not in CP_FAST_PATHS and method != "cep1":
        raise ValueError(
            f"{func}: model={model!r} supports method='cep1' only (its messages come from the "
            "likelihood's tilted moments; 'lp', 'vmp', 'cp_wopt' and 'post' have closed-form "
            f"Gaussian and probit updates). Got method={method!r}."
        )


def _by_model(values, model, likelihood):
    """A per-model value of ``ByModel``; a generic CP model takes that of the hand-written model of
    its kind of values (``likelihood``'s: binary, cp_probit's; else cp_gaussian's)."""
    if model in values:
        return values[model]
    return values["cp_probit" if likelihood.binary else "cp_gaussian"]


def _model_likelihood(func, model, o):
    """The CP model/likelihood consistency rule, run first (the per-model defaults depend on its
    outcome): model "cp" needs a likelihood, "cp_<name>" takes none; the likelihood (a name or a
    ``fastcep.likelihoods`` object, one of the seam's registry) resolves to the model that runs
    (``fastcep._models.resolve``). Returns (model, likelihood object)."""
    return resolve(model, o.get("likelihood"), func)


def _rank_one_default(model, method, o):
    """What None stands for in ``probit_curvature``: the rank-one message for cp_probit's CEP-1
    (issue 21: closer to the Gibbs gold before the learned priors, tied with "full" under them,
    1.5x faster a sweep), else "full", the only value the other cases accept."""
    if o["probit_curvature"] is None:
        rank1 = model == "cp_probit" and method == "cep1"
        o["probit_curvature"] = "rank1" if rank1 else "full"


def _cp_defaults(func, model, method, o):
    """What None stands for in ``prior`` and ``expect_under`` (chosen on held-out training entries
    of Alog and Enron, ``bench.cp_defaults``; BENCHMARKS.md): the learned Normal-Wishart prior and
    the cavity's expectations wherever they apply."""
    if method not in CEP:
        return
    # (a prior mean asks for the fixed prior)
    _learned_defaults(model, method, o, fixed=method != "cep1" or o["prior_mean"] > 0.0)


def _learned_defaults(model, method, o, fixed):
    """``prior``, ``expect_under`` and ``probit_curvature`` given as None (or "hierarchical")
    resolved in place; ``fixed``: None stands for the fixed prior here. The same for every model:
    the generic CP models' messages run in the cavity sweep as cp_probit's do, so they get its
    learned prior and cavity expectations (their messages are rank-one whatever
    ``probit_curvature``, which stays cp_probit's)."""
    _rank_one_default(model, method, o)
    full = o["covariance"] == "full"
    if o["prior"] == "hierarchical":
        o["prior"] = "wishart" if full else "ard"
    if o["prior"] is None:
        o["prior"] = "fixed" if fixed else ("wishart" if full else "ard")
    if o["expect_under"] is None:
        cavity = method == "cep1" and full and o["schedule"] in ("parallel", "block")
        o["expect_under"] = "cavity" if cavity and log_concave(model, o.get("likelihood")) else "posterior"


def log_concave(model, likelihood):
    """Whether a CP model's likelihood (``model`` "cp_<name>", or "cp" and the ``likelihood``
    option: an object or a name) is registered as log-concave in f. One that may not be (the
    Student-t, a Custom one) sends messages of negative precision (its outliers'), and takes the
    posterior's expectations by default: against a Gibbs sampler of Student-t tensors with 10 %
    outliers (``bench.cp_gold --models cp_student_t``), the cavity's were 0.35-1.3 gold sds off
    or did not converge on 3 of 6, the posterior's 0.08-0.12 on all 6 (BENCHMARKS.md, "Outliers
    in tensors")."""
    if model != "cp":
        return is_log_concave(REGISTRY.get(model[3:]))
    if isinstance(likelihood, str):
        return is_log_concave(REGISTRY.get(likelihood))
    return bool(getattr(likelihood, "log_concave", True))


def _learned_prior(func, model, method, o):
    """The Wishart prior needs full covariances; a fit's prior mean is the fixed prior's; a rank
    left to the data needs a learned prior (a fixed one prunes nothing)."""
    prior = o.get("prior", "fixed")
    if o.get("rank", 0) is None and prior == "fixed":
        raise ValueError(
            f"{func}: rank=None (a generous rank, pruned by the learned prior) needs a learned prior; "
            "with prior='fixed' or a prior_mean give the rank."
        )
    if prior == "wishart" and o["covariance"] != "full":
        raise ValueError(
            f"{func}: prior='wishart' needs covariance='full' (got {o['covariance']!r}); use prior='ard'."
        )
    if func == "fit" and prior != "fixed" and o.get("prior_mean", 0.0) > 0.0:
        raise ValueError(
            f"{func}: prior_mean applies to prior='fixed' only; prior={prior!r} learns the prior's mean "
            f"(got prior_mean={o['prior_mean']!r})."
        )


def _lp_needs_full_parallel(func, model, method, o):
    """Laplace propagation's sweeps exist for full covariances, parallel or block."""
    if method == "lp" and (o["schedule"] not in ("parallel", "block") or o["covariance"] != "full"):
        raise ValueError(
            f"{func}: method='lp' supports schedule='parallel' or 'block' with covariance='full' only. "
            f"Got schedule={o['schedule']!r}, covariance={o['covariance']!r} instead."
        )


def _stream_defaults(func, model, method, o):
    """What None stands for in the stream's ``prior`` and ``expect_under``: as for ``fit``
    (``_cp_defaults``), the learned prior and the cavity's expectations wherever they apply."""
    _learned_defaults(model, method, o, fixed=method != "cep1")


def _resume_needs_checkpoint(func, model, method, o):
    if o["resume"] and o["checkpoint"] is None:
        raise ValueError(f"{func}: resume=True needs a checkpoint path.")
    if o["resume"] and o["init_state"] is not None:
        raise ValueError(f"{func}: give init_state or resume=True with a checkpoint, not both.")


def _checkpoint_needs_client(func, model, method, o):
    if o.get("checkpoint") is not None and o.get("client") is None:
        raise ValueError(
            f"{func}: checkpoint= applies to fits on a Dask cluster (client=) so far; a fit in one "
            "process keeps no checkpoint."
        )
    if o.get("resume") and o.get("checkpoint") is None:
        raise ValueError(f"{func}: resume=True needs a checkpoint path.")


#: the checks that involve more than one option, per family, in order (after each option's own)
RULES = {
    "regression": (_generic_methods, _kjit_is_logistic, _checkpoint_needs_client),
    "cp": (
        _cp_defaults,
        _generic_cep1_only,
        _probit_curvature,
        _expect_under,
        _lp_needs_full_parallel,
        _learned_prior,
        _checkpoint_needs_client,
    ),
    "stream": (
        _stream_defaults,
        _generic_cep1_only,
        _probit_curvature,
        _expect_under,
        _resume_needs_checkpoint,
        _learned_prior,
    ),
}


# ------------------------------------------------------------------------------ validate
def validate(func, family, model, method, given):
    """Check the options of one call: the one validator of every entry point.

    Parameters
    ----------
    func : str
        The public name the messages give ("fit" or "stream").
    family : {"regression", "cp", "stream"}
    model, method : str
        Checked first (the options depend on them). For the CP families the model and the
        ``likelihood`` option are resolved together (``_model_likelihood``): the result's
        "model" is the model that runs and "likelihood" its likelihood object.
    given : dict
        The call's options (``arguments(locals())``): names the table does not know for this
        method raise TypeError listing the valid ones; a ``Refused`` option that is not None
        raises the method's refusal (``REFUSALS``).

    Returns
    -------
    dict
        Every option that applies to the method, checked, with the defaults filled in and None
        replaced where the table says what it stands for (per model); a refused option with a
        ``Refused.value`` gets that value. Then ``RULES`` are checked on it.
    """
    model = spec("model", family).constraint.check(model, "model", func)
    method = spec("method", family).constraint.check(method, "method", func)
    likelihood, selectors = None, set()
    if spec("likelihood", family) is not None:  # (the CP families)
        model, likelihood = _model_likelihood(func, model, given)
        selectors = {"likelihood"}
    table = [(opt.name, spec(opt.name, family, method)) for opt in OPTIONS if opt.name not in _SELECTORS]
    table = [(name, found) for name, found in table if found is not None]
    unknown = sorted(set(given) - {name for name, _ in table} - selectors)
    if unknown:
        names = [name for name, found in table if isinstance(found, Spec)] + sorted(selectors)
        close = difflib.get_close_matches(unknown[0], names, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise TypeError(
            f"{func}() got an unexpected keyword argument {unknown[0]!r} for method={method!r}.{hint} "
            f"The options of model={model!r}, method={method!r}: {', '.join(names)}."
        )
    refused = [name for name, found in table if isinstance(found, Refused)]
    out = {}
    for name, found in table:
        if isinstance(found, Refused):
            if given.get(name) is not None:
                raise REFUSALS[method](func, name, given[name], found.reason, refused)
            if found.value is not None:
                out[name] = found.value
            continue
        value = given.get(name, found.default)
        if value is REQUIRED:
            raise TypeError(f"{func}() missing the required keyword argument {name!r}.")
        if value is None and found.none is not None:
            by_model = isinstance(found.none, ByModel)
            value = _by_model(found.none, model, likelihood) if by_model else found.none
        out[name] = found.constraint.check(value, name, func)
    if likelihood is not None:
        out["model"], out["likelihood"] = model, likelihood
    for rule in RULES[family]:
        rule(func, model, method, out)
    return out


# ---------------------------------------------------------------------------------- docs
_FAMILY_TEXT = {
    "regression": "regression: ``fit`` with model 'probit' or 'logistic'",
    "cp": "cp: ``fit`` with model 'cp_gaussian', 'cp_probit' or 'cp_<likelihood>'",
    "stream": "stream: ``fastcep.stream``",
}


def _default_text(found):
    if found.default is REQUIRED or isinstance(found.constraint, Required):
        return "required"
    if found.none is not None and found.default is None:
        values = found.none if isinstance(found.none, ByModel) else {None: found.none}
        if len(set(values.values())) == 1:
            return f"default None: {next(iter(values.values()))!r}"
        return "default None: " + ", ".join(f"{v!r} for {m}" for m, v in values.items())
    return f"default {found.default!r}"


def _spec_lines(opt, families):
    """(where, text) per spec of ``families``; consecutive equal texts share one line."""
    lines = []
    for family in families:
        for key, found in opt.specs.items():
            fam, _, method = key.partition("/")
            if fam != family:
                continue
            where = fam if not method else f"{fam}, method {method!r}"
            if isinstance(found, Refused):
                lines.append((where, f"does not apply: {found.reason}"))
                continue
            if found.methods is not None:
                where += " (methods " + ", ".join(found.methods) + ")"
            text = f"{found.constraint.describe()}, {_default_text(found)}"
            lines.append((where, text + (f"; {found.note}" if found.note else "")))
    merged = []
    for where, text in lines:
        if merged and merged[-1][1] == text:
            merged[-1] = (f"{merged[-1][0]}, {where}", text)
        else:
            merged.append((where, text))
    return [f"{where}: {text}" for where, text in merged]


def document(families, indent="    ", width=92):
    """The "Options" section of a docstring indented by ``indent``: every option of
    ``families`` (name, one-line doc, then per family its constraint, default and what differs),
    from ``OPTIONS``."""
    intro = (
        "Every option, its constraint and its default per family ("
        + "; ".join(_FAMILY_TEXT[f] for f in families)
        + "), from the one option table ``fastcep._options.OPTIONS``, checked once by "
        "``fastcep._options.validate``. An option that does not apply to a method is refused by "
        "name unless it is None; an unknown name raises TypeError listing the valid ones."
    )
    out = ["", "Options", "-------", *textwrap.wrap(intro, width), ""]
    for opt in OPTIONS:
        lines = _spec_lines(opt, families)
        if not lines:
            continue
        out.append(opt.name)
        out.extend(textwrap.wrap(opt.doc, width, initial_indent="    ", subsequent_indent="    "))
        for line in lines:
            out.extend(textwrap.wrap(line, width, initial_indent="    - ", subsequent_indent="      "))
    return "\n".join(indent + line if line else line for line in out) + "\n"


def cli_help(name, family):
    """A command-line help string for an option of ``family``: its doc and default, with the
    methods whose default differs (``%`` escaped for argparse)."""
    found = spec(name, family)
    text = BY_NAME[name].doc.rstrip(".") + f" ({_default_text(found)}"
    if found.default is None and found.none is None and found.note.startswith("None:"):
        text += ", " + found.note.split(";")[0]  # (what None stands for, chosen by a rule)
    for key, other in BY_NAME[name].specs.items():
        fam, _, method = key.partition("/")
        if (
            fam == family
            and method
            and isinstance(other, Spec)
            and _default_text(other) != _default_text(found)
        ):
            text += f"; method {method}: {_default_text(other).removeprefix('default ')}"
    return (text + ")").replace("%", "%%")
