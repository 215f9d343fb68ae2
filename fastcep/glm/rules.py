"""What every regression fit shares below its engine (``glm.engine``), the online absorption of
rows (``glm.online``) and a result's own update (``glm.result``): the flat messages' precision,
the damping rule, and the check of the features' scale. (In a module of their own, so that a
result, which runs the online update, does not import the engine that makes it.)"""

import numpy as np

from .. import _validation as V

#: initial (flat) site precision, DESIGN.md section 3
FLAT_PRECISION = 1e-6
#: damping="auto" starts undamped (most fits converge in a few sweeps). If the means oscillate
#: (for AUTO_OSCILLATION sweeps in a row each sweep's step of the posterior means points against
#: the previous one, cosine below -0.5, and is more than half as long: an iteration with an
#: eigenvalue near -1, which damping 1 / (1 - lambda) ~ 0.5 makes fast) it goes on at 0.5. If the
#: change has not reached a new minimum for AUTO_UNDAMPED_WINDOW sweeps in either phase (the
#: parallel updates diverge, as on the one-hot encoded UCI sets), the fit starts again from its
#: initial messages: first, from the undamped phase, at AUTO_DAMPING_HALF, a second fast phase
#: under the same rule (the logistic on features of a wide scale, age in years: it settles there in
#: tens of sweeps, at 0.1 in hundreds), then at AUTO_DAMPING_START, from when on the damping is
#: halved, down to AUTO_DAMPING_FLOOR, whenever the change has not reached a new minimum for
#: AUTO_WINDOW sweeps
AUTO_OSCILLATION = 3
AUTO_UNDAMPED_WINDOW = 3
AUTO_DAMPING_HALF = 0.5
AUTO_DAMPING_START = 0.1
AUTO_DAMPING_FLOOR = 0.005
#: the slow phase's change per unit of damping beyond which a sweep is running off, and the
#: sweeps in a row that end the fit (``Damping.runaway``); settling fits change by O(1) and less
RUNAWAY_CHANGE = 1e8
RUNAWAY_SWEEPS = 2
AUTO_WINDOW = 50
#: the largest |x| a fit accepts: x^2 times a prior variance must stay far from float64's
#: largest number (1.8e308); the predictions accept any finite row
MAX_ABS_X = 1e150


class Damping:
    """The damping of a fit: fixed, or "auto" (the rule above AUTO_OSCILLATION). Fixed points do
    not depend on the damping, only the path to them does. ``undamped``: still in the first,
    fast phase (damping 1 or 0.5), before any restart. ``noisy`` (the sampling methods "is" and
    "kjit"): "auto" starts at AUTO_DAMPING_START, because damping averages the Monte Carlo noise of
    successive sweeps' messages (measured, logistic IS on a 2,000 x 4 simulation, largest distance
    of a posterior mean from EP's: 0.54 sd undamped, 0.024 at 0.5, 0.003 at 0.1)."""

    def __init__(self, damping, noisy=False):
        if damping == "auto" and noisy:
            self.rho, self.adaptive, self.undamped = AUTO_DAMPING_START, True, False
        elif damping == "auto":
            self.rho, self.adaptive, self.undamped = 1.0, True, True
        else:
            self.rho, self.adaptive, self.undamped = damping, False, False
        self.best = np.inf
        self.since = 0
        self.step = None  # the last sweep's step of the posterior means
        self.flips = 0  # sweeps in a row whose step turned against the previous one
        self.halved = False  # the fast phase at AUTO_DAMPING_HALF was tried
        self.running_off = 0  # slow-phase sweeps in a row whose change exceeded RUNAWAY_CHANGE
        self.hint = ""  # what the errors add about the data (``outlying_counts``)
        #: a restart goes back to the flat messages (the fit, or the fit it resumes, started
        #: from them), else to the fit's ``init_state``
        self.flat_start = True

    #: what ``state`` and ``resume`` carry: the damping, its phase and the rules' counters
    FIELDS = (
        "rho", "adaptive", "undamped", "best", "since", "step", "flips", "halved", "running_off",
        "flat_start",
    )  # fmt: skip

    def state(self):
        """The damping's position (``RegressionState.damping``): a resumed fit goes on from it as
        the uninterrupted one would, rather than from the undamped start (and a restart of its
        undamped phase goes back to where the uninterrupted fit's would: ``flat_start``)."""
        return {
            k: (v.copy() if isinstance(v, np.ndarray) else v) for k in self.FIELDS for v in [getattr(self, k)]
        }

    def resume(self, held):
        """Go on from ``held`` (``state()`` of an adaptive fit: "auto"), when this fit's damping is
        "auto" too; a fixed damping, the user's choice, stays. Returns whether it was taken."""
        if not (self.adaptive and isinstance(held, dict) and held.get("adaptive") is True):
            return False
        if set(held) != set(self.FIELDS):
            return False
        for k in self.FIELDS:
            v = held[k]
            setattr(self, k, None if v is None else np.array(v, dtype=np.float64) if k == "step" else v)
        return True

    def diverged(self, it):
        """A sweep refused every message (the tilted moments of every site were not finite, the
        posterior means ran off, or every new message had a negative precision): True, start
        again damped (``update``'s restart), in the undamped phase of "auto"; else
        FloatingPointError."""
        if self.undamped:
            self._restart()
            return True
        raise FloatingPointError(
            f"fit: every message of sweep {it} was refused (their tilted moments are not finite, or give "
            "negative precisions): the fit "
            f"diverged at damping {self.rho}; try a smaller damping, method='ep', or check the scale of X"
            f"{self.hint}"
        )

    def runaway(self, it, change, skipped, n_sites, shape):
        """FloatingPointError when the slow phase's change (per unit of damping) has exceeded
        RUNAWAY_CHANGE for RUNAWAY_SWEEPS sweeps in a row: the fit is running off, and each such
        sweep is slower than the last (the tilted moments of runaway cavities). Seen: Poisson on
        200 x 150 features, changes of 1.7e11 and 1.4e17 at damping 0.1, then sweeps of 19 and
        62 s, means of 6.6e11 (issue 38, item 11)."""
        if self.undamped or not self.adaptive:
            return
        self.running_off = self.running_off + 1 if change / self.rho > RUNAWAY_CHANGE else 0
        if self.running_off < RUNAWAY_SWEEPS:
            return
        n, d = shape
        wide = f" (with {d} features for {n} rows EP settled where CEP ran off)" if 4 * d > n else ""
        raise FloatingPointError(
            f"fit: the fit diverged at damping {self.rho}: the change grew to {change / self.rho:.3g} by "
            f"sweep {it} ({skipped} of {n_sites} messages refused); try method='ep'{wide}, or check the "
            f"scale of X{self.hint}"
        )

    def _restart(self):
        """The fast phase failed: the next damping, from the initial messages. An undamped start
        goes on to a second fast phase at AUTO_DAMPING_HALF (not after the oscillation rule
        chose 0.5 already); that one to AUTO_DAMPING_START and the slow phase."""
        if self.rho == 1.0 and not self.halved:
            self.rho, self.halved = AUTO_DAMPING_HALF, True
        else:
            self.rho, self.undamped = AUTO_DAMPING_START, False
        self.best, self.since, self.step, self.flips, self.running_off = np.inf, 0, None, 0, 0

    def update(self, change, step):
        """Record a sweep's change and its step of the posterior means; returns True when the fit
        must start again from its initial messages (the undamped start diverged), with the
        damping now in ``rho``."""
        if not self.adaptive:
            return False
        last, self.step = self.step, step.copy()
        if last is not None:
            norm = float(np.sqrt((step @ step) * (last @ last)))
            turned = norm > 0.0 and float(step @ last) < -0.5 * norm
            slow = float(step @ step) > 0.25 * float(last @ last)
            self.flips = self.flips + 1 if turned and slow else 0
        if change < self.best:  # (a NaN change is never a new minimum)
            self.best, self.since = change, 0
        else:
            self.since += 1
        if self.undamped and self.since >= AUTO_UNDAMPED_WINDOW:
            self._restart()
            return True
        if self.undamped and self.rho == 1.0 and self.flips >= AUTO_OSCILLATION:
            self.rho, self.flips, self.halved = AUTO_DAMPING_HALF, 0, True
        elif not self.undamped and self.since >= AUTO_WINDOW and self.rho > AUTO_DAMPING_FLOOR:
            self.rho = max(0.5 * self.rho, AUTO_DAMPING_FLOOR)
            self.best, self.since = np.inf, 0
        return False


def check_feature_scale(X, func):
    """Refuse features whose squares overflow float64 (|x| > MAX_ABS_X): every message of such
    a row is non-finite and skipped, and the fit would return the prior as converged."""
    values = X.data if V.is_sparse(X) else X
    big = max(float(values.max(initial=0.0)), -float(values.min(initial=0.0)))  # (no |X| copy of a large X)
    if big > MAX_ABS_X:
        col = (
            int(X.indices[np.argmax(np.abs(X.data))])
            if V.is_sparse(X)
            else int(np.argmax(np.max(np.abs(X), axis=0)))
        )
        raise ValueError(
            f"{func}: X holds values up to {big:.3g} (column {col}); their squares overflow float64 "
            f"beyond {MAX_ABS_X:.0e}: rescale X (e.g. standardise its columns)."
        )


#: a count more than this many times the median of the nonzero counts is named when a fit runs off
OUTLYING_COUNT = 1e6


def outlying_counts(y, counts):
    """What a diverged fit's error adds about count data (``Damping.hint``): the rows whose counts
    exceed OUTLYING_COUNT times the median nonzero count (at most 3 named), which CEP's
    factorised sweeps cannot follow (a count of 1e12 among counts near 2: issue 38, case 7);
    "" for other data."""
    if not counts or y.size == 0:
        return ""
    nonzero = y[y > 0]
    if nonzero.size == 0:
        return ""
    median = float(np.median(nonzero))
    rows = np.flatnonzero(y > OUTLYING_COUNT * median)
    if rows.size == 0:
        return ""
    named = ", ".join(f"row {i} ({y[i]:.3g})" for i in rows[:3])
    more = f" and {rows.size - 3} more" if rows.size > 3 else ""
    ratio = f"{OUTLYING_COUNT:.0e}"
    return f"; the counts at {named}{more} are over {ratio} times the median nonzero count ({median:g})"
