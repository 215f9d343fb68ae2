"""A probe of why count tensors' CP fits do not settle (issue 37, build point 2): the scaling
gauge under the learned prior, and the sequential schedule's random orders.

    python -m bench.cp_count_gauge synthetic      # (12,10,8), (10,10,10), (20,10,5): ~1 minute
    python -m bench.cp_count_gauge alog           # Alog fold 1, rank 3, 300 iterations: ~4 minutes
    python -m bench.cp_count_gauge log1p          # the default fit's predictions of log(1 + y): ~2 minutes

CP is invariant to scaling rank column r of mode k by d_kr with prod_k d_kr = 1. Under the
learned (Normal-Wishart) prior the embeddings' entropy and expected log prior cancel along that
gauge but for the hyperprior's weak terms, and the gauge drifts: the mode with fewer objects grows,
the one with more shrinks. Two probes, neither a fastcep option (the engine is patched here):
``balance``, after each iteration every mode's column rescaled to the geometric mean of the
modes' mean E[u^2] (messages, prior messages and posterior alike: the same predictions); and
``fixed order``, the sequential schedule's entry order drawn once rather than every iteration.
Printed: iterations, stop reason, the stopping measure along the way, and each mode's column norms
of the posterior means at the end. ``log1p``: whether a stopping measure on the data's scale would
settle where the one on f does not: along the default fit (Alog fold 1, rank 3), every 10
iterations, the per-iteration relative RMS change of the training entries' predictive means of
log(1 + y) (``predict(scale="log1p")``) beside that of f, and the test log-likelihood and RMSE.
"""

import sys
import time
import warnings

import numpy as np

import fastcep
from fastcep.data_tools import make_cp_tensor
from fastcep.kernels import tensor as K
from fastcep.tensor import engine as E

PROBE = {"balance": False, "fixed": False}


def _rebalance(engine):
    """Each mode's columns scaled to the modes' geometric mean of mean E[u_r^2] (full covariances)."""
    st, pb, off = engine.store, engine.problem, engine.lay.offsets
    e2 = np.diagonal(st.E2, axis1=1, axis2=2)
    s = np.stack([e2[off[k] : off[k + 1]].mean(axis=0) for k in range(engine.Kmodes)])
    d = np.sqrt(np.exp(np.log(s).mean(axis=0)) / s)
    for k in range(engine.Kmodes):
        lo, hi, dk = off[k], off[k + 1], d[k]
        dd = np.outer(dk, dk)
        st.M[lo:hi] *= dk
        st.S[lo:hi] *= dd
        st.E2[lo:hi] *= dd
        st.P_Lam[lo:hi] /= dd
        st.P_eta[lo:hi] /= dk
        pb.prior_Lam[lo:hi] /= dd
        pb.prior_eta[lo:hi] /= dk
        st.Lam[:, k] /= dd
        st.eta[:, k] /= dk


_step = E.CPEngine.step


def _probed_step(self, it):
    report = _step(self, it)
    if PROBE["balance"]:
        _rebalance(self)
    return report


def _probed_sequential(self, it):
    if not PROBE["fixed"] or not hasattr(self, "_order"):
        self._order = self.rng.permutation(self.n).astype(np.int64)
    fix_tau = self.warm and self.done + it <= self.noise_warmup
    return int(
        K.sequential_full(self.problem, self.store, self.scratch, self._order, fix_tau, self.rho, self.lik)
    )


def _fit(coords, values, shape, rank, max_iter, **kw):
    E.CPEngine.step = _probed_step
    E.SWEEPS["sequential"] = _probed_sequential
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t = time.perf_counter()
            res = fastcep.fit(
                coords, values, model="cp_poisson", shape=shape, rank=rank, seed=0, max_iter=max_iter, **kw
            )
            return res, time.perf_counter() - t
    finally:
        E.CPEngine.step = _step
        E.SWEEPS["sequential"] = E.CPEngine._sequential


def _report(label, res, seconds):
    ch = res.trace.change
    at = [i for i in (10, 50, 100, 200, 300, 400) if i < res.n_iter] + [res.n_iter - 1]
    norms = " | ".join(
        " ".join(f"{np.linalg.norm(M[:, r]):.2f}" for r in range(M.shape[1])) for M in res.posterior.means
    )
    print(f"{label}: {res.n_iter} iterations, {res.stop_reason}, {seconds:.0f} s")
    print("   change " + " ".join(f"[{i + 1}] {ch[i]:.1e}" for i in at))
    print(f"   column norms by mode: {norms}")


def synthetic():
    for shape in ((12, 10, 8), (10, 10, 10), (20, 10, 5)):
        T, _ = make_cp_tensor(shape, rank=2, n_obs=500, noise_sd=0.1, seed=0)
        y = np.random.default_rng(0).poisson(np.exp(T.values)).astype(float)
        for balance, fixed, extra in (
            (False, False, {}),
            (False, False, {"prior": "fixed"}),
            (True, True, {}),
        ):
            PROBE.update(balance=balance, fixed=fixed)
            res, sec = _fit(T.coords, y, shape, 2, 500, **extra)
            _report(f"{shape} balance={balance} fixed order={fixed} {extra}", res, sec)


def alog():
    import os
    import pathlib

    from fastcep.data_tools.tensors import load_alog_counts

    shared = pathlib.Path(
        os.environ.get("FASTCEP_SHARED_DATA", pathlib.Path(__file__).resolve().parents[2] / "shared" / "data")
    )
    if not (shared / "alog").is_dir():
        print(f"skipped: no data in {shared}")
        return
    train, test = load_alog_counts(1, shared)
    for balance, fixed in ((False, False), (True, True)):
        PROBE.update(balance=balance, fixed=fixed)
        res, sec = _fit(train.coords, train.values, train.shape, 3, 300)
        _report(f"Alog fold 1 rank 3 balance={balance} fixed order={fixed}", res, sec)
        lpd = float(np.mean(res.log_likelihood(test.coords, test.values)))
        print(f"   test lpd {lpd:.1f}, RMSE of log1p {res.rmse(test.coords, test.values, scale='log1p'):.3f}")


def log1p():
    shared = _shared()
    if shared is None:
        return
    from fastcep.data_tools.tensors import load_alog_counts

    train, test = load_alog_counts(1, shared)
    PROBE.update(balance=False, fixed=False)  # (the default fit)
    snaps = {}

    def keep(info):
        if info.iteration % 10 == 0 or info.iteration == 1:
            r = info.result
            lpd = float(np.mean(r.log_likelihood(test.coords, test.values)))
            err = r.rmse(test.coords, test.values, scale="log1p")
            snaps[info.iteration] = (
                r.predict(train.coords, scale="log1p"),
                r._f_moments(train.coords)[0],
                lpd,
                err,
            )
        return False

    res, sec = _fit(train.coords, train.values, train.shape, 3, 300, callback=keep)
    print(f"Alog fold 1 rank 3, defaults: {res.n_iter} iterations, {res.stop_reason}, {sec:.0f} s")
    its = sorted(snaps)
    for a, b in zip(its[:-1], its[1:], strict=True):
        (pa, fa, _, _), (pb, fb, lpd, err) = snaps[a], snaps[b]
        on_log = np.sqrt(np.mean((pb - pa) ** 2) / np.mean(pb**2)) / (b - a)
        on_f = np.sqrt(np.mean((fb - fa) ** 2) / np.mean(fb**2)) / (b - a)
        print(f"  [{b}] change per iteration: log(1 + y) {on_log:.1e}, f {on_f:.1e}; ", end="")
        print(f"test lpd {lpd:.1f}, RMSE {err:.3f}")


def _shared():
    import os
    import pathlib

    shared = pathlib.Path(
        os.environ.get("FASTCEP_SHARED_DATA", pathlib.Path(__file__).resolve().parents[2] / "shared" / "data")
    )
    if not (shared / "alog").is_dir():
        print(f"skipped: no data in {shared}")
        return None
    return shared


if __name__ == "__main__":
    {"synthetic": synthetic, "alog": alog, "log1p": log1p}[
        sys.argv[1] if len(sys.argv) > 1 else "synthetic"
    ]()
