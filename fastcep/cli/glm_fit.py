"""``fastcep glm fit DATA --target COL -o MODEL.h5``: Bayesian regression (``--model``: probit,
logistic, gaussian, poisson, negbin, student_t) on a CSV file, an HDF5 table (``fastcep.io.table``)
or labelled sparse rows; writes a regression model file (``fastcep.io.glm_model``)."""

import time

from ..io.formats import GLM_MODEL_FORMAT
from ..likelihoods import resolve as resolve_likelihood
from ._common import UserError
from ._data import data_kind, refuse_target, rows_data, table_data
from ._files import check_output
from ._fitting import CLUSTER_CHECKPOINTS, check_fit_checkpoint, options, report_fit, scheduler
from ._plots import check_plot

#: the options of ``fastcep glm fit`` from the option table (family "regression")
GLM_OPTIONS = (
    "prior_var", "fit_intercept", "intercept_var", "center", "damping", "max_iter", "tol", "schedule",
    "stopping", "n_nodes", "n_samples", "threshold", "n_features", "seed",
)  # fmt: skip


def on_workers(args):
    """Whether the rows' file is read on the cluster's workers: a sparse-row HDF5 file given with
    --scheduler and no --width (svmlight text, or rows widened to a width, are read here)."""
    from ..io.formats import CSR_FORMAT
    from ..io.kinds import checked_kind

    widened = getattr(args, "width", None) is not None
    return bool(args.scheduler) and not widened and checked_kind(args.data) == CSR_FORMAT


def cmd_glm_fit(args):
    from ..api import fit
    from ..io import save_glm_model

    check_output(args.output, "-o", [args.data, args.checkpoint], GLM_MODEL_FORMAT, args.force)
    check_fit_checkpoint(args, [args.data, args.output])
    check_plot(args, [args.data, args.output, args.checkpoint])
    binary = resolve_likelihood(args.model).binary
    rows = data_kind(args.data) == "rows"
    if rows:
        refuse_target(args)
    if rows and on_workers(args):
        # (a sparse-row file on a cluster: the workers read its row ranges; here its header only)
        from ..io.csr import CSRReader

        with CSRReader(args.data) as reader:
            features, X, y, n, d = None, args.data, None, reader.n, reader.n_features
        args.target = "label"
    elif rows:
        features, X, y = rows_data(args, binary)
        args.target = "label"
    elif args.target is None:
        raise UserError(f"{args.data!r} is a table: give --target COL, the column to regress")
    else:
        features, X, y = table_data(args.data, args.target, args.features, args.delimiter, binary)
    if y is not None:
        n, d = len(y), X.shape[1]
    t0 = time.perf_counter()
    with scheduler(args) as client:
        res = fit(
            X, y, model=args.model, method=args.method, n_threads=args.threads, progress=not args.quiet,
            client=client, **options(args, (*GLM_OPTIONS, *CLUSTER_CHECKPOINTS)),
        )  # fmt: skip
    secs = time.perf_counter() - t0
    save_glm_model(res, args.output, features, args.target)
    summary = {
        "model_file": args.output,
        "model": res.model,
        "method": res.method,
        "target": args.target,
        "features": None if features is None else list(features),
        "n_features": d,
        "rows": n,
        "intercept": res.intercept is not None,
        "iterations": res.n_iter,
        "converged": res.converged,
        "stop_reason": res.stop_reason,
        "seconds": secs,
    }
    text = (
        f"wrote {args.output}: {res.model}/{res.method} on {n} rows, {d} feature{'s' if d != 1 else ''}"
        f"{' and an intercept' if res.intercept is not None else ''}, {res.n_iter} iterations "
        f"({res.stop_reason}), {secs:.1f} s"
    )
    return report_fit(args, res, summary, text)
