"""The plots (``fastcep.plot``): each figure's axes hold the lines its data gives (worked by hand
where small), the results' ``plot_convergence``, files on the Agg canvas, and the message when
matplotlib is missing."""

import sys

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")  # (no display in the tests)
import matplotlib.pyplot as plt  # noqa: E402

import fastcep  # noqa: E402
from fastcep import plot  # noqa: E402
from fastcep.data_tools import make_cp_tensor, make_regression_simulation  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _line(ax, label_start):
    (line,) = [ln for ln in ax.get_lines() if str(ln.get_label()).startswith(label_start)]
    return line


def test_calibration_curve_points_are_the_hand_computed_ones():
    y = np.array([0, 0, 1, 1, 1, 0])
    p = np.array([0.05, 0.15, 0.15, 0.85, 0.95, 0.95])
    fig = plot.calibration(y, p)
    curve_ax, hist_ax = fig.axes
    model = _line(curve_ax, "model")
    # bins of width 0.1: (mean P, positive rate) = (0.05, 0), (0.15, 1/2), (0.85, 1), (0.95, 1/2)
    np.testing.assert_allclose(model.get_xdata(), [0.05, 0.15, 0.85, 0.95], rtol=1e-15)
    np.testing.assert_array_equal(model.get_ydata(), [0.0, 0.5, 1.0, 0.5])
    assert "ECE 0.300" in model.get_label()
    diagonal = _line(curve_ax, "calibrated")
    np.testing.assert_array_equal(diagonal.get_xdata(), [0, 1])
    np.testing.assert_array_equal(diagonal.get_ydata(), [0, 1])
    heights = [patch.get_height() for patch in hist_ax.patches]
    assert heights == [1, 2, 0, 0, 0, 0, 0, 0, 1, 2]


def test_roc_line_is_the_hand_computed_curve():
    fig = plot.roc([1, 0, 1, 0], [0.9, 0.8, 0.4, 0.4])
    (ax,) = fig.axes
    model = _line(ax, "model")
    np.testing.assert_array_equal(model.get_xdata(), [0.0, 0.0, 0.5, 1.0])
    np.testing.assert_array_equal(model.get_ydata(), [0.0, 0.5, 0.5, 1.0])
    assert "AUC 0.625" in model.get_label()


def test_predicted_vs_observed_scatters_every_point():
    y = np.array([0.0, 1.0, 2.0, 3.0])
    yhat = np.array([0.5, 1.0, 1.5, 3.5])
    fig = plot.predicted_vs_observed(y, yhat)
    (ax,) = fig.axes
    np.testing.assert_array_equal(ax.collections[0].get_offsets(), np.column_stack([y, yhat]))
    assert f"RMSE {np.sqrt(np.mean((y - yhat) ** 2)):.4g}" in ax.get_title()
    np.testing.assert_array_equal(_line(ax, "predicted = observed").get_xdata(), [0.0, 3.5])


def test_convergence_of_a_regression_fit_and_its_method():
    X, y, _ = make_regression_simulation("probit", "gaussian", n=400, d=3, seed=0)
    res = fastcep.fit(X, y)
    fig = res.plot_convergence()
    ax_it, ax_time = fig.axes
    for ax, x in ((ax_it, np.arange(1, res.n_iter + 1)), (ax_time, res.trace.elapsed)):
        change = _line(ax, "change")
        np.testing.assert_array_equal(change.get_xdata(), x)
        np.testing.assert_array_equal(change.get_ydata(), res.trace.change)
        np.testing.assert_array_equal(_line(ax, "tol").get_ydata(), [1e-5, 1e-5])
    assert ax_it.get_xlabel() == "iteration" and ax_it.get_yscale() == "log"
    # a trace works as well as its result, on axes of the caller's
    fig2, axes = plt.subplots(1, 2)
    assert plot.convergence(res.trace, ax=axes) is fig2
    np.testing.assert_array_equal(axes[0].get_lines()[0].get_ydata(), res.trace.change)
    with pytest.raises(TypeError, match="result_or_trace"):
        plot.convergence(np.arange(3))


def test_convergence_of_a_cp_fit_shows_its_eval_metric():
    T, _ = make_cp_tensor((12, 10, 8), 2, 600, noise_sd=0.1, seed=0)
    test = (T.coords[:100], T.values[:100])
    res = fastcep.fit(
        T.coords[100:], T.values[100:], model="cp_gaussian", shape=T.shape, rank=2, eval_set=test, max_iter=8
    )
    fig = res.plot_convergence()
    twins = [ax for ax in fig.axes if any(ln.get_label() == "test RMSE" for ln in ax.get_lines())]
    assert len(twins) == 2  # one per panel
    metric = _line(twins[0], "test RMSE")
    np.testing.assert_array_equal(metric.get_ydata(), res.trace.eval_metric)
    np.testing.assert_array_equal(metric.get_xdata(), np.arange(1, res.n_iter + 1))
    # a stream's points are batches
    s = fastcep.stream(T.coords, T.values, model="cp_gaussian", rank=2, batch_size=200)
    fig = s.plot_convergence()
    assert fig.axes[0].get_xlabel() == "batch"
    np.testing.assert_array_equal(_line(fig.axes[0], "change").get_ydata(), s.trace.change)


def test_agg_figure_writes_a_png_without_pyplot(tmp_path):
    n_before = len(plt.get_fignums())
    fig = plot.agg_figure((6.0, 4.0))
    plot.roc([1, 0, 1, 0, 1], [0.9, 0.1, 0.7, 0.4, 0.3], ax=fig.subplots())
    fig.savefig(tmp_path / "roc.png", dpi=50)
    data = (tmp_path / "roc.png").read_bytes()
    assert data.startswith(PNG_MAGIC) and len(data) > 5000
    image = matplotlib.image.imread(tmp_path / "roc.png")
    assert image.shape[:2] == (200, 300) and image.std() > 0.05  # not a blank canvas
    assert len(plt.get_fignums()) == n_before  # (not registered with pyplot)


def test_missing_matplotlib_names_the_extra(monkeypatch):
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.setitem(sys.modules, name, None)
    for call in (
        lambda: plot.calibration([0, 1], [0.2, 0.7]),
        lambda: plot.roc([0, 1], [0.2, 0.7]),
        lambda: plot.agg_figure(),
    ):
        with pytest.raises(ImportError, match=r"pip install 'fastcep\[plot\]'"):
            call()
