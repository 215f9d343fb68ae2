"""The paper's simulated regression data sets (section 5.1, after Li et al. 2015)."""

import numpy as np
from scipy.special import expit, ndtr

from fastcep import _validation as V

#: means of the 5-component Gaussian mixture of the second simulation (each variance 1/2)
MIXTURE_MEANS = np.array([-2.0, -1.0, 0.0, 1.0, 2.0])
MIXTURE_VAR = 0.5


def make_regression_simulation(model="probit", features="gaussian", n=10_000, d=4, seed=0):
    """Simulate a Bayesian probit or logistic regression data set as in the paper.

    Weights w ~ N(0, I); features i.i.d. N(0, 1) (``features="gaussian"``, the first data set)
    or from the mixture (1/5) sum_k N(mu_k, 1/2), mu_k in {-2, -1, 0, 1, 2}
    (``features="mixture"``, the second); labels y ~ Bernoulli(f(x.w)) with f the probit or
    logistic link.

    Parameters
    ----------
    model : {"probit", "logistic"}
    features : {"gaussian", "mixture"}
    n, d : int
        Samples (10,000 in the paper) and weights (4 in the paper).
    seed : int or Generator

    Returns
    -------
    X : ndarray of float64, shape (n, d)
    y : ndarray of int64, shape (n,), labels in {0, 1}
    w : ndarray of float64, shape (d,), the true weights
    """
    func = "make_regression_simulation"
    V.check_choice(model, "model", func, ("probit", "logistic"))
    V.check_choice(features, "features", func, ("gaussian", "mixture"))
    n = V.check_int(n, "n", func, low=1)
    d = V.check_int(d, "d", func, low=1)
    rng = V.check_seed(seed, func)
    w = rng.standard_normal(d)
    if features == "gaussian":
        X = rng.standard_normal((n, d))
    else:
        comp = rng.integers(0, MIXTURE_MEANS.size, size=(n, d))
        X = MIXTURE_MEANS[comp] + np.sqrt(MIXTURE_VAR) * rng.standard_normal((n, d))
    a = X @ w
    p = ndtr(a) if model == "probit" else expit(a)
    y = (rng.random(n) < p).astype(np.int64)
    return X, y, w
