"""Default fits on the paper's 10,000 x 4 simulations and scikit-learn's LogisticRegression, timed
in whichever fastcep is installed (to compare two versions in one sitting, run it alternately in
their environments: ``python bench/regression_e2e.py [ROUNDS]`` from outside the repository).

Prints one JSON object: ``{"probit-cep1": [median s, IQR s, sweeps], ..., "sklearn": [...]}``.
The pytest-benchmark suite of the same fits is ``bench/test_speed_regression.py``.
"""

import json
import sys
import time

import numpy as np
from sklearn.linear_model import LogisticRegression

import fastcep
from fastcep.data_tools import make_regression_simulation


def _time(fn, rounds):
    ts = []
    out = None
    for _ in range(rounds):
        t0 = time.perf_counter()
        out = fn()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts)), float(np.percentile(ts, 75) - np.percentile(ts, 25)), out


def main(rounds=7):
    out = {}
    for model in ("probit", "logistic"):
        X, y, _ = make_regression_simulation(model, "gaussian", n=10_000, d=4, seed=0)
        for method in ("cep1", "cep2", "ep"):
            fastcep.fit(X, y, model=model, method=method)  # compile or load the kernels
            med, iqr, res = _time(
                lambda X=X, y=y, m=model, k=method: fastcep.fit(X, y, model=m, method=k), rounds
            )
            out[f"{model}-{method}"] = [med, iqr, int(res.n_iter)]
        if model == "logistic":
            med, iqr, _ = _time(lambda X=X, y=y: LogisticRegression().fit(X, y), rounds)
            out["sklearn"] = [med, iqr, 0]
    print(json.dumps(out))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 7)
