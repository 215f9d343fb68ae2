"""What the fitting verbs share: the options given (``options``), the Dask client of
``--scheduler`` (``scheduler``) and its fits' checkpoints (``check_fit_checkpoint``), and the
report of a fit (``report_fit``; a CP model written and reported, ``save_and_report``)."""

import contextlib

from ._common import UserError, out
from ._plots import draw_convergence, save_plot

#: seconds to wait for the Dask scheduler of --scheduler
SCHEDULER_TIMEOUT = 30
#: the options of a cluster fit's checkpoints (``fit`` and ``glm fit`` with --scheduler)
CLUSTER_CHECKPOINTS = ("checkpoint", "checkpoint_every", "resume")


def check_fit_checkpoint(args, inputs):
    """A cluster fit's --checkpoint checked before any work: --scheduler given, and a new
    checkpoint (not one to resume from) not an input and not a file of another kind."""
    from ..io.formats import FIT_CHECKPOINT_FORMAT
    from ._files import check_output

    if args.checkpoint is None:
        if args.resume:
            raise UserError("--resume goes on from a --checkpoint; give one.")
        return
    if args.scheduler is None:
        raise UserError("--checkpoint keeps a cluster fit's state; give --scheduler too.")
    if not args.resume:
        check_output(args.checkpoint, "--checkpoint", inputs, FIT_CHECKPOINT_FORMAT, args.force)


def options(args, names):
    """{name: value} of the options among ``names`` that were given (not None)."""
    return {n: getattr(args, n) for n in names if getattr(args, n, None) is not None}


@contextlib.contextmanager
def scheduler(args):
    """A Dask client of ``--scheduler ADDRESS`` (closed after the fit), or None without it."""
    if getattr(args, "scheduler", None) is None:
        yield None
        return
    from ..cluster import require

    distributed = require(f"fastcep {args.verb} --scheduler")
    try:
        client = distributed.Client(args.scheduler, timeout=SCHEDULER_TIMEOUT)
    except OSError as exc:
        raise UserError(
            f"no Dask scheduler answered at {args.scheduler!r} within {SCHEDULER_TIMEOUT} s: {exc}"
        ) from exc
    with client:
        yield client


def report_fit(args, res, summary, text):
    """Draw the fit's convergence to --plot if asked, and print what was written."""
    plotted = save_plot(args, draw_convergence(res), (10.0, 4.0))
    if plotted is not None:
        summary["plot"] = plotted
        text += f"\nwrote {plotted}: convergence"
    out(args, summary, text)
    return 0


def save_and_report(args, res, secs, unit):
    """Write the fitted CP model to --output (and --plot) and print what was written (text or
    JSON); ``unit``: what ``res.n_iter`` counts ("iterations", "batches")."""
    from ..io import save_model

    save_model(res, args.output)
    summary = {
        "model_file": args.output,
        "model": res.model,
        "rank": res.rank,
        "iterations": res.n_iter,
        "converged": res.converged,
        "stop_reason": res.stop_reason,
        "seconds": secs,
    }
    text = (
        f"wrote {args.output}: {res.model} rank {res.rank}, {res.n_iter} {unit} ({res.stop_reason}), "
        f"{secs:.1f} s"
    )
    return report_fit(args, res, summary, text)
