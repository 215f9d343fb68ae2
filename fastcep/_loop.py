"""The one iteration loop of every fit (DESIGN.md section 6).

``run(step, ...)`` calls ``step(iteration)`` until the stopping rule, the callback or
``max_iter`` ends it, and owns what every method shares: the per-iteration trace, the callback
(one ``IterationInfo`` type for every method), the verbose line, the finite check and the stop
reason. A step runs one iteration of its method (a sweep, a VMP round, an L-BFGS step) and
returns a ``StepReport``; everything the loop needs from the method besides is passed in as
callables, so regression, CP CEP, VMP, CP-WOPT, VB and each batch of a stream share this code.
"""

import math
import sys
import time
from typing import NamedTuple

import numpy as np

#: the trace's columns: every method fills ``elapsed``, ``change`` and ``skipped``; the others
#: hold NaN where a method has no such quantity
TRACE_FIELDS = (
    "elapsed",
    "change",
    "skipped",
    "damping",
    "eval_metric",
    "param_change",
    "site_change",
    "prediction_change",
    "elbo",
    "objective",
    "inner_iter",
)


class Trace(NamedTuple):
    """Per-iteration record of a fit; every array has length ``n_iter`` (NaN where a method has
    no such quantity)."""

    elapsed: np.ndarray  #: seconds since the start of the fit, at the end of each iteration
    change: np.ndarray  #: the stopping rule's measure (compared with ``tol``)
    skipped: np.ndarray  #: messages not applied (non-positive precision or not finite)
    damping: np.ndarray  #: damping used in each iteration
    eval_metric: np.ndarray  #: RMSE or AUC of the fit's ``eval_set`` (CP)
    param_change: (
        np.ndarray
    )  #: largest change of a posterior mean (in sds) or relative change of a variance (CP)
    site_change: np.ndarray  #: mean over rows of the summed squared change of the sites' nu (regression)
    prediction_change: np.ndarray  #: relative RMS change of the training entries' reconstructions (CP-WOPT)
    elbo: np.ndarray  #: evidence lower bound (VB, VMP)
    objective: np.ndarray  #: the least-squares objective (CP-WOPT)
    inner_iter: np.ndarray  #: inner iterations of each batch (stream)

    @classmethod
    def from_columns(cls, n, **columns):
        """A trace of ``n`` iterations from the given columns (lists or arrays of length n, or
        n - 1 for a snapshot taken before the iteration's last column was filled: padded with
        NaN); the others are NaN (``skipped``: 0)."""
        out = {}
        for name in TRACE_FIELDS:
            if name in columns and columns[name] is not None:
                out[name] = np.asarray(columns[name], dtype=np.int64 if name == "skipped" else np.float64)
                if out[name].shape == (n - 1,) and name != "skipped":
                    out[name] = np.append(out[name], np.nan)
            elif name == "skipped":
                out[name] = np.zeros(n, dtype=np.int64)
            else:
                out[name] = np.full(n, np.nan)
            if out[name].shape != (n,):
                raise ValueError(f"trace column {name!r} has shape {out[name].shape}, not ({n},)")
        return cls(**out)


class IterationInfo(NamedTuple):
    """What a callback receives after every iteration (every method); return True to stop.

    ``result`` is a snapshot of the fit so far (a ``RegressionResult`` or ``CPResult``, built only
    when a callback or an eval set asks for it); ``posterior`` is its posterior.
    """

    iteration: int
    change: float
    elapsed: float
    skipped: int
    result: object

    @property
    def posterior(self):
        """The posterior of the fit so far (``result.posterior``)."""
        return self.result.posterior


class StepReport(NamedTuple):
    """What one step reports to the loop."""

    change: float  #: the stopping rule's measure
    skipped: int = 0  #: messages not applied
    accept: bool = True  #: False: the step is no evidence of convergence (e.g. a guard undid part of it)
    values: dict | None = None  #: other trace columns for this iteration, by name


class Outcome(NamedTuple):
    """How a run ended."""

    n_iter: int
    converged: bool
    stop_reason: str  #: "tol", "max_iter" or "callback"
    trace: Trace


def run(
    step,
    *,
    max_iter,
    tol,
    callback=None,
    snapshot=None,
    evaluate=None,
    finite=None,
    verbose=False,
    label="fit",
    func="fit",
    hint="try a smaller 'damping'",
    start=None,
    stop_rule="tol",
    governor=None,
):
    """Run ``step(iteration)`` for iterations 1, 2, ... until it converges, the callback stops it
    or ``max_iter`` is reached.

    Parameters
    ----------
    step : callable
        ``step(iteration) -> StepReport``; runs one iteration in place.
    max_iter : int
    tol : float
        Converged when ``report.change < tol`` (and ``report.accept``).
    callback : callable or None
        ``callback(IterationInfo)`` after every iteration; returning True stops the run (stop
        reason "callback", unless that iteration converged).
    snapshot : callable or None
        ``snapshot(n_iter, trace)`` -> a result object for the callback and ``evaluate``.
    evaluate : callable or None
        ``evaluate(result)`` -> a float per iteration, into ``trace.eval_metric``.
    finite : callable or None
        ``finite()`` -> False when the posterior is no longer finite: FloatingPointError.
    verbose : bool
        One line per iteration on stderr.
    label : str
        Names the run in the verbose lines and errors ("probit/cep1", ...).
    func : str
        The public function named in errors.
    hint : str
        What the error at a non-finite posterior advises.
    start : float or None
        ``time.perf_counter()`` at the start of the fit (default: now), so that the trace's
        elapsed times include the set-up.
    stop_rule : str
        The stop reason recorded when ``change < tol`` ("tol"; "paper" for the paper's rule).
    governor : ThreadGovernor or None
        Sets the thread count of each iteration and learns from its time (``fastcep._threads``).

    Returns
    -------
    Outcome
    """
    start = time.perf_counter() if start is None else start
    cols = {"elapsed": [], "change": [], "skipped": []}
    converged = False
    stop_reason = "max_iter"
    it = 0
    for it in range(1, max_iter + 1):
        if governor is not None:
            governor.before(it)
        t0 = time.perf_counter()
        rep = step(it)
        if governor is not None:
            governor.after(it, time.perf_counter() - t0)
        now = time.perf_counter() - start
        cols["elapsed"].append(now)
        cols["change"].append(float(rep.change))
        cols["skipped"].append(int(rep.skipped))
        if rep.values:
            for name, value in rep.values.items():
                cols.setdefault(name, [math.nan] * (it - 1)).append(value)
        result = None
        if snapshot is not None and (callback is not None or evaluate is not None):
            result = snapshot(it, _trace(it, cols))  # (this iteration's eval_metric still NaN)
        if evaluate is not None:
            cols.setdefault("eval_metric", [math.nan] * (it - 1)).append(float(evaluate(result)))
        for values in cols.values():  # columns a step reports only sometimes
            if len(values) < it:
                values.append(math.nan)
        if verbose:
            extra = f", eval {cols['eval_metric'][-1]:.4f}" if evaluate is not None else ""
            line = f"[fastcep] {label} iter {it}: change {rep.change:.3e}, skipped {rep.skipped}{extra}"
            print(f"{line}, {now:.3f} s", file=sys.stderr)
        if finite is not None and not finite():
            raise FloatingPointError(
                f"{func}: the posterior became non-finite at iteration {it} ({label}); {hint}."
            )
        if rep.accept and rep.change < tol:
            converged, stop_reason = True, stop_rule
        if callback is not None:
            info = IterationInfo(it, float(rep.change), now, int(rep.skipped), result)
            if callback(info) and not converged:
                stop_reason = "callback"
                break
        if converged:
            break
    return Outcome(it, converged, stop_reason, _trace(it, cols))


def _trace(n, cols):
    return Trace.from_columns(n, **{k: v[:n] for k, v in cols.items()})
