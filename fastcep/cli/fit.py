"""``fastcep fit TENSOR.h5 -o MODEL.h5``: batch CEP on an HDF5 tensor, held in memory (with
``--scheduler``, method cep1: read by the cluster's workers); writes a CP model file."""

import time

from ..io.formats import MODEL_FORMAT
from ._files import check_output, check_tensor, read_tensor
from ._fitting import CLUSTER_CHECKPOINTS, check_fit_checkpoint, options, save_and_report, scheduler
from ._plots import check_plot


def cmd_fit(args):
    from ..api import fit

    check_output(args.output, "-o", [args.tensor, args.checkpoint], MODEL_FORMAT, args.force)
    check_fit_checkpoint(args, [args.tensor, args.output])
    check_plot(args, [args.tensor, args.output, args.checkpoint])
    on_workers = args.scheduler is not None and args.method == "cep1"  # (the file read there)
    if on_workers:
        check_tensor(args.tensor)
        coords, values, shape = args.tensor, None, None
    else:
        coords, values, shape = read_tensor(args.tensor, args.max_entries)
    names = ("damping", "max_iter", "tol", "covariance", "schedule", "seed", "prior_var", "prior_mean")
    more = ("a0", "b0", "probit_curvature", "init", "noise_warmup", "expect_under", "prior", "likelihood")
    opts = options(args, (*names, *more, *CLUSTER_CHECKPOINTS))
    t0 = time.perf_counter()
    with scheduler(args) as client:
        if client is not None:  # (an option of the methods that run on a cluster only)
            opts["client"] = client
        res = fit(
            coords, values, model=args.model, method=args.method, shape=shape, rank=args.rank,
            n_threads=args.threads, progress=not args.quiet, **opts,
        )  # fmt: skip
    return save_and_report(args, res, time.perf_counter() - t0, "iterations")
