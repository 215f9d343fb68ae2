"""The one iteration loop of every fit (DESIGN.md section 6).

``run(step, ...)`` calls ``step(iteration)`` until the stopping rule, the callback or
``max_iter`` ends it, and owns what every method shares: the per-iteration trace, the callback
(one ``IterationInfo`` type for every method), the verbose line, the finite check and the stop
reason. A step runs one iteration of its method (a sweep, a VMP round, an L-BFGS step) and
returns a ``StepReport``; everything the loop needs from the method besides is passed in as
callables, so regression, CP CEP, VMP, CP-WOPT, VB and each batch of a stream share this code.
"""

import math
import os
import sys
import time
import warnings
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


class ConvergenceWarning(UserWarning):
    """A fit stopped at ``max_iter`` before its stopping rule was met (as scikit-learn's)."""


_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def outside_the_package():
    """The ``stacklevel`` that points a warning at the first frame outside fastcep: the user's
    call, however deep the package's own calls are."""
    level, frame = 1, sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE):
        level, frame = level + 1, frame.f_back
    return level


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
    stop: str | None = None  #: the step's own stopping rule was met: its stop reason (converged)
    #: the run must end unconverged: (its stop reason, the warning's text), e.g. messages refused
    #: in every sweep while the others had settled (no fixed point)
    halt: tuple | None = None


class Outcome(NamedTuple):
    """How a run ended."""

    n_iter: int
    converged: bool
    stop_reason: str  #: "tol", "max_iter", "callback", or a step's own ("refused", ...)
    trace: Trace


#: True while a status line is open on stderr (written without its newline)
_status_open = [False]


def write_status(text):
    """Rewrite the status line on stderr in place (a carriage return, ``text``, no newline); it
    stays open until ``end_status``."""
    sys.stderr.write("\r" + text)
    sys.stderr.flush()
    _status_open[0] = True


def end_status():
    """End the open status line with a newline (nothing if none is open), so that what is printed
    next, an interrupt's or an error's message, starts a line of its own."""
    if _status_open[0]:
        _status_open[0] = False
        sys.stderr.write("\n")
        sys.stderr.flush()


class ProgressLine:
    """A status line on stderr, rewritten in place at most five times a second."""

    def __init__(self, label):
        self.label = label
        self.last = 0.0

    def update(self, text, force=False):
        now = time.perf_counter()
        if force or now - self.last >= 0.2:
            self.last = now
            write_status(f"[fastcep] {self.label}: {text}\033[K")

    def close(self, text):
        self.update(text, force=True)
        end_status()


class Recorder:
    """The bookkeeping of the one loop, for a loop that someone else drives (CP-WOPT's L-BFGS
    calls ``record`` from scipy's callback); ``run`` drives the others. Arguments as ``run``'s."""

    def __init__(
        self, *, tol, callback=None, snapshot=None, evaluate=None, finite=None, verbose=False, progress=False,
        label="fit", func="fit", hint="try a smaller 'damping'", start=None, stop_rule="tol", warn=True,
        first=0, describe=None, unit="iterations",
    ):  # fmt: skip
        self.tol, self.callback, self.snapshot, self.evaluate = tol, callback, snapshot, evaluate
        self.finite, self.verbose, self.label, self.func, self.hint = finite, verbose, label, func, hint
        self.describe, self.unit = describe, unit
        self.progress = ProgressLine(label) if progress else None
        self.stop_rule, self.warn, self.first = stop_rule, warn, first
        self.start = time.perf_counter() if start is None else start
        self.cols = {"elapsed": [], "change": [], "skipped": []}
        self.n_iter = 0
        self.converged = False
        self.stop_reason = "max_iter"

    def record(self, it, rep):
        """Record this run's iteration ``it``'s report: the trace, the eval metric, the verbose
        line, the finite check (FloatingPointError), the stopping rule and the callback. Returns
        True when the run must stop (converged, or the callback said so). The messages and the
        callback count the fit's iterations: ``first`` done before this run (a resumed fit's)."""
        cols = self.cols
        fit_it = self.first + it
        self.n_iter = it
        now = time.perf_counter() - self.start
        cols["elapsed"].append(now)
        cols["change"].append(float(rep.change))
        cols["skipped"].append(int(rep.skipped))
        if rep.values:
            for name, value in rep.values.items():
                cols.setdefault(name, [math.nan] * (it - 1)).append(value)
        result = None
        if self.snapshot is not None and (self.callback is not None or self.evaluate is not None):
            result = self.snapshot(it, self.trace())  # (this iteration's eval_metric still NaN)
        if self.evaluate is not None:
            cols.setdefault("eval_metric", [math.nan] * (it - 1)).append(float(self.evaluate(result)))
        for values in cols.values():  # columns a step reports only sometimes
            if len(values) < it:
                values.append(math.nan)
        if self.verbose:
            if self.describe is not None:
                line = f"[fastcep] {self.label} {self.describe(fit_it, rep, now)}"
            else:
                extra = f", eval {cols['eval_metric'][-1]:.4f}" if self.evaluate is not None else ""
                line = f"[fastcep] {self.label} iter {fit_it}: change {rep.change:.3e}, skipped {rep.skipped}"
                line += extra
            print(f"{line}, {now:.3f} s", file=sys.stderr)
        if self.progress is not None:
            if self.describe is not None:
                self.progress.update(self.describe(fit_it, rep, now))
            else:
                self.progress.update(
                    f"iteration {fit_it}, change {rep.change:.2e} (tol {self.tol:.1e}), {now:.1f} s"
                )
        if self.finite is not None and not self.finite():
            raise FloatingPointError(
                f"{self.func}: the fit became non-finite at iteration {fit_it} ({self.label}); {self.hint}."
            )
        if rep.halt is not None:
            self.stop_reason, why = rep.halt
            where = outside_the_package()
            warnings.warn(f"{self.func}: {self.label} {why}", ConvergenceWarning, stacklevel=where)
            return True
        if rep.accept and rep.change < self.tol:
            self.converged, self.stop_reason = True, self.stop_rule
        elif rep.stop is not None:
            self.converged, self.stop_reason = True, rep.stop
        if self.callback is not None:
            info = IterationInfo(fit_it, float(rep.change), now, int(rep.skipped), result)
            if self.callback(info) and not self.converged:
                self.stop_reason = "callback"
                return True
        return self.converged

    def trace(self):
        """The trace of the iterations recorded so far."""
        n = self.n_iter
        return Trace.from_columns(n, **{k: v[:n] for k, v in self.cols.items()})

    def outcome(self, stop_reason=None):
        """How the run ended (``stop_reason`` overrides the recorded one: the driver's own)."""
        reason = self.stop_reason if stop_reason is None else stop_reason
        if self.progress is not None:
            self.progress.close(f"{self.first + self.n_iter} {self.unit}, {reason}")
        # (tol=0 asks for max_iter iterations: nothing to warn of)
        if reason == "max_iter" and self.warn and self.tol > 0 and self.n_iter > 0:
            last, n = self.cols["change"][-1], self.first + self.n_iter
            warnings.warn(
                f"{self.func}: {self.label} stopped at max_iter={n} before converging (last "
                f"change {last:.2e}, tol {self.tol:.1e}); raise max_iter, or see res.trace.change",
                ConvergenceWarning,
                stacklevel=outside_the_package(),
            )
        return Outcome(self.n_iter, self.converged, reason, self.trace())


def run(step, *, max_iter, governor=None, first=0, **options):
    """Run ``step(iteration)`` for iterations first + 1, first + 2, ... until it converges, the
    callback stops it or ``max_iter`` is reached.

    Parameters
    ----------
    step : callable
        ``step(iteration) -> StepReport``; runs one iteration in place.
    max_iter : int
        The fit's last iteration.
    first : int
        Iterations done before this run (a fit resumed from a checkpoint: ``step``, the callback
        and the messages count on from there; the trace and ``Outcome.n_iter`` are this run's).
    governor : ThreadGovernor or None
        Sets the thread count of each iteration and learns from its time (``fastcep._threads``).
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
        ``finite()`` -> False when the fit is no longer finite: FloatingPointError.
    verbose : bool
        One line per iteration on stderr.
    progress : bool
        A status line on stderr, rewritten at most five times a second.
    label : str
        Names the run in the verbose lines and errors ("probit/cep1", ...).
    func : str
        The public function named in errors.
    hint : str
        What the error at a non-finite fit advises.
    start : float or None
        ``time.perf_counter()`` at the start of the fit (default: now), so that the trace's
        elapsed times include the set-up.
    warn : bool
        Warn (``ConvergenceWarning``) when ``max_iter`` ends the run with ``tol > 0`` (default
        True; a stream's batches run a budget of inner iterations and do not).
    stop_rule : str
        The stop reason recorded when ``change < tol`` ("tol"; "paper" for the paper's rule).
    describe : callable or None
        ``describe(iteration, report, elapsed)`` -> the text of the verbose and progress lines
        after the label (default: the iteration, its change and its skipped messages; a stream's
        batches say entries and their rate).
    unit : str
        What the progress line's last words count ("iterations"; a stream's "batches").

    Returns
    -------
    Outcome
    """
    rec = Recorder(first=first, **options)
    for it in range(1, max_iter - first + 1):
        if governor is not None:
            governor.before(it)
        t0 = time.perf_counter()
        rep = step(first + it)
        if governor is not None:
            governor.after(it, time.perf_counter() - t0)
        if rec.record(it, rep):
            break
    return rec.outcome()
