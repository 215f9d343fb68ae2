"""scikit-learn style estimators: thin wrappers around ``fastcep.fit`` (needs scikit-learn)."""

import numpy as np

try:
    from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
    from sklearn.utils.multiclass import check_classification_targets, type_of_target
    from sklearn.utils.validation import check_is_fitted, validate_data
except ImportError as exc:  # pragma: no cover - exercised only without scikit-learn
    raise ImportError(
        "fastcep's scikit-learn estimators need scikit-learn: pip install 'fastcep[sklearn]'"
    ) from exc

from ._options import defaults
from .api import fit
from .glm.online import FORGET
from .glm.result import RegressionResult
from .likelihoods import resolve as resolve_likelihood

#: the estimators' defaults: ``fastcep.fit``'s, from the option table (``fastcep._options``)
DEFAULTS = defaults("regression", "cep1")
#: the scipy.sparse formats X may come in (methods "cep1", "cep2" and "ep" fit them without
#: making them dense; ``fastcep.fit``)
SPARSE = ("csr", "csc", "coo")


#: the estimators' parameters that go to ``fastcep.fit`` (the classifiers add schedule, n_nodes)
FIT_OPTIONS = (
    "method", "prior_var", "fit_intercept", "intercept_var", "damping", "max_iter", "tol", "n_threads",
)  # fmt: skip


def _options_of(est, *names):
    """{name: the estimator's parameter} for the given names."""
    return {name: getattr(est, name) for name in names}


def _stream_options(est):
    """The options of a stream that ``partial_fit`` starts from the prior (``RegressionResult.prior``)."""
    return _options_of(est, "prior_var", "fit_intercept", "intercept_var", "tol", "n_threads")


def _unfit(est):
    """Remove what a failed first ``fit`` or ``partial_fit`` set (scikit-learn's ``check_is_fitted``
    takes any attribute ending in "_" for a fit)."""
    for name in [k for k in vars(est) if k.endswith("_") and not k.startswith("_")]:
        delattr(est, name)


def _intercept(result):
    """(mean, variance) of a result's intercept; (0.0, 0.0) without one."""
    b = result.intercept
    return (b.mean, b.var) if b is not None else (0.0, 0.0)


class _BayesianBinaryClassifier(ClassifierMixin, BaseEstimator):
    """Shared implementation; subclasses fix ``_model``."""

    _model = None

    def __init__(
        self,
        method=DEFAULTS["method"],
        prior_var=DEFAULTS["prior_var"],
        fit_intercept=DEFAULTS["fit_intercept"],
        intercept_var=DEFAULTS["intercept_var"],
        damping=DEFAULTS["damping"],
        max_iter=DEFAULTS["max_iter"],
        tol=DEFAULTS["tol"],
        schedule=DEFAULTS["schedule"],
        n_nodes=DEFAULTS["n_nodes"],
        n_threads=DEFAULTS["n_threads"],
        forget=FORGET,
    ):
        self.method = method
        self.prior_var = prior_var
        self.fit_intercept = fit_intercept
        self.intercept_var = intercept_var
        self.damping = damping
        self.max_iter = max_iter
        self.tol = tol
        self.schedule = schedule
        self.n_nodes = n_nodes
        self.n_threads = n_threads
        self.forget = forget

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        tags.input_tags.sparse = True
        return tags

    def fit(self, X, y):
        """Fit the posterior over the weights.

        Parameters
        ----------
        X : array of shape (n, d)
        y : array of shape (n,) with exactly one or two distinct labels (any type)

        Returns
        -------
        self
        """
        X, y = validate_data(self, X, y, dtype=np.float64, ensure_min_samples=1, accept_sparse=SPARSE)
        check_classification_targets(y)
        y_type = type_of_target(y, input_name="y", raise_unknown=True)
        if y_type != "binary":
            raise ValueError(f"Only binary classification is supported. The type of the target is {y_type}.")
        self.classes_ = np.unique(y)
        target = (y == self.classes_[-1]) if self.classes_.size == 2 else np.zeros(len(y), bool)
        options = _options_of(self, *FIT_OPTIONS, "schedule", "n_nodes")
        self.result_ = fit(X, target, model=self._model, **options)
        return self

    def partial_fit(self, X, y, classes=None):
        """Absorb a batch of rows into the posterior (assumed density filtering with CEP,
        ``RegressionResult.update``, with this estimator's ``forget`` per row): memory does not
        grow with the calls. The first call starts from the prior and needs ``classes``, the two
        labels (scikit-learn's convention); X's width is fixed by it, and later batches of
        another width, or with labels outside ``classes_``, are refused.

        Returns
        -------
        self
        """
        first = not hasattr(self, "result_")
        if not first:
            return self._partial_fit(X, y, classes, first)
        try:
            return self._partial_fit(X, y, classes, first)
        except BaseException:
            _unfit(self)  # (a first call that fails leaves the estimator unfitted)
            raise

    def _partial_fit(self, X, y, classes, first):
        X, y = validate_data(self, X, y, dtype=None, ensure_min_samples=1, accept_sparse=SPARSE, reset=first)
        if first:
            if classes is None:
                raise ValueError(
                    "partial_fit: the first call needs classes=[negative, positive], the two labels of the "
                    "stream (scikit-learn's convention)."
                )
            known = np.unique(np.asarray(classes))
            if known.size != 2:
                raise ValueError(f"partial_fit: classes must hold two labels; got {known.tolist()}.")
        elif classes is not None and not np.array_equal(np.unique(np.asarray(classes)), self.classes_):
            have = self.classes_.tolist()
            raise ValueError(f"partial_fit: classes={list(classes)} differs from classes_={have}.")
        else:
            known = self.classes_
        outside = np.flatnonzero(~np.isin(y, known))
        if outside.size:
            raise ValueError(
                f"partial_fit: y holds labels outside the classes {known.tolist()}: "
                f"{np.asarray(y)[outside[:5]].tolist()} at rows {outside[:5].tolist()}."
            )
        if first:
            result = RegressionResult.prior(self._model, self.method, X.shape[1], _stream_options(self))
            result.absorb("partial_fit", X, y == known[-1], forget=self.forget)
            self.classes_, self.result_ = known, result
        else:
            self.result_.absorb("partial_fit", X, y == self.classes_[-1], forget=self.forget)
        return self

    # (the fitted attributes read the result, so that a partial_fit copies nothing of size d)
    coef_ = property(lambda self: self.result_.posterior.mean, doc="Posterior means of the weights.")
    coef_var_ = property(lambda self: self.result_.posterior.var, doc="Posterior variances of the weights.")
    intercept_ = property(lambda self: _intercept(self.result_)[0], doc="The intercept's posterior mean.")
    intercept_var_ = property(lambda self: _intercept(self.result_)[1], doc="The intercept's variance.")
    n_iter_ = property(
        lambda self: self.result_.n_iter + self.result_.options.get("update_sweeps", 0),
        doc="Sweeps run: the fit's and every partial_fit batch's.",
    )

    def predict_proba(self, X):
        """Class probabilities, shape (n, n_classes), columns ordered as ``classes_``."""
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, reset=False, accept_sparse=SPARSE)
        p1 = self.result_.predict_proba(X)
        if self.classes_.size == 1:
            return np.ones((X.shape[0], 1))
        return np.column_stack([1.0 - p1, p1])

    def decision_function(self, X):
        """Log-odds of the positive class ``classes_[1]``, shape (n,)."""
        proba = np.clip(self.predict_proba(X)[:, -1], 1e-300, 1 - 1e-16)
        return np.log(proba) - np.log1p(-proba)

    def predict(self, X):
        """Most probable class, shape (n,)."""
        proba = self.predict_proba(X)
        return self.classes_[np.argmax(proba, axis=1)]


class BayesianProbitClassifier(_BayesianBinaryClassifier):
    """Bayesian probit regression with fully factorised Gaussian posterior (CEP / EP).

    Parameters are those of ``fastcep.fit``, with its defaults (the option table): method
    ("cep1", "cep2", "ep", ...), prior_var, fit_intercept, intercept_var, damping, max_iter, tol,
    schedule, n_nodes, n_threads; and ``forget`` (0.0), the forgetting per row of ``partial_fit``
    (``RegressionResult.update``). X may be dense or scipy.sparse (methods "cep1", "cep2", "ep").
    Fitted attributes: ``classes_``, ``coef_`` (posterior means), ``coef_var_`` (posterior
    variances), ``intercept_`` and ``intercept_var_`` (the intercept's; 0.0 without one),
    ``n_iter_``, ``result_``.
    """

    _model = "probit"


class BayesianLogisticClassifier(_BayesianBinaryClassifier):
    """Bayesian logistic regression with fully factorised Gaussian posterior (CEP / EP).

    Parameters and fitted attributes as ``BayesianProbitClassifier``.
    """

    _model = "logistic"


class BayesianRegressor(RegressorMixin, BaseEstimator):
    """Bayesian generalised linear regression of continuous or count targets (CEP / EP), with a
    fully factorised Gaussian posterior over the weights.

    Parameters
    ----------
    likelihood : str or fastcep.likelihoods.Likelihood, default "gaussian"
        "gaussian", "poisson", "negbin", "student_t" or a likelihood object (its learned
        parameters, given as None, are learned by the fit).
    method : {"cep1", "cep2", "ep"}, default "cep1"
    prior_var, fit_intercept, intercept_var, damping, max_iter, tol, n_threads
        As ``fastcep.fit``, with its defaults (the option table).
    forget : float, default 0.0
        ``partial_fit``'s forgetting per row (``RegressionResult.update``).

    Fitted attributes: ``coef_``, ``coef_var_`` (posterior means and variances), ``intercept_``,
    ``intercept_var_`` (0.0 without one), ``likelihood_`` (the likelihood, learned parameters
    filled in), ``n_iter_``, ``result_``. ``predict(X, return_std=False)`` gives the posterior
    predictive mean of y (and its standard deviation), ``score`` the R^2 of that mean.
    """

    def __init__(
        self,
        likelihood="gaussian",
        method=DEFAULTS["method"],
        prior_var=DEFAULTS["prior_var"],
        fit_intercept=DEFAULTS["fit_intercept"],
        intercept_var=DEFAULTS["intercept_var"],
        damping=DEFAULTS["damping"],
        max_iter=DEFAULTS["max_iter"],
        tol=DEFAULTS["tol"],
        n_threads=DEFAULTS["n_threads"],
        forget=FORGET,
    ):
        self.likelihood = likelihood
        self.method = method
        self.prior_var = prior_var
        self.fit_intercept = fit_intercept
        self.intercept_var = intercept_var
        self.damping = damping
        self.max_iter = max_iter
        self.tol = tol
        self.n_threads = n_threads
        self.forget = forget

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    def fit(self, X, y):
        """Fit the posterior over the weights; X (n, d), y (n,) values the likelihood accepts.

        Returns
        -------
        self
        """
        self._likelihood("fit")
        X, y = validate_data(
            self, X, y, dtype=np.float64, y_numeric=True, ensure_min_samples=1, accept_sparse=SPARSE
        )
        self.result_ = self._fit(X, y)
        self.coef_ = self.result_.posterior.mean.copy()
        self.coef_var_ = self.result_.posterior.var.copy()
        b = self.result_.intercept
        self.intercept_ = b.mean if b is not None else 0.0
        self.intercept_var_ = b.var if b is not None else 0.0
        self.likelihood_ = self.result_.likelihood
        self.n_iter_ = self.result_.n_iter
        return self

    def _likelihood(self, func):
        """The estimator's likelihood, refused before any work if it is binary."""
        likelihood = resolve_likelihood(self.likelihood, func)
        if likelihood.binary:
            raise ValueError(
                f"BayesianRegressor.{func}: likelihood={likelihood.name!r} is binary; use "
                "BayesianProbitClassifier or BayesianLogisticClassifier."
            )
        return likelihood

    def _fit(self, X, y):
        """``fastcep.fit`` of checked X, y with this estimator's options."""
        return fit(X, y, model=self.likelihood, **_options_of(self, *FIT_OPTIONS))

    def partial_fit(self, X, y):
        """Absorb a batch of rows into the posterior (assumed density filtering with CEP,
        ``RegressionResult.update``, with this estimator's ``forget`` per row); the first call
        starts from the prior and fixes X's width. A likelihood's parameters to be learned
        (the default Gaussian's variance) are learned from the first batch, which is fitted as
        ``fit`` does, and kept for the later ones: an online update does not learn them.

        Returns
        -------
        self
        """
        first = not hasattr(self, "result_")
        if not first:
            return self._partial_fit(X, y, first)
        try:
            return self._partial_fit(X, y, first)
        except BaseException:
            _unfit(self)  # (a first call that fails leaves the estimator unfitted)
            raise

    def _partial_fit(self, X, y, first):
        likelihood = self._likelihood("partial_fit") if first else None
        kw = dict(dtype=np.float64, y_numeric=True, ensure_min_samples=1, accept_sparse=SPARSE, reset=first)
        X, y = validate_data(self, X, y, **kw)
        if first:
            if likelihood.learned:  # (the first batch learns them, as fit does; the later ones keep them)
                result = self._fit(X, y)
            else:
                result = RegressionResult.prior(likelihood, self.method, X.shape[1], _stream_options(self))
                result.absorb("partial_fit", X, y, forget=self.forget)
        else:
            result = self.result_
            result.absorb("partial_fit", X, y, forget=self.forget)
        self.result_ = result
        self.coef_ = result.posterior.mean
        self.coef_var_ = result.posterior.var
        self.intercept_, self.intercept_var_ = _intercept(result)
        self.likelihood_ = result.likelihood
        self.n_iter_ = result.n_iter + result.options.get("update_sweeps", 0)
        return self

    def predict(self, X, return_std=False):
        """Posterior predictive mean of y, shape (n,); with ``return_std`` its standard deviation too."""
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, reset=False, accept_sparse=SPARSE)
        mean, var = self.result_.predict(X, return_var=True)
        return (mean, np.sqrt(var)) if return_std else mean
