"""``fastcep glm evaluate MODEL.h5 DATA``: a regression model's test metrics (binary: as
``evaluate``; values: RMSE, test log-likelihood, mean deviance, and for counts the RMSE on the log
scale) on a table or labelled sparse rows."""

from ._common import UserError, out
from ._data import data_kind, refuse_target, rows_data, table_data
from ._files import load_glm_model
from ._metrics import binary_metrics, binary_text, log1p_rmse
from ._plots import check_plot, draw_binary, draw_continuous, save_plot


def _evaluate_values(args, res, X, y, target):
    """``glm evaluate`` of a likelihood of values (real or counts): RMSE, test log-likelihood and
    mean deviance of the predictive."""
    payload = {
        "model_file": args.model, "data": args.data, "target": target, "rows": len(y),
        "likelihood": repr(res.likelihood), "rmse": res.rmse(X, y),
        "test_log_likelihood": res.log_likelihood(X, y), "mean_deviance": res.deviance(X, y),
    }  # fmt: skip
    text = "\n".join(
        [
            f"RMSE {payload['rmse']:.4f} on {len(y)} rows ({payload['likelihood']})",
            *log1p_rmse(payload, res.likelihood, lambda: res.rmse(X, y, scale="log1p")),
            f"test log-likelihood {payload['test_log_likelihood']:.4f} (the posterior predictive)",
            f"mean deviance {payload['mean_deviance']:.4f}",
        ]
    )
    plotted = save_plot(args, draw_continuous(y, res.predict(X)), (6.0, 6.0))
    if plotted is not None:
        payload["plot"] = plotted
        text += f"\nwrote {plotted}"
    out(args, payload, text)
    return 0


def cmd_glm_evaluate(args):
    check_plot(args, [args.model, args.data])
    model = load_glm_model(args.model)
    rows = data_kind(args.data) == "rows"
    if rows:
        refuse_target(args)
    target = args.target or model.target
    if not target and not rows:
        raise UserError(f"{args.model!r} names no target column: give --target COL")
    res = model.result
    binary = res.likelihood.binary
    if rows:
        _, X, labels = rows_data(args, binary, res.posterior.mean.size)
    elif model.features is None:
        raise UserError(
            f"{args.model!r} was fitted on sparse rows (its columns have no names): evaluate it on svmlight "
            "text or a sparse-row HDF5 file"
        )
    else:
        _, X, labels = table_data(args.data, target, list(model.features), args.delimiter, binary)
    if not binary:
        return _evaluate_values(args, res, X, labels, target)
    p = res.predict_proba(X)
    y = labels > 0
    m = binary_metrics(y, p, lambda: res.log_likelihood(X, y))
    payload = {"model_file": args.model, "data": args.data, "target": target, "rows": len(y), **m}
    text = binary_text(m, len(y)).replace(" entries", " rows", 1)
    plotted = save_plot(args, draw_binary(y, p, True, m["auc"] is not None), (10.0, 5.0))
    if plotted is not None:
        payload["plot"] = plotted
        text += f"\nwrote {plotted}"
    out(args, payload, text)
    return 0
