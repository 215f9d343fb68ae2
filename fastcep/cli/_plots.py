"""``--plot FILE.png``: checked before any work (``check_plot``), drawn on the non-interactive Agg
canvas after it (``save_plot``) with one of the drawings (``draw_convergence``, ``draw_binary``,
``draw_continuous``); matplotlib is imported only then."""

import os

from ._common import UserError
from ._files import check_output


def check_plot(args, inputs=()):
    """With --plot: matplotlib importable, the image's folder there and its name ending in a
    format matplotlib writes, before any work."""
    if getattr(args, "plot", None) is None:
        return
    check_output(args.plot, "--plot", inputs, "png", args.force)
    try:
        from ..plot import agg_figure

        fig = agg_figure()
    except ImportError as exc:
        raise UserError(f"--plot needs matplotlib: {exc}") from None
    formats = sorted(fig.canvas.get_supported_filetypes())
    if os.path.splitext(args.plot)[1][1:].lower() not in formats:
        raise UserError(
            f"--plot {args.plot!r} does not end in a format matplotlib writes "
            f"({', '.join('.' + f for f in formats)}): name it FILE.png, say"
        )


def save_plot(args, draw, figsize):
    """Draw with ``draw(fig)`` on a figure of the non-interactive Agg canvas and write it to
    --plot; returns the path (None without --plot)."""
    if getattr(args, "plot", None) is None:
        return None
    from ..plot import agg_figure

    fig = agg_figure(figsize)
    draw(fig)
    fig.savefig(args.plot, dpi=100)
    return args.plot


def draw_convergence(res):
    """The fit's convergence: change per iteration and against time."""
    from .. import plot

    def draw(fig):
        plot.convergence(res, ax=fig.subplots(1, 2))

    return draw


def draw_binary(y, p, probabilities, both_classes):
    """Calibration (probabilities only) and ROC (both classes only) side by side."""
    from .. import plot

    def draw(fig):
        panels = int(probabilities) + int(both_classes)
        if panels == 0:
            ax = fig.subplots()
            ax.text(0.5, 0.5, "one class only: no ROC curve", ha="center", va="center")
            ax.set_axis_off()
            return
        grid = fig.add_gridspec(2, panels, height_ratios=(3, 1))
        if probabilities:
            curve = fig.add_subplot(grid[0, 0])
            plot.calibration(y, p, ax=(curve, fig.add_subplot(grid[1, 0], sharex=curve)))
        if both_classes:
            plot.roc(y, p, ax=fig.add_subplot(grid[:, panels - 1]))

    return draw


def draw_continuous(y, yhat):
    """Predicted against observed values."""
    from .. import plot

    def draw(fig):
        plot.predicted_vs_observed(y, yhat, ax=fig.subplots())

    return draw
