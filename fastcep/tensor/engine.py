"""Bayesian CP tensor decomposition by CEP (``fit(coords, values, model="cp_gaussian" | "cp_probit" |
"cp_<likelihood>" | "cp", likelihood=...)``).

``CPEngine`` holds one fit's per-entry message store, per-object posterior and the schedule
chosen once from ``SWEEPS`` (the kernels of ``fastcep.kernels.tensor``); its ``step`` runs one
iteration for the one loop (``fastcep._loop``). ``fit_cp`` checks the input, lays out the
entries, draws the start and runs the loop; ``fastcep.stream`` builds an engine per batch.
"""

import functools
import math
import os
import time

import numpy as np

from .. import _loop
from .. import _options as O
from .. import _validation as V
from .._models import is_generic
from .._quadrature import gauss_hermite
from .._threads import num_threads, plan
from ..glm.learn import EXPECTATION_NODES, LikelihoodLearner, initial_values
from ..kernels import tensor as K
from ..kernels.tensor import lp as KLP
from . import hyper as H
from .init import SKETCH_OVERSAMPLING, SKETCH_ROUNDS, sketch_init, sketch_sums, svd_init
from .layout import (
    check_coords,
    check_eval_set,
    check_memory,
    check_values,
    default_rank,
    entries_digest,
    make_layout,
    standardized,
)
from .likelihoods import describe, kernel_model
from .result import CPResult, CPState, eval_metric, second_moments

CP_MODELS = O.choices("model", "cp")
#: the kernel code of each ``lp_indefinite`` rule: what method="lp" does with a Laplace message
#: whose precision is not positive semi-definite
LP_INDEFINITE = {"skip": KLP.LP_SKIP, "apply": KLP.LP_APPLY, "clip": KLP.LP_CLIP}

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
#: predictions whose mean square is below this fraction of the values' have collapsed to 0: the
#: change is measured against the values' scale there (``CPEngine.step``)
COLLAPSED = 1e-12
#: the store's posterior that a resumable state carries (``CPState.posterior``)
POSTERIOR_FIELDS = ("P_Lam", "P_eta", "M", "S", "E2")
#: the signature defaults of ``fit_cp``, from the option table (``fastcep._options``)
CP_DEFAULTS = O.defaults("cp", "cep1")


def exact_sum(x):
    """Correctly rounded sum: numpy's pairwise SIMD sum can differ in the last bits with the
    array's memory alignment, which made a resumed stream differ from an uninterrupted one."""
    return math.fsum(x.tolist())


def exact_partials(x):
    """Floats whose exact sum is that of x (1-D): its correctly rounded sum, then the correctly
    rounded remainders until none is left (a few passes of ``math.fsum``). ``math.fsum`` of the
    partials of several arrays is the correctly rounded sum of them all, ``exact_sum`` of their
    concatenation, bitwise: how a cluster's partitions send a sum."""
    values, parts = x.tolist(), []
    while True:
        rest = math.fsum(values + [-p for p in parts])
        if rest == 0.0:
            return parts
        parts.append(rest)


def _exact_var(x):
    """Variance from correctly rounded sums (see ``exact_sum``)."""
    mean = exact_sum(x) / len(x)
    return exact_sum((x - mean) ** 2) / len(x)


def reference_var(y):
    """The variance the starting noise precision is set against: Var(y), or for (nearly)
    constant values, whose variance says nothing of the noise (a precision of 1e301 made the
    embeddings' variances 1e-303), mean(y^2), or 1 for values all 0."""
    return reference_of(_exact_var(y), exact_sum(y * y) / len(y))


def reference_of(var, mean2):
    """``reference_var`` from the values' exact variance and mean square."""
    if var > 1e-12 * mean2:
        return var
    return mean2 if mean2 > 0.0 else 1.0


class BufferPool:
    """Buffers kept across a stream's batch engines (``CPEngine(pool=...)``): ``empty`` and
    ``zeros`` take numpy's arguments and hand out views of kept buffers, slot by slot in the order
    asked (an engine asks for its arrays in the same order every batch), each slot grown to the
    largest size asked of it. Every batch then writes to pages it has written before, where an
    engine of its own allocated and first touched a store and scratch per batch (BENCHMARKS.md,
    "Streams on the one loop"). ``start()`` before each engine; one engine at a time."""

    def __init__(self):
        self.slots = []
        self.next = 0

    def start(self):
        self.next = 0

    def empty(self, shape, dtype=np.float64):
        shape = (shape,) if np.ndim(shape) == 0 else tuple(shape)
        size = math.prod(shape)
        i = self.next
        self.next += 1
        if i == len(self.slots):
            self.slots.append(np.empty(0, dtype))
        buf = self.slots[i]
        if buf.dtype != dtype or buf.size < size:
            buf = self.slots[i] = np.empty(size, dtype)
        return buf[:size].reshape(shape)

    def zeros(self, shape, dtype=np.float64):
        out = self.empty(shape, dtype)
        out.fill(0)
        return out


class _FreshArrays:
    """numpy's own allocation in ``BufferPool``'s shape (an engine that owns its arrays)."""

    empty = staticmethod(np.empty)
    zeros = staticmethod(np.zeros)

    def start(self):
        pass


_FRESH = _FreshArrays()


def _allocate(n, Kmodes, R, n_obj, covariance, pool=_FRESH):
    empty = pool.empty
    if covariance == "full":
        Lam = pool.zeros((n, Kmodes, R, R))
        idx = np.arange(R)
        Lam[:, :, idx, idx] = FLAT_PRECISION
        post = (
            empty((n_obj, R, R)),
            empty((n_obj, R)),
            empty((n_obj, R)),
            empty((n_obj, R, R)),
            empty((n_obj, R, R)),
        )
    else:
        Lam = empty((n, Kmodes, R))
        Lam.fill(FLAT_PRECISION)
        post = tuple(empty((n_obj, R)) for _ in range(5))
    return Lam, pool.zeros((n, Kmodes, R)), post


def _variances(S, covariance):
    """Posterior variances (n_obj, R): a view of S."""
    return S if covariance == "diag" else np.diagonal(S, axis1=1, axis2=2)


def moments_change(M_old, var_old, M, var):
    """The paper's change measure: largest change of a mean (in sds) or relative change of a variance."""
    return float(max(np.max(np.abs(M - M_old) / np.sqrt(var)), np.max(np.abs(var - var_old) / var)))


def entry_marginals(gidx, covariance, mean, var, M, E2):
    """The predictive mean and variance (n,) of each entry's f under the posterior moments M
    (n_obj, R) and E2 (second moments: (n_obj, R, R), or (n_obj, R) with covariance="diag"),
    written into ``mean`` and ``var``: what a generic model's learned likelihood parameters are
    updated from (``fastcep.glm.learn``)."""
    if covariance == "full":
        K.predict_full(gidx, M, E2, mean, var)
    else:
        K.predict_diag(gidx, M, E2, mean, var)
    return mean, var


def collapse_floor(likelihood, y):
    """The least mean square of the predictions that the stopping measure divides by: COLLAPSED
    of the values' on the scale of f (the likelihood's ``link_values``: log(1 + y) for counts,
    whose own squares, 1e24 for one count of 1e12, made every change look like 1e-5 and stopped
    a fit "converged" after one sweep: issue 38, case 12)."""
    f = y if likelihood is None else likelihood.link_values(y)
    return floor_of(exact_sum(f * f), len(f))


def floor_of(sum_sq, n):
    """``collapse_floor`` from the exact sum of the n values' squares on the scale of f."""
    return max(COLLAPSED * sum_sq / max(n, 1), 1e-300)


def warm_start(likelihood, y, warmup_snr):
    """The first values of a generic model's learned parameters in a fresh fit with a warm-up
    (held for its iterations, as cp_gaussian's noise precision): those of the values alone
    (``fastcep.glm.learn``), a noise level at ``warmup_snr`` times less power, as cp_gaussian's
    (a variance ``reference_var(y) / warmup_snr``, a scale the values' robust one over
    sqrt(warmup_snr)); a dispersion as it is. Starting at the values' own spread (the
    regression's start, signal-to-noise ratio 1) lets a poor early fit explain the data as
    noise: a stream's first batch of 300 entries on a 15 x 12 x 10 rank-2 tensor settled at a
    noise variance of 2.3 for 0.09."""
    start = initial_values(likelihood, y)
    if "var" in start:
        start["var"] = reference_var(y) / warmup_snr
    if "scale" in start:
        start["scale"] /= math.sqrt(warmup_snr)
    return start


def summed_groups(n, n_obj, Kmodes, method, covariance, schedule):
    """The entries per sum group of the parallel sweep (``CPEngine``'s ``sum_chunk``), or None
    where it does not sum: method "cep1" with full covariances and the parallel schedule, when
    the per-group sums (SUM_GROUPS of them at most, n_obj R^2 floats each) are small beside the
    messages (n Kmodes R^2: not for a small batch over many objects)."""
    n_groups = min(SUM_GROUPS, -(-n // ENTRY_CHUNK))
    summing = (method, covariance, schedule) == ("cep1", "full", "parallel")
    if not summing or n_groups == 0 or n_groups * n_obj > SUM_FRACTION * n * Kmodes:
        return None
    return sum_group_size(n)


def sum_group_size(n):
    """Entries per fixed group of n entries: SUM_GROUPS groups, or fewer of ENTRY_CHUNK entries
    at least (the parallel sweep's sums, ``summed_groups``; the sketch of ``init="sketch"``)."""
    return -(-n // max(1, min(SUM_GROUPS, -(-n // ENTRY_CHUNK))))


class CPEngine:
    """One CP fit's problem, message store and scratch (``kernels.tensor.state``: the NamedTuples
    that every driver takes whole) and the schedule chosen once: the engine's inner step.

    ``fit_cp`` builds one from checked input; ``fastcep.stream`` builds one per batch from the
    batch's own layout and the posterior so far (no public checks, nothing over objects the batch
    does not touch). ``step(it)`` runs one iteration in place (the sweep of the schedule chosen
    once, from ``SWEEPS``, then the noise posterior and the change) and returns its
    ``StepReport`` for the one loop (``fastcep._loop``).

    Parameters
    ----------
    lay : Layout
        The entries' global object numbering and CSR grouping (``layout.make_layout``).
    y, s : arrays (n,)
        Values (the labels' signs for binary models) and label signs (zeros for the others).
    model, method, covariance, schedule : str
    R : int
    rho : float
        Damping.
    prior_Lam, prior_eta : arrays (n_obj, R, R) or (n_obj, R), and (n_obj, R)
        Per-object prior natural parameters.
    a0, b0 : float
        Gamma prior of the noise precision (cp_gaussian).
    init_means, init_covs : arrays (n_obj, R) and (n_obj, R, R) / (n_obj, R), or None
        The initial posterior moments of a fresh fit (covs None: INIT_VAR_FRACTION of the means'
        mean square on the diagonal). Ignored with ``messages``.
    messages : CPState or None
        Resume from these messages (checked already).
    noise_warmup, warmup_snr : int, float
        cp_gaussian, fresh fit: iterations with E[tau] held at warmup_snr / Var(y); a generic
        model's learner, fresh fit: iterations with its parameters held at their start
        (``warm_start``).
    rng : numpy.random.Generator
        Draws the entry order of the sequential schedule.
    hyper : HyperState or None
        A hierarchical prior's hyper-posterior (``tensor.hyper``), updated every iteration from
        the embeddings' posterior (from the second of a fresh fit); it rewrites ``prior_Lam`` and
        ``prior_eta``. None: the prior stays fixed.
    likelihood : fastcep.likelihoods.Likelihood or None
        A generic model's likelihood, its parameters filled in (None: the model's shorthand;
        unused by the hand-written models).
    learner : fastcep.glm.learn.LikelihoodLearner or None
        A generic model's learned likelihood parameters, updated after every iteration's sweep
        from the entries' marginals (``update(M, E2)``; its ``likelihood`` replaces
        ``likelihood``); None: the parameters stay as given (a stream's batch).
    sum_chunk : int or None
        The entries of each of the parallel sweep's sum groups (the map's fixed units, whose
        per-object sums of new messages the reduce adds in order: ``kernels.tensor.sweep_full``
        with_sums, ``reduce_object_sums``). None: ``summed_groups``' choice. A partition of a
        cluster fit (``fastcep.cluster.cp``) gives the whole fit's, so that its groups are the
        one-process fit's.
    pool : BufferPool or None
        Take the store's and the scratch's arrays from these buffers (a stream's batches, one
        engine at a time); None: numpy's.
    """

    def __init__(
        self, lay, y, s, model, method, R, covariance, schedule, rho, *, prior_Lam, prior_eta, a0, b0,
        probit_curvature="full", expect_under="posterior", lp_indefinite="clip", init_means=None,
        init_covs=None, messages=None, noise_warmup=0, warmup_snr=10.0, rng=None, hyper=None,
        likelihood=None, learner=None, sum_chunk=None, pool=None,
    ):  # fmt: skip
        n, Kmodes = lay.gidx.shape
        n_obj = int(lay.offsets[-1])
        self.lay = lay
        #: the digest of the entries (``CPState.data_sha256``), set by the fit that owns them
        self.data_sha256 = None
        self.model, self.method, self.covariance, self.schedule = model, method, covariance, schedule
        self.R, self.Kmodes, self.n, self.n_obj = R, Kmodes, n, n_obj
        self.rho, self.a0, self.b0 = rho, a0, b0
        self.hyper = hyper
        if hyper is not None:
            H.fill_prior(hyper, lay.offsets, covariance, prior_Lam, prior_eta)
        self.rng = rng
        pool = _FRESH if pool is None else pool
        pool.start()
        if messages is None:
            Lam, eta, post = _allocate(n, Kmodes, R, n_obj, covariance, pool)
            alpha, beta = pool.zeros(n), pool.zeros(n)
        else:
            Lam, eta, alpha, beta = (np.array(a, dtype=np.float64) for a in messages[:4])
            _, _, post = _allocate(1, Kmodes, R, n_obj, covariance, pool)
        self.store = K.CPStore(Lam, eta, alpha, beta, *post, pool.zeros(3))
        # the kernels' model code, and for a generic model (any likelihood of the seam) its
        # likelihood kernel (an argument of every driver) and Gauss-Hermite rule (in the problem)
        self.learner = learner
        self.likelihood = learner.likelihood if learner is not None else likelihood
        code, generic = kernel_model(model, probit_curvature, self.likelihood)
        self.lik, nodes, weights = generic if generic else (None, np.empty(0), np.empty(0))
        # (the rule as writable arrays, as the hand-written models' empty ones: numba types a
        # read-only array apart, so the cached rule compiled a second copy of every kernel that
        # takes the problem and not the likelihood: the rebuilds, the sums, the guard's)
        nodes, weights = np.array(nodes), np.array(weights)
        n_chunks = -(-n // ENTRY_CHUNK)
        # the parallel schedule with full covariances sums each fixed group of entries' new
        # messages per object during the sweep (kernels.tensor.sweep_full with_sums;
        # reduce_object_sums): the map and the fixed-order reduce (``sum_chunk``)
        if sum_chunk is None:
            sum_chunk = summed_groups(n, n_obj, Kmodes, method, covariance, schedule)
        with_sums = sum_chunk is not None
        if with_sums:
            self.sweep_chunk = sum_chunk
            n_groups = -(-n // sum_chunk)  # (every group non-empty)
        else:
            self.sweep_chunk = ENTRY_CHUNK
        # expect_under="cavity": the sweeps after the first of a fresh fit (which has no messages
        # to remove yet and takes the initial moments, as "posterior" does) form each entry's
        # cavities, in work units of their own: the sum groups, else at most CAVITY_UNITS chunks
        # (the messages do not depend on the chunk; each unit's batch scratch is about 160 KB at
        # rank 8)
        cav_units = 0
        if expect_under == "cavity":
            cav_units = n_groups if with_sums else min(n_chunks, CAVITY_UNITS)
            self.cav_chunk = self.sweep_chunk if with_sums else -(-n // cav_units)
            cav_units = -(-n // self.cav_chunk)  # (every unit non-empty)
        # the parallel schedule computes the noise messages in the sweep's pass over the entries
        fused_noise = model == "cp_gaussian" and schedule == "parallel" and covariance == "full"
        self.problem = K.CPProblem(
            lay.gidx, y, s, lay.ptr, lay.ent, lay.obj_mode, prior_Lam, prior_eta, code, OBJECT_CHUNK, nodes,
            weights, LP_INDEFINITE[lp_indefinite], fused_noise, with_sums,
        )  # fmt: skip
        # a likelihood that may not be log-concave (the Student-t, a Custom one) sends messages
        # of negative precision (an outlier's: ``kernels.tensor.rank_one_message``); a parallel
        # sweep of them may leave an object's posterior improper, or proper but nearly singular,
        # and then that object's step is pulled back towards its messages of before the sweep
        # (``settle``; a copy of the messages and of the posterior precisions). The sequential
        # schedule needs no guard: each damped update is a convex combination of two proper
        # posteriors of the same cavity (the old one and the tilted's).
        self.guard = guarded(model, method, schedule, self.likelihood)
        self.scratch = K.state.scratch(
            self.store, n_chunks, OBJECT_CHUNK, n_groups=n_groups if with_sums else 0, cav_units=cav_units,
            lp=method == "lp", guard=self.guard, empty=pool.empty, zeros=pool.zeros,
        )  # fmt: skip
        self.noise_chunks = pool.empty((n_chunks, 2))
        self.snapshot = False
        self.held_priors = 0
        self.prior_check = None
        self.n_restored = 0
        # (the function, not a bound method: an engine must not reference itself, or its arrays
        # wait for the cyclic garbage collector and every fit takes fresh pages)
        self.sweep = SWEEPS[_sweep_kind(method, covariance, schedule, expect_under)]
        self.resumed = messages is not None
        # (a fresh fit's start writes the moments: the natural parameters only, checked)
        held = getattr(messages, "posterior", None)  # (a resumed fit's posterior, as it was left)
        self.rebuild(moments=self.resumed and held is None)
        if messages is None:
            self._start(init_means, init_covs)
        elif held is not None:  # (the bits the fit left, not prior + messages summed again)
            self._restore_posterior(held)
        noise = self.store.noise
        noise[0], noise[1] = self._noise_sums()
        noise[2] = noise[0] / noise[1]
        # the iterations behind the messages (a resumed fit's state's; unknown: past the warm-up)
        done = getattr(messages, "iterations", None)
        self.done = 0 if messages is None else noise_warmup if done is None else int(done)
        self.at = self.done
        self.warm = model == "cp_gaussian" and noise_warmup > self.done
        self.noise_warmup = noise_warmup
        # a generic model's learned parameters are held at their start as cp_gaussian's noise
        self.learn_warm = learner is not None and noise_warmup > self.done
        if self.warm:
            # warm-up: the noise precision held at warmup_snr / Var(y) while the embeddings
            # take shape; learning it from the start lets a poor early fit inflate the noise,
            # which regularises the embeddings into a local optimum that explains the data as
            # noise (measured: 2 seeds in 5 stuck at E tau ~ 5 instead of 100 on a 30 x 25 x 20
            # rank-3 tensor)
            noise[2] = warmup_snr / reference_var(y)
        self.tau_init = noise[2]
        self.f_old = pool.zeros(n)
        self.f_new = pool.empty(n)
        # the change is relative to the predictions' mean square, but not below COLLAPSED of the
        # values' on the scale of f: predictions that shrink to 0 geometrically (one entry
        # explained as noise) have a constant relative change and would never stop
        self.f_floor = collapse_floor(self.likelihood, y)
        K.predict_mean(lay.gidx, self.store.M, self.f_old)

    # the posterior and the noise, as the stream reads them from any engine (``VMPEngine`` too)
    M = property(lambda self: self.store.M)
    S = property(lambda self: self.store.S)
    E2 = property(lambda self: self.store.E2)
    P_Lam = property(lambda self: self.store.P_Lam)
    P_eta = property(lambda self: self.store.P_eta)
    noise = property(lambda self: self.store.noise)

    # -------------------------------------------------------------------------------- set-up
    def _start(self, init_means, init_covs):
        """A fresh fit's initial posterior moments.

        Symmetry breaking: initial posterior means from the data (init="svd", see ``init``) or
        random (seeded), with small covariances (INIT_VAR_FRACTION of their mean square), so that
        the first sweep sees E[z z^T] ~ E[z] E[z]^T like an alternating least squares step; with
        the prior covariance, the first messages over-count the spread of the means and pull them
        towards 0. The posterior natural parameters get the prior's precision (P_Lam, from the
        flat messages) centred at the initial means: the first cavities are broad (for cp_probit
        a near-certain cavity would make the first messages carry no information) and a
        sequential sweep starts from the initial means; the rebuild after the first sweep forgets
        this pseudo-observation (posterior = prior + messages).
        """
        st = self.store
        M, S = st.M, st.S
        M[:] = init_means
        v0 = max(INIT_VAR_FRACTION * float(np.mean(M**2)), 1e-12)
        if self.covariance == "full":
            S[:] = v0 * np.eye(self.R)
        else:
            S[:] = v0
        if init_covs is not None:
            S[:] = init_covs
        second_moments(M, S, self.covariance, out=st.E2)
        if self.covariance == "full":
            st.P_eta[:] = np.einsum("oij,oj->oi", st.P_Lam, M)
        else:
            st.P_eta[:] = st.P_Lam * M

    def _restore_posterior(self, posterior):
        """A resumed fit's posterior as the fit it resumes left it (``CPState.posterior``), in
        place of prior + messages summed again (which differs in the last bits where that fit
        summed its sweeps' messages per group)."""
        st = self.store
        mine = [getattr(st, k) for k in POSTERIOR_FIELDS]
        if len(posterior) != len(mine) or any(
            np.shape(a) != b.shape for a, b in zip(posterior, mine, strict=False)
        ):
            raise ValueError(
                "The 'init_state' parameter of fit holds a posterior of other shapes than this fit's "
                f"({', '.join(str(b.shape) for b in mine)}): a state of another rank or covariance."
            )
        for a, b in zip(posterior, mine, strict=True):
            b[:] = a

    # ------------------------------------------------------------------------------ posterior
    def _noise_sums(self):
        """(a0 + sum alpha, b0 + sum beta): fixed-chunk partial sums, then their correctly rounded
        sum; the same whatever the thread count or memory alignment."""
        out = self.noise_chunks
        K.noise_chunk_sums(self.store.alpha, self.store.beta, ENTRY_CHUNK, out)
        return self.a0 + math.fsum(out[:, 0].tolist()), self.b0 + math.fsum(out[:, 1].tolist())

    def rebuild_objects(self, lo, hi, moments=True):
        """Full covariances: posterior of objects lo..hi-1 = prior + messages (with the guard, the
        messages of an object it refuses pulled back first: ``settle``); ``moments`` False: the
        natural parameters only (``kernels.tensor.rebuild_full``)."""
        rebuild = functools.partial(K.rebuild_full, self.problem, self.store, self.scratch, lo, hi, moments)
        rebuild()
        self.settle(rebuild, lo, hi)

    def rebuild(self, moments=True):
        """The exact posterior = prior + messages (also removes sequential drift); ``moments``
        False: full covariances' natural parameters only (a fresh fit's start writes the
        moments)."""
        if self.covariance == "full":
            self.rebuild_objects(0, self.n_obj, moments)
        else:
            rebuild = functools.partial(K.rebuild_diag, self.problem, self.store, self.scratch)
            rebuild()
            self.settle(rebuild, 0, self.n_obj)
        self.check_proper()

    def settle(self, rebuild, lo, hi, r=-1):
        """After a sweep's posterior of objects lo..hi-1 was built: with the guard, the objects it
        refuses (``restore``) take a half, a quarter, an eighth of their step, then none, each time
        rebuilt by ``rebuild()``, until it refuses none."""
        for i, frac in enumerate(K.PULLBACK):
            if not self.restore(lo, hi, r, frac, count=i == 0):
                return
            rebuild()

    def update_prior(self):
        """The hyper-layer's VMP update from the posterior so far (``tensor.hyper``), written into
        the objects' prior. With the guard (messages of negative precision) the new prior must
        pass the guard's test with the current messages (every object proper, no variance grown
        more than 1 / KEEP times), so that the messages it restores always give a posterior that
        passes: a new prior that does not (a column's prior precision falling under the sum of an
        object's negative messages, seen on a Student-t tensor with 10 % outliers where the
        learned prior switched a column off) is not taken this iteration (``held_priors``)."""
        pb, st = self.problem, self.store
        hyper = H.update(self.hyper, st.M, st.E2, self.lay.offsets, self.covariance)
        if self.guard:
            old = pb.prior_Lam.copy(), pb.prior_eta.copy()
        H.fill_prior(hyper, self.lay.offsets, self.covariance, pb.prior_Lam, pb.prior_eta)
        if self.guard and self._refused_prior():
            pb.prior_Lam[:], pb.prior_eta[:] = old
            self.held_priors += 1
            return
        self.hyper = hyper

    def _refused_prior(self):
        """Whether the guard refuses the prior + the current messages of some object, against the
        current posterior (the posterior in scratch)."""
        st, sc = self.store, self.scratch
        if self.prior_check is None:  # (a scratch posterior and flags, allocated once)
            post = {k: np.empty_like(getattr(st, k)) for k in ("P_Lam", "P_eta", "M", "S", "E2")}
            self.prior_check = (
                st._replace(**post),
                sc._replace(bad=np.empty_like(sc.bad)),
            )
        check, check_sc = self.prior_check
        check_sc.bad[:] = 0
        if self.covariance == "full":
            K.rebuild_full(self.problem, check, check_sc, 0, self.n_obj, True)
            K.mark_shrunk(check.P_Lam, st.P_Lam, 0, self.n_obj, OBJECT_CHUNK, sc.guard_A, sc.Ls, check_sc.bad)
        else:
            K.rebuild_diag(self.problem, check, check_sc)
            K.mark_shrunk_diag(check.P_Lam, st.P_Lam, 0, self.n_obj, -1, check_sc.bad)
        return bool(check_sc.bad.any())

    def restore(self, lo, hi, r=-1, frac=0.0, count=True):
        """The guard of messages of negative precision, after a parallel sweep's rebuild of
        objects lo..hi-1: every one whose posterior is not proper, or whose variance grew more
        than 1 / KEEP times in some direction since the step began (``kernels.tensor.mark_shrunk``),
        has its messages pulled back to a fraction ``frac`` of their step from those of before
        the sweep (0: restored; coordinate r's only with r >= 0: diagonal covariances;
        ``kernels.tensor.restore_objects``); with ``count`` the messages pulled back are counted
        in ``n_restored``. Returns whether any object was pulled back (its posterior is then to
        be rebuilt); False without the guard or outside a step."""
        if not self.snapshot:
            return False
        P, sc = self.store.P_Lam, self.scratch
        if self.covariance == "full":
            K.mark_shrunk(P, sc.old_P, lo, hi, OBJECT_CHUNK, sc.guard_A, sc.Ls, sc.bad)
        else:
            K.mark_shrunk_diag(P, sc.old_P, lo, hi, r, sc.bad)
        if not sc.bad[lo:hi].any():
            return False
        K.restore_objects(self.problem, self.store, sc, lo, hi, r, frac)
        if count:
            self.n_restored += int(sc.restored[lo:hi].sum())
        return True

    def check_proper(self):
        bad = self.scratch.bad
        if bad.any():
            raise FloatingPointError(
                f"fit: the posterior precision of {int(bad.sum())} object(s) is not positive definite; "
                "try a smaller 'damping'."
            )

    # --------------------------------------------------------------------------------- sweeps
    def _by_blocks(self, sweep_block):
        """``sweep_block(k_lo, k_hi, etau)`` over the schedule's blocks of modes, then the noise
        messages; returns the number of skipped messages. Parallel: all modes from one posterior;
        block: mode by mode, each mode's objects rebuilt before the next (see
        kernels.tensor.sweep_full)."""
        offsets, etau, Km = self.lay.offsets, self.store.noise[2], self.Kmodes
        skipped = self.scratch.skipped
        skipped[:] = 0
        for k_lo, k_hi in [(0, Km)] if self.schedule == "parallel" else [(k, k + 1) for k in range(Km)]:
            sweep_block(k_lo, k_hi, etau)
            if self.schedule == "block":
                self.rebuild_objects(offsets[k_lo], offsets[k_hi])
        if self.model == "cp_gaussian" and not self.problem.with_noise:
            K.noise_messages_full(self.problem, self.store, self.rho)
        return int(skipped.sum())

    def _sweep_full(self, it):
        def block(k_lo, k_hi, etau):
            K.sweep_full(
                self.problem, self.store, self.scratch, k_lo, k_hi, etau, self.rho, self.sweep_chunk, self.lik
            )

        return self._by_blocks(block)

    def _sweep_cavity(self, it):
        if it == 1 and not self.resumed:  # (no messages to remove yet: the initial moments)
            return self._sweep_full(it)

        def block(k_lo, k_hi, etau):
            K.sweep_cavity_full(
                self.problem, self.store, self.scratch, k_lo, k_hi, etau, self.rho, self.cav_chunk, self.lik
            )

        return self._by_blocks(block)

    def _sweep_lp(self, it):
        def block(k_lo, k_hi, etau):
            KLP.sweep_lp(self.problem, self.store, self.scratch, k_lo, k_hi, etau, self.rho, ENTRY_CHUNK)

        return self._by_blocks(block)

    def _sweep_diag(self, it):
        """Block coordinate schedule: mode by mode, coordinate by coordinate."""
        pb, st, sc = self.problem, self.store, self.scratch
        offsets, etau = self.lay.offsets, st.noise[2]
        sc.skipped[:] = 0
        for k in range(self.Kmodes):
            for r in range(self.R):
                K.sweep_diag_coord(pb, st, sc, k, r, etau, self.rho, ENTRY_CHUNK, self.lik)
                lo, hi = offsets[k], offsets[k + 1]
                coord = functools.partial(K.rebuild_diag_coord, pb, st, sc, lo, hi, k, r)
                coord()
                self.settle(coord, lo, hi, r)
        if self.model == "cp_gaussian":
            K.noise_messages_diag(pb, st, self.rho)
        return int(sc.skipped.sum())

    def _sequential(self, it):
        """Entries in a seeded random order, the posterior refreshed after each."""
        order = self.rng.permutation(self.n).astype(np.int64)
        fix_tau = self.warm and self.at <= self.noise_warmup
        args = (self.problem, self.store, self.scratch, order, fix_tau, self.rho, self.lik)
        if self.covariance == "full":
            return int(K.sequential_full(*args))
        return int(K.sequential_diag(*args))

    # ------------------------------------------------------------------------------ one step
    def step(self, it):
        """One iteration (the sweep, the posterior, the noise, the change); its ``StepReport``."""
        self.at = self.done + it
        st, sc = self.store, self.scratch
        M, S, noise = st.M, st.S, st.noise
        M_old, var_old = M.copy(), _variances(S, self.covariance).copy()
        if self.hyper is not None and (it > 1 or self.resumed):
            # the hyper-layer's VMP update from the posterior so far; the new prior enters the
            # posterior at this iteration's rebuild (and the cavities from the next)
            self.update_prior()
        if self.guard:  # (the messages of before the sweep, for ``restore``)
            np.copyto(sc.old_Lam, st.Lam)
            np.copyto(sc.old_eta, st.eta)
            np.copyto(sc.old_P, st.P_Lam)
            self.snapshot, self.n_restored = True, 0
        n_skipped = self.sweep(self, it)
        if self.problem.with_sums:  # posterior = prior + the sweep's per-group sums of the messages
            K.reduce_object_sums(self.problem, st, sc)
            self.settle(
                functools.partial(K.rebuild_full, self.problem, st, sc, 0, self.n_obj, True), 0, self.n_obj
            )
            self.check_proper()
        else:
            self.rebuild()  # exact posterior = prior + messages (also removes sequential drift)
        self.snapshot = False
        n_skipped += self.n_restored
        if self.model == "cp_gaussian":
            noise[0], noise[1] = self._noise_sums()
            held = self.warm and self.at <= self.noise_warmup
            noise[2] = self.tau_init if held else noise[0] / noise[1]
        change = self.prediction_change()
        param_change = moments_change(M_old, var_old, M, _variances(S, self.covariance))
        if self.learner is not None and not (self.learn_warm and self.at <= self.noise_warmup):
            # a generic model's learned likelihood parameters, from the entries' marginals under
            # the new posterior (as a regression's, ``fastcep.glm.learn``); the largest change of
            # a parameter's log enters the stopping measure
            change = max(change, self.learner.update(M, st.E2))
            self.likelihood = self.learner.likelihood
            self.lik = self.learner.kernel()
        # (a sweep that the guard undid in part is no evidence of convergence)
        values = {"param_change": param_change, "damping": self.rho}
        return _loop.StepReport(change, n_skipped, accept=self.n_restored == 0, values=values)

    def prediction_change(self):
        """The stopping measure: the relative RMS change of the training entries' predictive
        means since the last call, invariant to the scaling and rotation gauges of the CP
        factors (which drift slowly and keep per-parameter changes from settling)."""
        K.predict_mean(self.lay.gidx, self.store.M, self.f_new)
        f_new, f_old = self.f_new, self.f_old
        self.f_old, self.f_new = f_new, f_old
        return float(np.sqrt(np.mean((f_new - f_old) ** 2) / max(np.mean(f_new**2), self.f_floor)))

    def finite(self):
        return bool(np.all(np.isfinite(self.store.M)))

    def messages(self):
        """The resumable state: the messages (``fit(..., init_state=...)``) and a generic model's
        likelihood (its learned parameters' current values)."""
        likelihood = self.likelihood if is_generic(self.model) else None
        st = self.store
        # (the sequential schedule's generator: where the next iteration's order comes from)
        at = self.rng.bit_generator.state if self.schedule == "sequential" and self.rng is not None else None
        posterior = tuple(getattr(st, k).copy() for k in POSTERIOR_FIELDS)
        return CPState(
            st.Lam,
            st.eta,
            st.alpha,
            st.beta,
            self.hyper,
            likelihood,
            self.data_sha256,
            at,
            self.at,
            posterior,
        )

    def result(self, shape, n_iter, converged, stop_reason, trace, options, copy=True):
        """The result object; ``copy=False`` hands over M and S (once the fit is done with them)."""
        noise = self.store.noise
        noise = (float(noise[0]), float(noise[1])) if self.model == "cp_gaussian" else None
        M, S = (self.store.M.copy(), self.store.S.copy()) if copy else (self.store.M, self.store.S)
        likelihood = self.likelihood if is_generic(self.model) else None  # (None: the model's own)
        return CPResult(
            self.model, self.method, self.covariance, self.R, shape, M, S, noise, n_iter, converged,
            stop_reason, trace, self.messages(), options, hyper=self.hyper, likelihood=likelihood,
        )  # fmt: skip


def guarded(model, method, schedule, likelihood):
    """Whether a CP fit's sweeps take the guard of messages of negative precision
    (``CPEngine.settle``): CEP-1 of a likelihood that may not be log-concave, in a parallel or
    block schedule."""
    return (
        is_generic(model)
        and likelihood is not None
        and not likelihood.log_concave
        and method == "cep1"
        and schedule != "sequential"
    )


def _sweep_kind(method, covariance, schedule, expect_under):
    """The key of ``SWEEPS`` for a fit's options (checked already)."""
    if schedule == "sequential":
        return "sequential"
    if covariance == "diag":
        return "diag"
    if method == "lp":
        return "lp"
    return "cavity" if expect_under == "cavity" else "full"


#: the sweep of each schedule, chosen once per fit (``_sweep_kind``)
SWEEPS = {
    "full": CPEngine._sweep_full,
    "cavity": CPEngine._sweep_cavity,
    "lp": CPEngine._sweep_lp,
    "diag": CPEngine._sweep_diag,
    "sequential": CPEngine._sequential,
}


def default_prior(n_obj, R, covariance, prior_var, prior_mean, rng):
    """The N(m, prior_var I) prior of every object (natural parameters) and its means m: 0, or with
    a positive ``prior_mean`` m = |N(0, prior_mean^2)| per coordinate (seeded; None when 0)."""
    eye = np.eye(R) if covariance == "full" else np.ones(R)
    prior_Lam = np.ascontiguousarray(np.broadcast_to(eye / prior_var, (n_obj, *eye.shape)))
    prior_eta = np.zeros((n_obj, R))
    m0 = None
    if prior_mean > 0.0:
        m0 = prior_mean * np.abs(rng.standard_normal((n_obj, R)))
        prior_eta = m0 / prior_var
    return prior_Lam, prior_eta, m0


def fit_cp(
    coords,
    values,
    model,
    method=CP_DEFAULTS["method"],
    *,
    likelihood=CP_DEFAULTS["likelihood"],
    shape=CP_DEFAULTS["shape"],
    rank=CP_DEFAULTS["rank"],
    prior_var=CP_DEFAULTS["prior_var"],
    a0=CP_DEFAULTS["a0"],
    b0=CP_DEFAULTS["b0"],
    damping=CP_DEFAULTS["damping"],
    max_iter=CP_DEFAULTS["max_iter"],
    tol=CP_DEFAULTS["tol"],
    schedule=CP_DEFAULTS["schedule"],
    covariance=CP_DEFAULTS["covariance"],
    init_scale=CP_DEFAULTS["init_scale"],
    standardize=CP_DEFAULTS["standardize"],
    noise_warmup=CP_DEFAULTS["noise_warmup"],
    warmup_snr=CP_DEFAULTS["warmup_snr"],
    prior_mean=CP_DEFAULTS["prior_mean"],
    prior=CP_DEFAULTS["prior"],
    init=CP_DEFAULTS["init"],
    lp_indefinite=CP_DEFAULTS["lp_indefinite"],
    probit_curvature=CP_DEFAULTS["probit_curvature"],
    expect_under=CP_DEFAULTS["expect_under"],
    eval_set=CP_DEFAULTS["eval_set"],
    n_threads=CP_DEFAULTS["n_threads"],
    client=CP_DEFAULTS["client"],
    checkpoint=CP_DEFAULTS["checkpoint"],
    checkpoint_every=CP_DEFAULTS["checkpoint_every"],
    resume=CP_DEFAULTS["resume"],
    callback=CP_DEFAULTS["callback"],
    seed=CP_DEFAULTS["seed"],
    n_starts=CP_DEFAULTS["n_starts"],
    init_state=CP_DEFAULTS["init_state"],
    verbose=CP_DEFAULTS["verbose"],
    progress=CP_DEFAULTS["progress"],
    cluster=None,
    **unknown,
):
    """Fit a Bayesian CP decomposition by CEP-1 or Laplace propagation (called by ``fastcep.fit``).

    Parameters
    ----------
    coords : int array (n, K), K >= 2
        0-based coordinates of the observed entries. A repeated row is a second, independent
        observation of that entry (it has its own messages).
    values : array (n,)
        Real values (cp_gaussian) or binary labels {0, 1}, {-1, 1} or bool (cp_probit); for a
        generic model the values its likelihood accepts (its ``check``: binary labels for
        cp_logistic, counts for a count likelihood).
    model : {"cp_gaussian", "cp_probit", "cp_<likelihood>", "cp"}
        "cp_gaussian" (Gaussian noise of learned precision) and "cp_probit" have hand-written
        messages. "cp_<name>", for every other likelihood ``name`` of the seam's registry
        (``fastcep.kernels.likelihoods.REGISTRY``; "cp_logistic"): CEP-1 with method "cep1" only.
        Given the other modes' moments z, the entry's likelihood reaches the object's u through
        a = u.z; the cavity N(u | mc, Sc) gives a the mean E[z].mc and the variance
        tr(Sc E[z z^T]) (as the probit message), the likelihood's one-dimensional tilted moments
        (a closed form, else Gauss-Hermite with ``likelihoods.GENERIC_NODES`` nodes) give
        alpha = d log Z / dm and beta = -d^2 log Z / dm^2, and the message is rank one: g = alpha
        E[z], A = beta E[z] E[z]^T (cp_probit's ``probit_curvature="rank1"`` message is this one
        with the probit's closed form). Priors, schedules, covariances and ``expect_under`` as
        for cp_probit. No noise model: a likelihood's parameters are its own. "cp": the
        likelihood of ``likelihood``.
    likelihood : fastcep.likelihoods.Likelihood, str or None
        With model "cp" (required there): a likelihood object (``fastcep.likelihoods``:
        ``Gaussian(var=0.1)``, ``Bernoulli("logistic")``, ``Custom(logpdf)``, ...) or the name of a
        built-in with its defaults. "cp_<name>" is the shorthand of ``likelihood="<name>"``. The
        model that runs (``res.model``; ``fastcep._models.resolve``): a likelihood
        equal to a hand-written model's is that model, ``Gaussian()`` (learned variance)
        cp_gaussian and ``Bernoulli("probit")`` cp_probit, since their messages are exact where
        the generic ones replace z by E[z]; one equal to a generic shorthand's defaults is that
        shorthand ("cp_logistic"); any other (a Gaussian of known variance, a Custom one) is the
        generic model "cp". A parameter given as None is learned, as a regression learns it
        (``fastcep.glm.learn``): once per iteration, after the sweep, from the predictive mean
        and variance of every observed entry's f under the current posterior; a Gaussian's
        noise precision by its Gamma(a0, b0) posterior, any other parameter by an EM step that
        maximises sum_e E[log p(y_e | f_e)]. The first values come from the values alone and are
        held for ``noise_warmup`` iterations, as cp_gaussian's noise precision (a Gaussian's
        variance Var(values) / ``warmup_snr``; ``warm_start``). The largest change of a
        parameter's log enters the stopping measure. The fitted likelihood, the learned values
        filled in, is ``res.likelihood``; ``res.state`` carries them to a resumed fit (which,
        as cp_gaussian's, does not repeat the warm-up). A generic model takes the values as
        they are (no ``standardize``): a known variance or scale is on the values' scale.
    method : {"cep1", "lp"}
        "cep2" is refused with an explanation (the paper found it worse than CEP-1 for tensors).
        "lp": Laplace propagation, the paper's baseline (section 5.2), in the same message store
        and schedule: each entry's K messages come from the mode of its joint tilted
        distribution over the K embeddings (damped Newton with the exact Hessian, at most 100
        iterations, where the paper used L-BFGS) and the marginal blocks of the inverse Hessian
        there (``kernels.tensor.lp``). cp_gaussian uses E[tau] (the noise posterior mean) in the
        likelihood; the noise messages are CEP's (shape 1/2, rate E[(y - f)^2] / 2 under the
        posterior). Full covariances with schedule "parallel" or "block" only (a block
        iteration costs K parallel ones). 20-40 times slower per iteration than CEP-1 (Alog,
        rank 8) and fragile: it often settles in a fixed point far worse than CEP-1's (the
        paper's finding too); see ``lp_indefinite``.
    shape : sequence of K ints, optional
        Tensor shape (default: 1 + the largest index of each mode).
    rank : int >= 1 or None, default None
        None (method "cep1" with a learned prior): a generous rank from the data's size,
        ``layout.default_rank``: n // (2 (d_1 + ... + d_K)) between 3 and 20 (Alog 20, Enron 3),
        which the learned prior prunes (``res.effective_rank``; ``res.rank`` is the rank chosen,
        ``res.options["rank_from_data"]`` True). On Alog, five folds and five seeds, rank 20
        reached RMSE 0.782 against 0.834 at rank 8, at about 7 times the time (BENCHMARKS.md).
        Methods "lp", "vmp", "cp_wopt" and a fixed prior need it.
    prior : {"wishart", "ard", "hierarchical", "fixed"} or None, default None
        The embeddings' prior (``fastcep.tensor.hyper``). "wishart" (BPMF): each mode's
        embeddings are N(mu_k, inv(Lambda_k)) with a Normal-Wishart hyperprior, whose posterior
        is learned by VMP messages in the same loop (full covariances only). "ard" (BCPF): zero
        mean and one learned precision per rank column, shared by the modes. "hierarchical":
        the learned one that suits the covariance ("wishart", or "ard" with diagonal ones). "fixed":
        N(m, prior_var I) (see ``prior_mean``). None: "wishart" for "cep1" with full covariances,
        "ard" with diagonal ones, "fixed" for "lp" (the paper's baseline) or with a positive
        ``prior_mean``. Chosen on held-out training entries of Alog and Enron (folds 1 and 2,
        ranks 3 and 8, three seeds; ``python -m bench.cp_defaults``, BENCHMARKS.md): with the
        cavity's expectations, validation RMSE 1.015 / 0.964 against 1.050 / 1.036 for the
        fixed prior under the posterior (Alog, ranks 3 / 8), AUC 0.946 / 0.951 against 0.759
        / 0.737 (Enron). The learned hyper-posterior is ``res.hyper``; ``res.effective_rank``
        counts the rank columns the data carry.
    prior_var : float > 0, default 1.0
        Variance of the fixed N(0, prior_var I) prior of every embedding, and the start of a
        learned one.
    a0, b0 : float > 0, default 1e-3
        Gamma(a0, b0) prior of the noise precision tau (cp_gaussian, and a generic Gaussian's
        learned variance).
    damping : float in (0, 1], default 0.5
        ``msg <- (1 - damping) msg + damping new`` in natural parameters.
    max_iter : int, default 500
    tol : float >= 0, default 1e-4
        Stop when the relative RMS change of the training entries' predictive means over one
        iteration is below tol (invariant to the gauges of the factors).
    schedule : {"parallel", "block", "sequential"} or None, default None
        None: "sequential" for the count models (cp_poisson, cp_negbin), whose parallel and
        block sweeps run off (BENCHMARKS.md, issue 22), else "parallel". "parallel": every
        entry's messages to every mode from one posterior (full covariances;
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
    probit_curvature : {"full", "rank1"} or None, default None
        None: "rank1" for cp_probit with method "cep1" (where it applies), else "full".
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
        sampler's (BENCHMARKS.md). With the learned prior and the cavity's expectations (the
        defaults) the two rules are tied on Enron's held-out training entries and against a
        Gibbs sampler of the hierarchical model; "rank1" is 1.5x faster a sweep.
    expect_under : {"posterior", "cavity"} or None, default None
        None: "cavity" where it applies (method "cep1", full covariances, the parallel or block
        schedule) and the likelihood is log-concave, else "posterior" (chosen with ``prior``,
        above; for a likelihood that may not be log-concave, such as the Student-t, against a
        Gibbs sampler: BENCHMARKS.md, "Outliers in tensors"). Method "cep1": the
        distribution of the other modes under which the message of an entry to mode k takes the
        expected conditional moments (E[z], E[z z^T]). "posterior" (the
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
        cp_gaussian: iterations with the noise precision held at ``warmup_snr / Var(values)``; a
        generic model with learned likelihood parameters: iterations with them held at their
        start, a Gaussian's variance ``Var(values) / warmup_snr`` (``warm_start``).
    warmup_snr : float > 0, default 10.0
    prior_mean : float >= 0, default 0.0
        With a positive value, the prior of each embedding is N(m, prior_var I) with m drawn
        (seeded) as |N(0, prior_mean^2)| per coordinate (the supplement writes the prior as
        N(m_s, v I)), and the fit starts from m. Small positive means break the sign symmetry
        whose all-zero fixed point very sparse binary data converge to: on Enron (1,010
        training entries) rank 8 test AUC 0.757 with 0 and 0.851 with the value chosen per fold
        on a held-out fifth of the training entries (``python -m bench.cp_quality
        --select-prior-mean 0 0.1 0.3 0.5 1``; BENCHMARKS.md). Choose it the same way. It asks for
        the fixed prior (``prior=None`` then stands for "fixed"); the learned priors learn their
        means.
    eval_set : (coords, values) or None
        Test entries whose RMSE (cp_gaussian and other non-binary models) or AUC (cp_probit and
        other binary models) is recorded every iteration in ``trace.eval_metric``.
    n_starts : int, default 1
        Fit from this many starts (``seed``'s own first, then seeds drawn from it) and keep the
        fit of the highest mean training log predictive density, the fit's own evidence; every
        start's seed, training log-likelihood and iterations are in ``res.options["starts"]``.
        On Alog's held-out training entries, the best of 3 starts by this evidence lowered the
        RMSE at ranks 8 and 10 by 0.005-0.010 and halved the spread over seeds; at rank 5 it
        was no better (BENCHMARKS.md, issue 21). It costs n_starts fits.
    n_threads, callback, seed, init_state, verbose, progress
        As for regression; the callback receives a
        ``fastcep.IterationInfo``, ``init_state`` a ``CPState`` (``res.state``) of a fit on the same
        entries.
    cluster : module or None
        ``fastcep.cluster.cp``, which ``fastcep.fit`` passes with ``client=`` (the engine does not
        import the cluster code that builds on it).
    **unknown
        Any other name raises TypeError listing the valid ones. Every option's constraint and
        default: the option table (``fastcep._options``; ``help(fastcep.fit)``).

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
    given = O.arguments(locals())
    start = time.perf_counter()
    func = "fit"
    o = O.validate(func, "cp", model, method, given)  # (the option table: fastcep._options)
    on_file = isinstance(coords, (str, os.PathLike))  # (a tensor file a cluster's workers read)
    if o["n_starts"] > 1 and not on_file:
        return _best_start(coords, values, model, method, given, o["n_starts"], cluster)
    model, lik = o["model"], o["likelihood"]  # (the model that runs: "cp" resolved)
    client = o["client"]
    if on_file:  # (checked, standardised and summed on the workers: ``fastcep.cluster.cp``)
        cluster_cp = V.cluster_module(cluster, "fit_cp")
        data = cluster_cp.FileEntries(client, coords, values, model, method, o, lik, given, func)
    else:
        data = ArrayEntries(coords, values, model, o, lik, func)
    shape, n, Kmodes, y, s = data.shape, data.n, data.Kmodes, data.y, data.s
    digest, center, scale = data.digest, data.center, data.scale
    R, pv, a0, b0, rho = o["rank"], o["prior_var"], o["a0"], o["b0"], o["damping"]
    rank_from_data = R is None
    if rank_from_data:  # (a generous rank, pruned by the learned prior)
        R = default_rank(shape, n)
    max_iter, tol, schedule, covariance = o["max_iter"], o["tol"], o["schedule"], o["covariance"]
    if client is None:
        copies = 2 if guarded(model, method, schedule, lik) else 1  # (the guard's copy of the messages)
        check_memory(n, shape, R, covariance, func, message_copies=copies)
    elif not on_file:  # (the messages live on the workers; a file's ``FileEntries`` refused first)
        cluster_cp = V.cluster_module(cluster, "fit_cp")
        cluster_cp.refusals(model, method, o, lik, func)
    init, init_scale, prior_mean = data.init, o["init_scale"], o["prior_mean"]
    noise_warmup, warmup_snr = o["noise_warmup"], o["warmup_snr"]
    lp_indefinite, probit_curvature, expect_under = (
        o["lp_indefinite"],
        o["probit_curvature"],
        o["expect_under"],
    )
    eval_set, init_state, n_threads, callback = o["eval_set"], o["init_state"], o["n_threads"], o["callback"]
    verbose, progress, seed = o["verbose"], o["progress"], o["seed"]
    rng = V.rng_from(seed)
    if eval_set is not None:
        eval_set = check_eval_set(eval_set, shape, lik, func)
    options = dict(
        shape=shape,
        rank=R,
        rank_from_data=rank_from_data,
        standardize=o["standardize"],
        value_center=center,
        value_scale=scale,
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
    prior = o["prior"]
    options["prior"] = prior
    if model == "cp":  # (the likelihood as given, learned parameters None; res.likelihood has them)
        options["likelihood"] = describe(lik)

    lay = data.layout()
    n_obj = int(lay.offsets[-1])
    messages = (
        _check_state(init_state, n, Kmodes, R, covariance, digest, func) if init_state is not None else None
    )
    learner = None
    if is_generic(model) and lik.learned:  # (updated after every sweep, ``CPEngine.step``)
        m = len(lay.gidx)  # (the entries this process holds: one for a file a cluster reads)
        marginals = functools.partial(entry_marginals, lay.gidx, covariance, np.empty(m), np.empty(m))
        first = _state_params(messages, lik, func)
        y_all = data.values_to_learn()  # (the values: a file's gathered from its partitions)
        if first is None and messages is None and noise_warmup > 0:
            first = warm_start(lik, y_all, warmup_snr)
        rule = gauss_hermite(EXPECTATION_NODES)
        learner = LikelihoodLearner(lik, y_all, marginals, rule, start=first, prior=(a0, b0), total=exact_sum)
    prior_Lam, prior_eta, m0 = default_prior(n_obj, R, covariance, pv, prior_mean, rng)
    hyper = None
    if prior != "fixed":  # (resumed from the state's hyper-posterior when it has one of this kind)
        held = getattr(messages, "hyper", None)
        hyper = held if held is not None and held.kind == prior else H.initial(prior, Kmodes, R, pv)
    threads, governor = plan(n_threads, n * Kmodes * R * R)
    with num_threads(threads):
        init_means = data.initial_means(lik, R, init, init_scale, m0, rng) if init_state is None else None
        make = (
            CPEngine
            if client is None
            else functools.partial(cluster_cp.ClusterCPEngine, client, func=func, entries=data.on_workers)
        )
        if getattr(messages, "rng_state", None) is not None:  # (the orders go on where they stopped)
            rng = generator_at(messages.rng_state, func)
        engine = make(
            lay, y, s, model, method, R, covariance, schedule, rho, prior_Lam=prior_Lam, prior_eta=prior_eta,
            a0=a0, b0=b0, probit_curvature=probit_curvature, expect_under=expect_under,
            lp_indefinite=lp_indefinite, init_means=init_means, messages=messages, noise_warmup=noise_warmup,
            warmup_snr=warmup_snr, rng=rng, hyper=hyper, likelihood=lik, learner=learner,
        )  # fmt: skip
        engine.data_sha256 = digest
        saved = None
        if client is not None and o["checkpoint"] is not None:
            saved = cluster_cp.checkpoints(engine, o, digest, dict(options, model=model, method=method), func)
        res = run_engine(
            engine, shape, options, max_iter=max_iter, tol=tol, callback=callback, eval_set=eval_set,
            verbose=verbose, progress=progress, label=f"{model}/{method}", start=start, governor=governor,
            saved=saved,
        )  # fmt: skip
    if is_generic(model):
        check_not_run_off(res, data.log_likelihood(res), func)
    if engine.learner is not None:  # (the engine's: a cluster fit's learns from its partitions)
        engine.learner.warn_at_bounds(func)
    return res


class ArrayEntries:
    """A CP fit's entries given as arrays, checked (``fit_cp``), and what the fit asks of them: the
    shape, the values as the kernels take them (``y``, the signs ``s``), the digest that
    ``res.state`` is bound to, the standardisation, the layout, the start and the training
    entries' log predictive density. ``fastcep.cluster.cp.FileEntries`` answers the same for a
    tensor file whose entries a cluster's workers read."""

    #: the partitions of a file on the workers (``ClusterCPEngine``'s ``entries``): none here
    on_workers = None

    def __init__(self, coords, values, model, o, lik, func):
        self.coords, self.shape = check_coords(coords, o["shape"], func)
        self.n, self.Kmodes = self.coords.shape
        self.values = values
        y = check_values(values, self.n, lik, func)
        self.digest = entries_digest(self.shape, [(self.coords, y)])  # (what res.state is bound to)
        self.y, self.center, self.scale = standardized(y, model, o["standardize"])
        self.s = self.y if lik.binary else np.zeros(self.n)
        self.init = o["init"]

    def layout(self):
        return make_layout(self.coords, self.shape)

    def values_to_learn(self):
        """The values a learned likelihood parameter's first value is taken from."""
        return self.y

    def initial_means(self, lik, R, init, init_scale, m0, rng):
        return initial_means(self.coords, lik.link_values(self.y), self.shape, R, init, init_scale, m0, rng)

    def log_likelihood(self, res):
        """The fit's mean log predictive density at its training entries."""
        return res.log_likelihood(self.coords, self.values)


def check_not_run_off(res, score, func):
    """Raise FloatingPointError when a generic model's posterior has run off: its mean log
    predictive density at its own training entries (``score``) is not finite. Such a posterior
    can stop "converged": seen with cp_poisson's parallel sweeps on a synthetic count tensor
    (``bench.cp_count_synthetic``), which stopped by tol after 129 iterations with means of 2.5e5
    and about 1 % of the messages refused in every sweep (nothing finite to predict with)."""
    if not math.isfinite(score):
        top = max(float(np.abs(m).max()) for m in res.posterior.means)
        raise FloatingPointError(
            f"{func}: the {res.model} posterior ran off ({res.stop_reason} after {res.n_iter} iterations): "
            f"its means reach {top:.3g} and its log predictive density at the training entries is "
            f"{score}; try schedule='sequential' or a smaller 'damping'."
        )


def start_seeds(seed, n_starts):
    """The seeds of ``n_starts`` starts: ``seed`` itself first, then seeds drawn from it (fresh
    entropy for None; a Generator's own draws)."""
    drawn = seed is None or isinstance(seed, np.random.Generator)
    first = int(V.rng_from(seed).integers(0, 2**63)) if drawn else seed
    return [first] + [int(x) for x in np.random.SeedSequence(first).generate_state(n_starts - 1, np.uint64)]


def _best_start(coords, values, model, method, given, n_starts, cluster=None):
    """``fit_cp`` from ``n_starts`` seeds (``start_seeds``); the result of the highest mean
    training log predictive density (``CPResult.log_likelihood`` on the fitted entries: the fit's
    own evidence, no held-out entries), with every start's in ``options["starts"]``."""
    best, starts = None, []
    for seed in start_seeds(given.get("seed", CP_DEFAULTS["seed"]), n_starts):
        res = fit_cp(coords, values, model, method, cluster=cluster, **dict(given, seed=seed, n_starts=1))
        score = res.log_likelihood(coords, values)
        starts.append({"seed": seed, "train_log_likelihood": score, "n_iter": res.n_iter})
        if best is None or score > best[0]:
            best = (score, res)
    res = best[1]
    res.options["n_starts"] = n_starts
    res.options["starts"] = starts
    return res


def initial_means(coords, y, shape, R, init, init_scale, m0, rng):
    """A fresh CP fit's initial posterior means (n_obj, R): the prior's means ``m0`` when they
    are not zero, else from the data y on the scale of f (init="svd", ``tensor.init``; the
    likelihood's ``link_values``) or N(0, init_scale^2) draws, seeded (symmetry breaking)."""
    if m0 is not None:
        return m0.copy()
    if init == "svd":
        return svd_init(coords, y, shape, R, init_scale, rng)
    if init == "sketch":  # (the map over the fit's fixed groups of entries; a cluster's too)
        width, group = R + SKETCH_OVERSAMPLING, sum_group_size(len(y))
        map_ = functools.partial(sketch_sums, coords, y, shape, width, group)
        return sketch_init(map_, exact_sum(y * y), len(y), shape, R, init_scale, rng, SKETCH_ROUNDS)
    return init_scale * rng.standard_normal((int(np.sum(shape)), R))


def run_engine(
    engine, shape, options, *, max_iter, tol, callback, eval_set, governor, saved=None, **loop_options
):
    """A CP engine's iterations in the one loop (``fastcep._loop``) and the fit's result: what
    ``fit_cp`` and ``fit_vmp`` share. ``eval_set`` is a checked (coords, values) pair or None;
    ``loop_options`` go to ``_loop.run`` (verbose, progress, label, start, hint). ``saved``: a
    cluster fit's ``Checkpoints`` (``fastcep.cluster.checkpoints``), or None; a fit resumed from
    one counts its iterations, trace and ``max_iter`` on from the checkpoint's."""
    done = 0 if saved is None else saved.resume()
    if saved is not None:
        callback = saved.callback(callback)
        options = saved.options(dict(options))

    def snapshot(it, trace):
        return engine.result(shape, done + it, False, "running", trace, options)

    evaluate = None
    if eval_set is not None:

        def evaluate(result):
            return eval_metric(result, *eval_set)

    out = _loop.run(
        engine.step, max_iter=max(max_iter, done), first=done, tol=tol, callback=callback, snapshot=snapshot,
        evaluate=evaluate, finite=engine.finite, governor=governor, **loop_options,
    )  # fmt: skip
    trace = out.trace
    if saved is not None:
        trace = saved.trace(trace)
        saved.write(trace)
    return engine.result(shape, done + out.n_iter, out.converged, out.stop_reason, trace, options, copy=False)


def _state_params(state, likelihood, func):
    """{name: value} of the learned parameters of ``likelihood`` held by a resumed fit's state
    (``CPState.likelihood``), or None (a fresh fit, or a state without them: the first values
    from the data)."""
    held = getattr(state, "likelihood", None)
    if held is None:
        return None
    fixed = {k: v for k, v in likelihood.params().items() if k not in likelihood.learned}
    if type(held) is not type(likelihood) or any(held.params().get(k) != v for k, v in fixed.items()):
        raise V.param_error(
            "init_state", func, f"the state of a fit with the likelihood {likelihood!r}", f"one of {held!r}"
        )
    return {name: getattr(held, name) for name in likelihood.learned}


def generator_at(state, func):
    """A new generator at the position ``state`` (``CPState.rng_state``: a bit generator's
    ``state``); never the user's ``seed`` generator, which it would move. ValueError naming
    ``init_state`` for a state no numpy bit generator takes."""
    name = state.get("bit_generator") if isinstance(state, dict) else None
    kind = getattr(np.random, name, None) if isinstance(name, str) else None
    if not (isinstance(kind, type) and issubclass(kind, np.random.BitGenerator)):
        raise V.param_error("init_state", func, "a state whose rng_state names a numpy bit generator", name)
    bits = kind()
    try:
        bits.state = state
    except (TypeError, ValueError, KeyError):
        raise V.param_error("init_state", func, f"a state whose rng_state is a {name} state", state) from None
    return np.random.Generator(bits)


def _check_state(state, n, Kmodes, R, covariance, digest, func):
    """``state`` checked as the messages of a fit on these entries (their digest ``digest``):
    a state of other entries of the same shape gave an RMSE of 0.368 against 0.087 from scratch
    (issue 38, item 15)."""
    if not isinstance(state, CPState):
        raise V.param_error("init_state", func, "a CPState (res.state) or None", state, TypeError)
    want = (n, Kmodes, R, R) if covariance == "full" else (n, Kmodes, R)
    if state.Lam.shape != want or state.eta.shape != (n, Kmodes, R) or state.alpha.shape != (n,):
        raise V.param_error("init_state", func, f"messages of shape {want}", f"shape {state.Lam.shape}")
    if state.data_sha256 is not None and state.data_sha256 != digest:
        raise ValueError(
            f"The 'init_state' parameter of {func} holds the messages of a fit on other entries (its data "
            f"digest {state.data_sha256[:12]}..., these entries' {digest[:12]}...): its messages belong to "
            "those entries and their values. Resume it on the same coords and values, or fit from scratch."
        )
    return state
