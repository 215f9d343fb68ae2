"""Plots of fits and predictions (needs matplotlib: ``pip install 'fastcep[plot]'``).

``convergence(result)`` draws a fit's trace (the change of every iteration, and the eval metric
where there is one) against the iteration and against the elapsed time; ``calibration(y, p)``
the reliability curve of predicted probabilities with a histogram of them; ``roc(y, p)`` the ROC
curve; ``predicted_vs_observed(y, yhat)`` a scatter of predictions against the truth. Each
returns the matplotlib ``Figure`` it drew on: a new pyplot figure when ``ax`` is None (shown by
``plt.show()`` or in a notebook), else the figure of the given axes. ``agg_figure`` makes a figure
on the non-interactive Agg canvas, outside pyplot, for writing files without a display (the
command line's ``--plot``). matplotlib is imported on first use.
"""

import numpy as np

from . import metrics

#: install hint of the error raised when matplotlib is missing
INSTALL_HINT = "pip install 'fastcep[plot]'"
#: at most this many points in a scatter (every k-th point beyond it, so the plot stays light)
MAX_SCATTER = 50_000


def _matplotlib(module="pyplot"):
    """Import ``matplotlib.<module>``, or raise ImportError naming the extra to install."""
    try:
        import importlib

        return importlib.import_module(f"matplotlib.{module}")
    except ImportError as exc:
        raise ImportError(f"fastcep.plot needs matplotlib: {INSTALL_HINT}") from exc


def agg_figure(figsize=(10.0, 4.0)):
    """A ``Figure`` on the non-interactive Agg canvas, not registered with pyplot: for writing
    image files without a display (``fig.savefig(path)``); freed when it goes out of scope."""
    backend = _matplotlib("backends.backend_agg")
    fig = _matplotlib("figure").Figure(figsize=figsize, layout="constrained")
    backend.FigureCanvasAgg(fig)
    return fig


def _axes(ax, n, figsize, **grid):
    """``n`` axes: ``ax`` itself (one Axes, or a sequence of n), or new ones on a pyplot figure."""
    if ax is None:
        plt = _matplotlib()
        fig, axes = plt.subplots(1, n, figsize=figsize, layout="constrained", squeeze=False, **grid)
        return fig, list(axes[0])
    axes = [ax] if n == 1 and not isinstance(ax, (list, tuple, np.ndarray)) else list(np.ravel(ax))
    if len(axes) != n:
        what = "an Axes" if n == 1 else f"a sequence of {n} Axes"
        raise ValueError(f"The 'ax' parameter must be {what}. Got {len(axes)} instead.")
    return axes[0].figure, axes


def _trace_of(result_or_trace):
    trace = getattr(result_or_trace, "trace", result_or_trace)
    if not (hasattr(trace, "change") and hasattr(trace, "elapsed")):
        raise TypeError(
            "The 'result_or_trace' parameter of convergence must be a fit's result or its Trace. "
            f"Got {type(result_or_trace).__name__} instead."
        )
    return trace


def convergence(result_or_trace, ax=None):
    """A fit's convergence: the change of every iteration (the stopping rule's measure, log scale)
    and, where the fit had an eval set, the eval metric (right axis), against the iteration (left
    panel) and the elapsed time (right panel); the tolerance as a dashed line.

    Parameters
    ----------
    result_or_trace : RegressionResult, CPResult or Trace
        A stream's result has one point per batch.
    ax : pair of matplotlib Axes or None
        The two panels to draw on (None: a new figure).

    Returns
    -------
    matplotlib.figure.Figure
    """
    trace = _trace_of(result_or_trace)
    options = getattr(result_or_trace, "options", None) or {}
    unit = "batch" if options.get("stream") else "iteration"
    fig, (ax_it, ax_time) = _axes(ax, 2, (10.0, 4.0))
    change = np.asarray(trace.change, dtype=np.float64)
    metric = np.asarray(trace.eval_metric, dtype=np.float64)
    has_metric = bool(np.isfinite(metric).any())
    name = {"cp_gaussian": "test RMSE", "cp_probit": "test AUC"}.get(
        getattr(result_or_trace, "model", None), "eval metric"
    )
    tol = options.get("tol")
    for axis, x, label in (
        (ax_it, np.arange(1, len(change) + 1), unit),
        (ax_time, np.asarray(trace.elapsed, dtype=np.float64), "elapsed time (s)"),
    ):
        axis.plot(x, change, marker=".", color="C0", label="change")
        if np.all(change[np.isfinite(change)] > 0) and np.isfinite(change).any():
            axis.set_yscale("log")
        if isinstance(tol, float) and tol > 0:
            axis.axhline(tol, color="C0", linestyle="--", linewidth=0.8, label=f"tol {tol:g}")
        axis.locator_params(axis="x", nbins=6)
        axis.set_xlabel(label)
        axis.set_ylabel("change")
        if has_metric:
            twin = axis.twinx()
            ok = np.isfinite(metric)
            twin.plot(x[ok], metric[ok], marker=".", color="C1", label=name)
            twin.set_ylabel(name, color="C1")
        axis.legend(loc="upper right")
    ax_it.set_title(f"change per {unit}")
    ax_time.set_title("change against time")
    return fig


def calibration(y_true, p, n_bins=10, ax=None):
    """The reliability curve of predicted probabilities: per equal-width bin of P, the positive
    rate against the mean P (``fastcep.metrics.calibration_curve``, empty bins left out), with
    the diagonal of a calibrated model; below it a histogram of P over the same bins.

    Parameters
    ----------
    y_true : array of shape (n,)
        Binary labels in {0, 1}, {-1, 1} or bool.
    p : array of shape (n,)
        Predicted P(y = 1), in [0, 1].
    n_bins : int
    ax : pair of matplotlib Axes or None
        The curve's and the histogram's axes (None: a new figure).

    Returns
    -------
    matplotlib.figure.Figure
    """
    curve = metrics.calibration_curve(y_true, p, n_bins)
    ece = metrics.expected_calibration_error(y_true, p, n_bins)
    if ax is None:
        plt = _matplotlib()
        fig, axes = plt.subplots(
            2, 1, figsize=(5.0, 6.0), layout="constrained", sharex=True, height_ratios=(3, 1)
        )
        ax_curve, ax_hist = axes
    else:
        fig, (ax_curve, ax_hist) = _axes(ax, 2, None)
    full = curve.counts > 0
    ax_curve.plot([0.0, 1.0], [0.0, 1.0], linestyle="--", color="0.5", label="calibrated")
    ax_curve.plot(
        curve.mean_p[full], curve.positive_rate[full], marker="o", color="C0", label=f"model (ECE {ece:.3f})"
    )
    ax_curve.set_xlim(0.0, 1.0)
    ax_curve.set_ylim(0.0, 1.0)
    ax_curve.set_ylabel("positive rate")
    ax_curve.set_title("calibration")
    ax_curve.legend(loc="upper left")
    ax_hist.hist(np.asarray(p, dtype=np.float64), bins=curve.edges, color="C0")
    ax_hist.set_xlim(0.0, 1.0)
    ax_hist.set_xlabel("predicted P(y = 1)")
    ax_hist.set_ylabel("count")
    return fig


def roc(y_true, p, ax=None):
    """The ROC curve (``fastcep.metrics.roc_curve``) with its area in the legend, and the
    diagonal of a random ranking.

    Parameters
    ----------
    y_true : array of shape (n,)
        Binary labels, both classes present.
    p : array of shape (n,)
        Scores, higher meaning more likely positive (probabilities or not).
    ax : matplotlib Axes or None

    Returns
    -------
    matplotlib.figure.Figure
    """
    fpr, tpr = metrics.roc_curve(y_true, p)
    fig, (axis,) = _axes(ax, 1, (5.0, 5.0))
    axis.plot([0.0, 1.0], [0.0, 1.0], linestyle="--", color="0.5", label="random")
    axis.plot(fpr, tpr, color="C0", label=f"model (AUC {metrics.auc(y_true, p):.3f})")
    axis.set_xlim(0.0, 1.0)
    axis.set_ylim(0.0, 1.0)
    axis.set_aspect("equal")
    axis.set_xlabel("false positive rate")
    axis.set_ylabel("true positive rate")
    axis.set_title("ROC")
    axis.legend(loc="lower right")
    return fig


def predicted_vs_observed(y, yhat, ax=None):
    """Predictions against the observed values, with the diagonal of perfect predictions and the
    RMSE in the title (at most ``MAX_SCATTER`` points: every k-th beyond it).

    Parameters
    ----------
    y, yhat : arrays of shape (n,)
    ax : matplotlib Axes or None

    Returns
    -------
    matplotlib.figure.Figure
    """
    y = np.asarray(y, dtype=np.float64)
    yhat = np.asarray(yhat, dtype=np.float64)
    err = metrics.rmse(y, yhat)
    fig, (axis,) = _axes(ax, 1, (5.0, 5.0))
    step = max(1, -(-len(y) // MAX_SCATTER))
    axis.scatter(y[::step], yhat[::step], s=4, alpha=0.4, color="C0", rasterized=True)
    both = np.concatenate([y, yhat])
    both = both[np.isfinite(both)]
    lo, hi = (float(both.min()), float(both.max())) if both.size else (0.0, 1.0)
    axis.plot([lo, hi], [lo, hi], linestyle="--", color="0.5", label="predicted = observed")
    axis.set_xlabel("observed")
    axis.set_ylabel("predicted")
    axis.set_title(f"predicted against observed (RMSE {err:.4g})")
    axis.legend(loc="upper left")
    return fig
