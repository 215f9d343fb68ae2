"""The learned message operator of method "kjit" (Jitkrittum, Gretton, Heess, Eslami,
Lakshminarayanan, Sejdinovic and Szabo, "Kernel-based just-in-time learning for passing
expectation propagation messages", UAI 2015).

``MessageOperator`` maps a logistic factor's incoming cavity message of a' = s x.w, summarised
as u = (s mu_a, log s2_a), to the factor's tilted moments of a', parametrised as
y = ((E[a'] - s mu_a) / sqrt(s2_a), log(var_a / s2_a)), by Bayesian linear regression on random
Fourier features; its predictive variance says when to ask the importance-sampling oracle
instead. The formulas are in ``fastcep.kernels.kjit``; the sweep that uses it is
``fastcep.kernels.kjit.kjit_sweep``, driven by ``fastcep.regression.fit_regression``.
"""

import math

import numpy as np

from .kernels import kjit as K
from .kernels.linalg import cholesky, cholesky_solve

#: defaults of ``MessageOperator`` (and of fit's ``n_features`` and ``threshold``)
N_FEATURES = 200
LENGTHSCALE = 1.0
NOISE_VAR = 1e-4
PRIOR_VAR = 1.0
#: fixed standardisation of the input u = (s mu_a, log s2_a): z = u / INPUT_SCALE
INPUT_SCALE = (5.0, 3.0)
THRESHOLD = 1e-3


class MessageOperator:
    """Bayesian linear regression on random Fourier features from u (m, 2) to y (m, 2).

    Parameters
    ----------
    n_features : int >= 1, default 200
        D, the number of random Fourier features.
    lengthscale : float > 0, default 1.0
        Lengthscale of the Gaussian kernel on the standardised input z = u / input_scale
        (frequencies ~ N(0, I / lengthscale^2), phases ~ U(0, 2 pi)).
    noise_var : float > 0, default 1e-4
        Noise variance of each target (shared by both outputs, so they share the predictive
        variance). 1e-4 is the squared error of an importance-sampling target from ~10^4 draws.
    prior_var : float > 0, default 1.0
        Prior variance of the feature weights (about the prior variance of the learned function).
    input_scale : (float, float), default (5.0, 3.0)
        Fixed standardisation of u = (s mu_a, log s2_a).
    seed : int, numpy.random.Generator or None
        Draws the features' frequencies and phases (once).

    Attributes
    ----------
    freq_ : ndarray (D, 2)
    phase_ : ndarray (D,)
    scale_ : ndarray (2,)
    gram_ : ndarray (D, D)
        sum_j w_j phi_j phi_j^T over the training pairs, w_j = 1 / (noise_var + err_j).
    rhs_ : ndarray (2, D)
        sum_j w_j y_j phi_j^T.
    chol_ : ndarray (D, D)
        Lower Cholesky factor of A = I / prior_var + gram_ / noise_var.
    coef_ : ndarray (2, D)
        Posterior mean weights of the two outputs, A^{-1} Phi^T Y / noise_var.
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
            Predicted targets (y0, y1).
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

    def add(self, U, Y, err=None):
        """Add training pairs (in the given order) and update the regression.

        Pairs with a non-finite entry are dropped.

        Parameters
        ----------
        U : array of shape (m, 2)
            Inputs (s mu_a, log s2_a).
        Y : array of shape (m, 2)
            Targets (alpha, beta).
        err : array of shape (m,) or None
            Error variances of the targets, added to ``noise_var`` (None: zero): pair j has
            weight 1 / (noise_var + err_j) in the regression.

        Returns
        -------
        int
            Number of pairs added.
        """
        U = np.ascontiguousarray(U, dtype=np.float64).reshape(-1, 2)
        Y = np.ascontiguousarray(Y, dtype=np.float64).reshape(-1, 2)
        err = np.zeros(U.shape[0]) if err is None else np.asarray(err, dtype=np.float64).reshape(-1)
        if not U.shape[0] == Y.shape[0] == err.shape[0]:
            raise ValueError(
                f"MessageOperator.add: {U.shape[0]} inputs, {Y.shape[0]} targets, {err.size} errors."
            )
        keep = np.all(np.isfinite(U), axis=1) & np.all(np.isfinite(Y), axis=1) & np.isfinite(err) & (err >= 0)
        if not keep.all():
            U, Y, err = U[keep], Y[keep], err[keep]
        if U.shape[0] == 0:
            return 0
        wts = 1.0 / (self.noise_var + err)
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
