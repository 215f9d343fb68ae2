"""``fastcep evaluate MODEL.h5 TEST.h5``: a CP model's test metrics: RMSE and test log-likelihood
(continuous; counts also the RMSE on the log scale), or AUC, test log-likelihood, Brier score,
calibration error, mean P and positive rate (binary)."""

import shlex

import numpy as np

from ..io.formats import MODEL_FORMAT, TENSOR_FORMAT
from ._common import UserError, out
from ._files import load_cp_model, read_tensor
from ._metrics import binary_metrics, binary_text, log1p_rmse
from ._plots import check_plot, draw_binary, draw_continuous, save_plot


def cmd_evaluate(args):
    from ..io.kinds import checked_kind

    if checked_kind(args.model) == TENSOR_FORMAT and checked_kind(args.tensor) == MODEL_FORMAT:
        raise UserError(
            f"the model file comes first: `fastcep evaluate {shlex.quote(args.tensor)} "
            f"{shlex.quote(args.model)}`"
        )
    check_plot(args, [args.model, args.tensor])
    res = load_cp_model(args.model)
    coords, values, shape = read_tensor(args.tensor)
    if shape != tuple(res.shape):
        raise UserError(f"the test tensor has shape {shape}, the model {res.shape}")
    payload = {"model_file": args.model, "tensor": args.tensor, "entries": len(values)}
    if not res.likelihood.binary:  # (cp_gaussian, and a generic model of real values or counts)
        pred = res.predict(coords)
        payload["rmse"] = res.rmse(coords, values)
        payload["test_log_likelihood"] = None if res.point_estimate else res.log_likelihood(coords, values)
        payload["mean_prediction"], payload["mean_value"] = float(np.mean(pred)), float(np.mean(values))
        ll = payload["test_log_likelihood"]
        kind = type(res.likelihood).__name__  # (what the values are scored under)
        text = "\n".join(
            [
                f"RMSE {payload['rmse']:.4f} on {len(values)} entries",
                *log1p_rmse(payload, res.likelihood, lambda: res.rmse(coords, values, scale="log1p")),
                "test log-likelihood "
                + ("n/a (a point estimate)" if ll is None else f"{ll:.4f} ({kind} predictive)"),
                f"mean prediction {payload['mean_prediction']:.4g} against a mean value of "
                f"{payload['mean_value']:.4g}",
            ]
        )
        draw, figsize = draw_continuous(values, pred), (6.0, 6.0)
    else:
        y = np.asarray(values) > 0
        p = res.predict(coords)
        probabilities = not res.point_estimate  # (CP-WOPT's predictions are scores)
        m = binary_metrics(y, p, lambda: res.log_likelihood(coords, values), probabilities)
        payload.update(m)
        note = "" if probabilities else " (a point estimate: its predictions are scores, not probabilities)"
        text = binary_text(m, len(values), note)
        draw, figsize = draw_binary(y, p, probabilities, m["auc"] is not None), (10.0, 5.0)
    plotted = save_plot(args, draw, figsize)
    if plotted is not None:
        payload["plot"] = plotted
        text += f"\nwrote {plotted}"
    out(args, payload, text)
    return 0
