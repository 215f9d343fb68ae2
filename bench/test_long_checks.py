"""Long correctness checks, out of the default test run (each takes minutes on two cores):
``python -m pytest bench/test_long_checks.py``. They moved here from ``tests/`` to keep the
README's test command under ten minutes on a fresh machine (CI took 889 s with them).

- the fits whose fresh compile and cached code once disagreed give the same bits from both: a
  full compile of the CP and regression kernels into an empty cache, then a process that loads
  them (the default run keeps the same check on one parallel kernel,
  ``tests/test_style.py::test_a_parallel_kernel_loaded_from_the_cache_gives_the_bits_of_a_fresh_compile``);
- the elliptical slice steps of the count gold (``bench.cp_count_gold``) leave the conditional
  posterior invariant: 40,000 steps in Python.
"""

import json

import numpy as np
from cache_runs import compiled_then_cached

Z = 5.0


_FITS_RUN = """
import hashlib, json, warnings
import numpy as np
import fastcep
from fastcep.data_tools import make_cp_tensor
warnings.simplefilter("ignore")
T, _ = make_cp_tensor((14, 12, 10), rank=2, n_obs=900, noise_sd=0.1, seed=8)
rng = np.random.default_rng(9)
y = T.values / np.std(T.values) + 0.3 * rng.standard_t(3, size=T.values.size)
cp = fastcep.fit(T.coords, y, model="cp_student_t", shape=T.shape, rank=2, seed=0, max_iter=15,
                 covariance="diag", schedule="block")
X = rng.standard_normal((400, 4))
counts = rng.negative_binomial(3, 3 / (3 + np.exp(X @ [0.4, -0.3, 0.2, 0.1])))
post = [*cp.posterior.means, *cp.posterior.covs]
g = fastcep.fit(T.coords, T.values, model="cp_gaussian", shape=T.shape, rank=2, seed=0, max_iter=15)
post += [*g.posterior.means, *g.posterior.covs]
nb = fastcep.fit(X, counts.astype(float), model="negbin", max_iter=12)
post += [nb.posterior.mean, nb.posterior.var]
for d in (4, 24):  # probit on few features (slabs of rows) and on many (the row functions)
    Xp = rng.standard_normal((400, d))
    yp = (Xp @ np.linspace(-0.5, 0.5, d) + 0.3 * rng.standard_normal(400) > 0).astype(float)
    for method in ("cep1", "cep2", "ep"):
        res = fastcep.fit(Xp, yp, model="probit", method=method, max_iter=12)
        post += [res.posterior.mean, res.posterior.var]
print(json.dumps([hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest() for a in post]))
"""


def test_fits_from_the_cache_give_the_bits_of_the_run_that_compiled_them(tmp_path):
    """The fits in which a fresh compile and the cache disagreed most (by up to 3e-9 in a
    posterior mean, before ``reassoc`` left the kernels' fastmath): a Student-t CP fit on the
    diagonal block schedule and a negative binomial regression. And the fits whose kernels keep
    ``reassoc`` in their sums (FASTMATH_SUMS): cp_gaussian, and probit CEP-1, CEP-2 and EP on few
    and on many features."""
    fresh, cached = compiled_then_cached(_FITS_RUN, tmp_path)
    assert json.loads(fresh) == json.loads(cached)


def test_slice_steps_leave_the_conditional_posterior_invariant():
    """A chain of elliptical slice steps for one mode (the other modes' products H fixed), rank 2,
    a correlated prior away from 0: each object's mean and variances against a 2-D grid quadrature
    of N(u | mu, Lam^-1) prod_e NB(y_e | exp(u . H_e)), to Z batch-means standard errors."""
    from bench.cp_count_gold import negbin_loglik, slice_step

    rng = np.random.default_rng(7)
    r, mu = 0.6, np.array([0.4, -0.2])
    Lam = np.array([[2.0, 0.8], [0.8, 1.5]])
    obj = np.array([0, 0, 0, 1, 1, 1, 1, 1, 2])  # object 2: a single zero count (a flat side)
    H = rng.normal(0.0, 1.0, (len(obj), 2))
    y = np.array([3.0, 0.0, 12.0, 1.0, 0.0, 0.0, 5.0, 40.0, 0.0])
    lik = negbin_loglik(y, r)
    n_steps, n_batches = 40_000, 40
    U = np.tile(mu, (3, 1))
    draws = np.empty((n_steps, 3, 2))
    for i in range(n_steps):
        U = slice_step(rng, U, mu, Lam, obj, H, lik)
        draws[i] = U
    batches = draws.reshape(n_batches, -1, 3, 2)
    g = np.linspace(-6.0, 6.0, 481)
    G = np.stack(np.meshgrid(g, g, indexing="ij"), -1).reshape(-1, 2)
    d = G - mu
    log_prior = -0.5 * np.einsum("gi,ij,gj->g", d, Lam, d)
    for j in range(3):
        rows = np.nonzero(obj == j)[0]
        logp = log_prior + sum(negbin_loglik(y[rows[i : i + 1]], r)(G @ H[e]) for i, e in enumerate(rows))
        w = np.exp(logp - logp.max())
        w /= w.sum()
        mean = w @ G
        var = w @ (G - mean) ** 2
        for stat, want in ((batches[:, :, j].mean(1), mean), (((batches[:, :, j] - mean) ** 2).mean(1), var)):
            se = stat.std(0, ddof=1) / np.sqrt(n_batches)
            assert np.all(np.abs(stat.mean(0) - want) < Z * se), (j, stat.mean(0), want, se)
