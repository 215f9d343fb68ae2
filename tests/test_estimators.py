"""The scikit-learn estimators pass scikit-learn's own estimator checks."""

import numpy as np
import pytest

pytest.importorskip("sklearn")
from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402

import fastcep  # noqa: E402
from fastcep.data_tools import make_regression_simulation  # noqa: E402


@parametrize_with_checks(
    [
        fastcep.BayesianProbitClassifier(max_iter=200),
        fastcep.BayesianLogisticClassifier(method="cep2", max_iter=200),
        fastcep.BayesianProbitClassifier(method="ep", max_iter=200),
        fastcep.BayesianRegressor(max_iter=200),
    ]
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


def test_estimator_equals_fit():
    X, y, _ = make_regression_simulation("logistic", n=500, seed=2)
    est = fastcep.BayesianLogisticClassifier().fit(X, np.where(y == 1, "yes", "no"))
    res = fastcep.fit(X, y, model="logistic")
    np.testing.assert_array_equal(est.coef_, res.posterior.mean)
    np.testing.assert_allclose(est.predict_proba(X)[:, 1], res.predict_proba(X))
    assert set(est.predict(X)) <= {"yes", "no"}


def test_regressor_equals_fit(rng):
    X = rng.standard_normal((300, 3))
    y = X @ np.array([0.5, -1.0, 2.0]) + 1.0 + 0.3 * rng.standard_normal(300)
    est = fastcep.BayesianRegressor().fit(X, y)
    res = fastcep.fit(X, y, model="gaussian")
    np.testing.assert_array_equal(est.coef_, res.posterior.mean)
    mean, sd = est.predict(X, return_std=True)
    np.testing.assert_array_equal(mean, res.predict(X))
    np.testing.assert_allclose(sd**2, res.predict(X, return_var=True)[1])
    assert est.likelihood_ == res.likelihood
    assert est.score(X, y) > 0.95
