"""The learned message operator of method "kjit" (Jitkrittum, Gretton, Heess, Eslami,
Lakshminarayanan, Sejdinovic and Szabo, "Kernel-based just-in-time learning for passing
expectation propagation messages", UAI 2015).

``MessageOperator`` maps a logistic factor's incoming cavity message of a' = s x.w, summarised as
u = (s mu_a, log s2_a), to the factor's tilted moments of a', parametrised as
(alpha, beta) = ((E[a'] - s mu_a) / s2_a, (s2_a - var_a) / s2_a^2), by Bayesian linear
regression on random Fourier features; its predictive variance says when to ask the
importance-sampling oracle instead. ``KJITSweeps`` runs the sweeps of ``fit(...,
method="kjit")`` with it. The formulas, and why these targets, are in ``fastcep.kernels.kjit``.
"""

import math

import numpy as np

from .. import _options as O
from ..kernels.glm import kjit as K
from ..kernels.glm import schedules as SCH
from ..kernels.linalg import cholesky, cholesky_solve

#: fit's defaults of ``n_features`` and ``threshold`` (the option table, ``fastcep._options``);
#: N_FEATURES is also ``MessageOperator``'s
N_FEATURES = O.defaults("regression", "kjit")["n_features"]
THRESHOLD = O.defaults("regression", "kjit")["threshold"]
#: defaults of ``MessageOperator``
LENGTHSCALE = 1.0
NOISE_VAR = 1e-4
PRIOR_VAR = 1.0
#: fixed standardisation of the input u = (s mu_a, log s2_a): z = u / INPUT_SCALE
INPUT_SCALE = (1.5, 1.5)


class MessageOperator:
    """Bayesian linear regression on random Fourier features from u (m, 2) to y (m, 2).

    Inputs u = (s mu_a, log s2_a), targets y = (alpha, beta) (``fastcep.kernels.kjit``). Both
    outputs share the feature posterior A = I / prior_var + Phi^T Phi / noise_var and so the
    predictive variance noise_var + phi^T A^{-1} phi.

    Parameters
    ----------
    n_features : int >= 1, default 200
        D, the number of random Fourier features.
    lengthscale : float > 0, default 1.0
        Lengthscale of the Gaussian kernel on the standardised input z = u / input_scale
        (frequencies ~ N(0, I / lengthscale^2), phases ~ U(0, 2 pi)).
    noise_var : float > 0, default 1e-4
        Noise variance of the targets, shared by both outputs. The oracle's Monte-Carlo error of
        alpha and beta is below 1/(4 ESS) (Stein estimates of bounded functions), about 5e-5 for
        ESS ~ 5000 of 10,000 draws.
    prior_var : float > 0, default 1.0
        Prior variance of the feature weights, about the prior variance of the learned function
        (alpha is in (0, 1), beta in (0, 1/4)): far from the data the predictive variance is about
        prior_var, so every row there asks the oracle.
    input_scale : (float, float), default (1.5, 1.5)
        Fixed standardisation of u. alpha and beta vary on a scale of about 1.5 in both s mu_a
        (sigmoid-like in it) and log s2_a; measured on the paper's simulation (n = 1000, d = 4),
        (1.5, 1.5) gave posterior means within 0.02 posterior sd of EP where (5, 3) gave 0.5.
    seed : int, numpy.random.Generator or None
        Draws the features' frequencies and phases (once).

    Attributes
    ----------
    freq_ : ndarray (D, 2)
        Frequencies, applied to z = u / scale_.
    phase_ : ndarray (D,)
    scale_ : ndarray (2,)
    gram_ : ndarray (D, D)
        Phi^T Phi / noise_var of the training pairs.
    rhs_ : ndarray (2, D)
        Y^T Phi / noise_var.
    chol_ : ndarray (D, D)
        Lower Cholesky factor of A = I / prior_var + gram_.
    coef_ : ndarray (2, D)
        Posterior mean weights of the two outputs, A^{-1} rhs_ (row k: output k).
    n_data_ : int
        Training pairs added.
    """

    def __init__(
        self,
        n_features=N_FEATURES,
        lengthscale=LENGTHSCALE,
        noise_var=NOISE_VAR,
        prior_var=PRIOR_VAR,
        input_scale=INPUT_SCALE,
        seed=None,
    ):
        if int(n_features) < 1:
            raise ValueError(f"MessageOperator: n_features must be >= 1. Got {n_features} instead.")
        for name, val in (("lengthscale", lengthscale), ("noise_var", noise_var), ("prior_var", prior_var)):
            if not (math.isfinite(val) and val > 0):
                raise ValueError(f"MessageOperator: {name} must be a finite float > 0. Got {val} instead.")
        D = int(n_features)
        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        self.noise_var = float(noise_var)
        self.prior_var = float(prior_var)
        self.freq_ = rng.standard_normal((D, 2)) / float(lengthscale)
        self.phase_ = rng.uniform(0.0, 2.0 * math.pi, D)
        self.scale_ = np.array(input_scale, dtype=np.float64)
        self.gram_ = np.zeros((D, D))
        self.rhs_ = np.zeros((2, D))
        self.chol_ = np.zeros((D, D))
        self.coef_ = np.zeros((2, D))
        self.n_data_ = 0
        self._scratch = np.empty((2, D))
        self._refresh()

    @property
    def n_features(self):
        """D, the number of random features."""
        return self.phase_.shape[0]

    def features(self, U):
        """Random Fourier features of the inputs.

        Parameters
        ----------
        U : array of shape (m, 2)
            Inputs (s mu_a, log s2_a).

        Returns
        -------
        ndarray of float64, shape (m, D)
        """
        U = np.ascontiguousarray(U, dtype=np.float64).reshape(-1, 2)
        Phi = np.empty((U.shape[0], self.n_features))
        K.feature_matrix(U, self.freq_, self.phase_, self.scale_, Phi)
        return Phi

    def predict(self, U):
        """Predictive means and variance at the inputs.

        Parameters
        ----------
        U : array of shape (m, 2)

        Returns
        -------
        mean : ndarray of float64, shape (m, 2)
            Predicted targets (alpha, beta).
        var : ndarray of float64, shape (m,)
            Predictive variance noise_var + phi^T A^{-1} phi (the same for both outputs).
        """
        U = np.ascontiguousarray(U, dtype=np.float64).reshape(-1, 2)
        mean = np.empty((U.shape[0], 2))
        var = np.empty(U.shape[0])
        phi, r = self._scratch
        K.predict(
            U, self.freq_, self.phase_, self.scale_, self.chol_, self.coef_, self.noise_var, mean, var, phi, r
        )
        return mean, var

    def add(self, U, Y):
        """Add training pairs (in the given order) and update the regression.

        Pairs with a non-finite entry are dropped.

        Parameters
        ----------
        U : array of shape (m, 2)
            Inputs (s mu_a, log s2_a).
        Y : array of shape (m, 2)
            Targets (alpha, beta).

        Returns
        -------
        int
            Number of pairs added.
        """
        U = np.ascontiguousarray(U, dtype=np.float64).reshape(-1, 2)
        Y = np.ascontiguousarray(Y, dtype=np.float64).reshape(-1, 2)
        if U.shape[0] != Y.shape[0]:
            raise ValueError(f"MessageOperator.add: {U.shape[0]} inputs but {Y.shape[0]} targets.")
        keep = np.all(np.isfinite(U), axis=1) & np.all(np.isfinite(Y), axis=1)
        if not keep.all():
            U, Y = U[keep], Y[keep]
        if U.shape[0] == 0:
            return 0
        wts = np.full(U.shape[0], 1.0 / self.noise_var)
        K.accumulate(self.features(U), Y, wts, self.gram_, self.rhs_)
        self.n_data_ += U.shape[0]
        self._refresh()
        return U.shape[0]

    def _refresh(self):
        """chol_ and coef_ from gram_ and rhs_."""
        A = self.gram_.copy()
        A[np.diag_indices_from(A)] += 1.0 / self.prior_var
        A = 0.5 * (A + A.T)  # exactly symmetric (gram_ is symmetric up to rounding)
        if not cholesky(A, self.chol_):
            raise FloatingPointError(
                "MessageOperator: the feature precision matrix is not positive definite."
            )
        for k in range(2):
            cholesky_solve(self.chol_, self.rhs_[k], self.coef_[k])


class KJITSweeps:
    """Method "kjit"'s sweeps: one ``MessageOperator`` and the per-row buffers of
    ``kernels.glm.kjit.kjit_sweep``, for a fit on n rows in n_chunks chunks.

    Parameters
    ----------
    n, n_chunks : int
        Rows and parallel chunks of the fit.
    n_features : int
        Random features of the operator.
    threshold : float >= 0
        A row whose predictive variance exceeds it asks the oracle (0: every row does).
    seed : numpy.random.Generator
        Draws the operator's random features.

    Attributes
    ----------
    operator : MessageOperator
    oracle_calls : list of int
        Rows sent to the oracle in each sweep run so far.
    """

    def __init__(self, n, n_chunks, n_features, threshold, seed):
        self.operator = MessageOperator(n_features, seed=seed)
        self.threshold = float(threshold)
        self.oracle_calls = []
        self._fwork = np.empty((n_chunks, 2, n_features))
        self._used = np.zeros(n, dtype=np.bool_)
        self._U = np.empty((n, 2))
        self._Y = np.empty((n, 2))

    def step(self, problem, state, scratch, rho, key, schedule):
        """One sweep of ``schedule`` with the operator as it stands, on the fit's problem, state
        and scratch (``kernels.glm.state``); returns (change, skipped) as the regression
        schedules do, and records the sweep's oracle rows."""
        op = self.operator
        X, s = problem.X, problem.s
        tau, nu, T, N, mu, v = state
        opargs = (
            op.freq_,
            op.phase_,
            op.scale_,
            op.chol_,
            op.coef_,
            op.noise_var,
            self.threshold,
            op.n_data_ > 0,
        )
        SCH.begin_sweep(state, scratch)
        if schedule == "parallel":
            K.kjit_sweep(
                X, s, tau, nu, T, N, rho, problem.n_samples, key, problem.chunk, scratch.pT, scratch.pN,
                scratch.skipped, scratch.work, *opargs, self._fwork, self._used, self._U, self._Y,
            )  # fmt: skip
            change, skipped = SCH.finish_parallel(problem, state, scratch)
        else:
            skipped = K.kjit_sequential_sweep(
                X, s, tau, nu, T, N, mu, v, rho, problem.n_samples, key, scratch.order, scratch.old,
                scratch.row_t, scratch.row_n, scratch.work, *opargs, self._fwork[0], self._used, self._U,
                self._Y,
            )  # fmt: skip
            change = SCH.finish_sequential(problem, state, scratch)
        self.oracle_calls.append(int(np.count_nonzero(self._used)))
        return change, int(skipped)

    def learn(self):
        """Add the last sweep's oracle rows (in row order) to the operator; returns pairs added."""
        if not self.oracle_calls or self.oracle_calls[-1] == 0:
            return 0
        return self.operator.add(self._U[self._used], self._Y[self._used])
