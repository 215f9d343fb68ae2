"""The test metrics that ``evaluate`` and ``glm evaluate`` share: binary (``binary_metrics`` and
their lines, ``binary_text``) and a count likelihood's RMSE on the log scale (``log1p_rmse``)."""

import numpy as np


def binary_metrics(y, p, log_likelihood, probabilities=True):
    """The binary test metrics of predictions ``p`` against 0/1 labels ``y``: AUC (None with one
    class), and for probabilities the test log-likelihood, Brier score, expected calibration
    error (10 equal-width bins) and mean P; the positive rate always."""
    from ..metrics import auc, brier, expected_calibration_error

    both = bool(0 < y.sum() < len(y))
    out = {"auc": auc(y, p) if both else None}
    if probabilities:
        out.update(
            test_log_likelihood=log_likelihood(),
            brier=brier(y, p),
            ece=expected_calibration_error(y, p, n_bins=10),
            mean_p=float(np.mean(p)),
        )
    out["positive_rate"] = float(np.mean(y))
    return out


def binary_text(m, n, note=""):
    """The lines of the binary metrics ``m`` (``binary_metrics``) on ``n`` entries."""
    auc = "AUC undefined (one class only)" if m["auc"] is None else f"AUC {m['auc']:.4f}"
    lines = [f"{auc} on {n} entries{note}"]
    if "brier" in m:
        lines += [
            f"test log-likelihood {m['test_log_likelihood']:.4f} (mean log predictive probability)",
            f"Brier score {m['brier']:.4f}, calibration error {m['ece']:.4f} (ECE, 10 equal-width bins)",
            f"mean P {m['mean_p']:.4f} against a positive rate of {m['positive_rate']:.4f}",
        ]
    else:
        lines.append(f"positive rate {m['positive_rate']:.4f}")
    return "\n".join(lines)


def log1p_rmse(payload, likelihood, rmse):
    """The lines of the RMSE on the log scale (of E[log(1 + y)] against log(1 + y), ``rmse()``)
    for a count likelihood, added to ``payload`` as "rmse_log1p"; none for the others."""
    if not likelihood.counts:
        return []
    payload["rmse_log1p"] = rmse()
    return [f"RMSE on the log scale {payload['rmse_log1p']:.4f} (E[log(1 + y)] against log(1 + y))"]
