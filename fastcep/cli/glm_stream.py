"""``fastcep glm stream ROWS -o MODEL.h5``: one online pass over labelled sparse rows (svmlight
text or a sparse-row HDF5 file; batches read ahead, rows/s in the progress line, ``--checkpoint``
and ``--resume``); writes a regression model file."""

from ..io.formats import GLM_MODEL_FORMAT
from ..io.sources import stream_words
from ._common import UserError, out
from ._files import check_output, load_glm_model
from ._fitting import scheduler


def cmd_glm_stream(args):
    from ..glm.stream import stream_file
    from ..io import save_glm_model

    check_output(args.output, "-o", [args.data], GLM_MODEL_FORMAT, args.force)
    once = stream_words(args.data)
    if once is not None and args.checkpoint is not None:
        raise UserError(
            f"{args.data!r} is {once}, which cannot be read again to resume from --checkpoint: write its "
            "rows to a file, or leave out --checkpoint"
        )
    if once is not None and args.width is None:
        raise UserError(
            f"{args.data!r} is {once}, which can be read only once: give --width, the rows' width (without "
            "it svmlight text is read twice, first for its largest index)"
        )
    if args.checkpoint is not None:
        inputs = [args.data, args.output]
        check_output(args.checkpoint, "--checkpoint", inputs, GLM_MODEL_FORMAT, args.force)
    init = None if args.init is None else load_glm_model(args.init).result
    opts = dict(forget=args.forget, max_iter=args.max_iter, tol=args.tol, prior_var=args.prior_var)
    if args.passes is not None and args.scheduler is None:
        raise UserError("--passes are the passes of a cluster stream; give --scheduler too.")
    with scheduler(args) as client:
        if client is not None:
            opts.update(client=client, passes=3 if args.passes is None else args.passes)
        res = stream_file(
            args.data, args.model, args.method, batch_rows=args.batch_rows, intercept_var=args.intercept_var,
            fit_intercept=args.fit_intercept, n_features=args.width, index_base=args.index_base, init=init,
            checkpoint=args.checkpoint, checkpoint_every=args.checkpoint_every, resume=args.resume,
            progress=not args.quiet, n_threads=args.threads, **opts,
        )  # fmt: skip
    save_glm_model(res, args.output, target="label")
    info = res.options["stream"]
    payload = {
        "model_file": args.output, "model": res.model, "method": res.method, "rows": info["rows"],
        "n_features": res.posterior.mean.size, "batches_at_max_iter": info["stopped_at_max_iter"],
        "seconds": info["seconds"], "rows_per_second": info["rows"] / max(info["seconds"], 1e-9),
    }  # fmt: skip
    text = (
        f"wrote {args.output}: {res.model}/{res.method} streamed over {info['rows']:,} rows, "
        f"{payload['n_features']} columns, {payload['rows_per_second']:,.0f} rows/s"
    )
    out(args, payload, text)
    return 0
