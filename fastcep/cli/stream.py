"""``fastcep stream TENSOR.h5 -o MODEL.h5``: ADF-CEP over an HDF5 tensor read in batches, with
checkpoints and ``--resume``; writes a CP model file."""

import time

from ..io.formats import CHECKPOINT_FORMAT, FIT_CHECKPOINT_FORMAT, MODEL_FORMAT
from ._common import UserError
from ._files import check_output, check_tensor
from ._fitting import options, save_and_report, scheduler
from ._plots import check_plot


def cmd_stream(args):
    from ..api import stream

    check_output(args.output, "-o", [args.tensor, args.checkpoint], MODEL_FORMAT, args.force)
    if args.checkpoint is not None and not args.resume:  # (with --resume it is read)
        kind = CHECKPOINT_FORMAT if args.scheduler is None else FIT_CHECKPOINT_FORMAT  # (a cluster stream's)
        check_output(args.checkpoint, "--checkpoint", [args.tensor], kind, args.force)
    check_plot(args, [args.tensor, args.output, args.checkpoint])
    check_tensor(args.tensor)
    names = ("damping", "max_iter", "tol", "covariance", "prior_var", "checkpoint_every", "prior_mean")
    more = ("a0", "b0", "probit_curvature", "expect_under", "prior", "likelihood", "passes")
    opts = options(args, (*names, *more))
    t0 = time.perf_counter()
    with scheduler(args) as client:
        if client is not None:  # (an option of cluster streams only)
            opts["client"] = client
        elif "passes" in opts:
            raise UserError("--passes are the passes of a cluster stream; give --scheduler too.")
        res = stream(
            args.tensor, model=args.model, rank=args.rank, method=args.method, batch_size=args.batch_size,
            shuffle=args.shuffle, seed=args.seed, checkpoint=args.checkpoint, resume=args.resume,
            n_threads=args.threads, progress=not args.quiet,
            **opts,
        )  # fmt: skip
    return save_and_report(args, res, time.perf_counter() - t0, "batches")
