"""``fastcep glm fit`` and ``fastcep glm evaluate``: regression on a CSV file or HDF5 table, the
regression model file, the test metrics, the plots and the errors."""

import json

import h5py
import numpy as np
import pytest

import fastcep
from fastcep import metrics
from fastcep.cli import main
from fastcep.data_tools import make_regression_simulation
from fastcep.io import load_glm_model

NAMES = ("x1", "x2", "x3")


def _write_csv(path, X, y):
    rows = [",".join([*NAMES, "label"])]
    rows += [",".join(repr(v) for v in [*x.tolist(), int(t)]) for x, t in zip(X, y, strict=True)]
    path.write_text("\n".join(rows) + "\n")


@pytest.fixture
def data(tmp_path, monkeypatch):
    X, y, _ = make_regression_simulation("probit", "gaussian", n=800, d=3, seed=0)
    _write_csv(tmp_path / "train.csv", X[:500], y[:500])
    _write_csv(tmp_path / "test.csv", X[500:], y[500:])
    monkeypatch.chdir(tmp_path)
    return tmp_path, X, y


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _bad(capsys, *argv):
    code, out, err = run(capsys, *argv)
    verb = " ".join(argv[:2]) if argv[0] == "glm" else argv[0]
    assert code == 2 and out == ""
    assert err.startswith(f"fastcep {verb}: error:") and err.count("\n") == 1, err
    return err


def test_fit_writes_the_fit_of_the_table(data, capsys):
    tmp, X, y = data
    code, out, err = run(capsys, "glm", "fit", "train.csv", "--target", "label", "-o", "m.h5", "--json")
    assert code == 0 and "probit/cep1" in err  # (the progress line)
    summary = json.loads(out)
    assert summary["features"] == list(NAMES) and summary["rows"] == 500 and summary["intercept"]
    m = load_glm_model("m.h5")
    assert m.features == NAMES and m.target == "label"
    res = fastcep.fit(X[:500], y[:500])
    np.testing.assert_allclose(m.result.posterior.mean, res.posterior.mean, rtol=1e-12)
    assert m.result.center is not None  # (the default: centred)
    np.testing.assert_allclose(m.result.posterior.var, res.posterior.var, rtol=1e-12)
    assert m.result.intercept.mean == pytest.approx(res.intercept.mean, rel=1e-12)
    assert summary["iterations"] == res.n_iter and summary["converged"]


def test_fit_options_reach_the_fit(data, capsys):
    tmp, X, y = data
    code, out, _ = run(
        capsys, "glm", "fit", "train.csv", "--target", "label", "--features", "x3", "x1", "--model",
        "logistic", "--method", "ep", "--no-fit-intercept", "--prior-var", "2", "--damping", "0.5", "-o",
        "m.h5", "--quiet",
    )  # fmt: skip
    assert code == 0 and "2 features" in out
    m = load_glm_model("m.h5")
    assert m.features == ("x3", "x1") and m.result.intercept is None
    opts = m.result.options
    assert (opts["prior_var"], opts["damping"], opts["fit_intercept"]) == (2.0, 0.5, False)
    assert (m.result.model, m.result.method) == ("logistic", "ep")
    res = fastcep.fit(X[:500][:, [2, 0]], y[:500], model="logistic", method="ep", fit_intercept=False,
                      prior_var=2.0, damping=0.5)  # fmt: skip
    np.testing.assert_allclose(m.result.posterior.mean, res.posterior.mean, rtol=1e-12)
    assert m.result.center is None  # (no intercept: nothing to centre)
    # --no-center: the un-centred fit (its file holds no centre)
    code, _, _ = run(
        capsys, "glm", "fit", "train.csv", "--target", "label", "--features", "x3", "x1", "--no-center",
        "-o", "u.h5", "--quiet",
    )  # fmt: skip
    u = load_glm_model("u.h5").result
    assert code == 0 and u.center is None and u.options["center"] is False and u.intercept is not None


def test_an_hdf5_table_gives_the_same_model(data, capsys):
    tmp, X, y = data
    with h5py.File(tmp / "train.h5", "w") as f:
        for j, name in enumerate(NAMES):
            f[name] = X[:500, j]
        f["label"] = y[:500].astype(np.int8)
    assert run(capsys, "glm", "fit", "train.h5", "--target", "label", "-o", "a.h5", "--quiet")[0] == 0
    assert run(capsys, "glm", "fit", "train.csv", "--target", "label", "-o", "b.h5", "--quiet")[0] == 0
    a, b = load_glm_model("a.h5"), load_glm_model("b.h5")
    assert a.features == b.features == NAMES
    np.testing.assert_array_equal(a.result.posterior.mean, b.result.posterior.mean)


def test_evaluate_reports_the_test_metrics(data, capsys):
    tmp, X, y = data
    run(capsys, "glm", "fit", "train.csv", "--target", "label", "-o", "m.h5", "--quiet")
    code, out, _ = run(capsys, "glm", "evaluate", "m.h5", "test.csv", "--json")
    assert code == 0
    got = json.loads(out)
    res = load_glm_model("m.h5").result
    Xte, yte = X[500:], y[500:]
    p = res.predict_proba(Xte)
    assert got["rows"] == 300 and got["target"] == "label"
    assert got["test_log_likelihood"] == pytest.approx(res.log_likelihood(Xte, yte), abs=1e-12)
    assert got["auc"] == pytest.approx(metrics.auc(yte, p), abs=1e-12)
    assert got["brier"] == pytest.approx(np.mean((p - yte) ** 2), abs=1e-12)
    assert got["ece"] == pytest.approx(metrics.expected_calibration_error(yte, p, 10), abs=1e-12)
    assert got["mean_p"] == pytest.approx(p.mean()) and got["positive_rate"] == pytest.approx(yte.mean())
    code, out, _ = run(capsys, "glm", "evaluate", "m.h5", "test.csv", "--target", "label")
    assert code == 0 and out.startswith(f"AUC {got['auc']:.4f} on 300 rows")
    assert f"mean P {p.mean():.4f} against a positive rate of {yte.mean():.4f}" in out
    # one class only: no AUC, the rest stands
    _write_csv(tmp / "ones.csv", Xte[yte == 1], yte[yte == 1])
    got = json.loads(run(capsys, "glm", "evaluate", "m.h5", "ones.csv", "--json")[1])
    assert got["auc"] is None and got["positive_rate"] == 1.0 and np.isfinite(got["brier"])


def test_fit_and_evaluate_plot(data, capsys):
    matplotlib_image = pytest.importorskip("matplotlib.image")
    tmp, _, _ = data
    code, out, _ = run(
        capsys, "glm", "fit", "train.csv", "--target", "label", "-o", "m.h5", "--plot", "conv.png", "--quiet"
    )
    assert code == 0 and "wrote conv.png" in out
    code, out, _ = run(capsys, "glm", "evaluate", "m.h5", "test.csv", "--plot", "ev.png", "--json")
    assert code == 0 and json.loads(out)["plot"] == "ev.png"
    for name, shape in (("conv.png", (400, 1000)), ("ev.png", (500, 1000))):
        data_bytes = (tmp / name).read_bytes()
        assert data_bytes.startswith(b"\x89PNG\r\n\x1a\n") and len(data_bytes) > 10_000
        image = matplotlib_image.imread(tmp / name)
        assert image.shape[:2] == shape and image.std() > 0.05


def test_errors(data, capsys):
    tmp, X, y = data
    fit = ("glm", "fit")
    assert "no column 'y'; its columns are 'x1', 'x2', 'x3', 'label'" in _bad(
        capsys, *fit, "train.csv", "--target", "y", "-o", "m.h5"
    )
    assert "no column 'x9'" in _bad(
        capsys, *fit, "train.csv", "--target", "label", "--features", "x9", "-o", "m.h5"
    )
    assert "lists the target column 'label'" in _bad(
        capsys, *fit, "train.csv", "--target", "label", "--features", "x1", "label", "-o", "m.h5"
    )
    assert "must hold binary labels 0/1 or -1/1; data row 1 holds" in _bad(
        capsys, *fit, "train.csv", "--target", "x1", "-o", "m.h5"
    )
    (tmp / "bad.csv").write_text("x1,label\n0.5,1\nabc,0\n")
    assert "line 3, column 'x1': 'abc' is not a number" in _bad(
        capsys, *fit, "bad.csv", "--target", "label", "-o", "m.h5"
    )
    (tmp / "noheader.csv").write_text("0.5,1\n0.2,0\n")
    assert "add a header row" in _bad(capsys, *fit, "noheader.csv", "--target", "label", "-o", "m.h5")
    fastcep.write_tensor(tmp / "t.h5", np.array([[0, 0], [1, 1]]), np.array([1.0, 2.0]))
    assert "it is a tensor file: decompose it with `fastcep fit t.h5" in _bad(
        capsys, *fit, "t.h5", "--target", "label", "-o", "m.h5"
    )
    assert not (tmp / "m.h5").exists()
    run(capsys, *fit, "train.csv", "--target", "label", "-o", "m.h5", "--quiet")
    evaluate = ("glm", "evaluate")
    assert "no column 'x2'; its columns are 'x1', 'label'" in _bad(capsys, *evaluate, "m.h5", "bad.csv")
    assert "it is a tensor file" in _bad(capsys, *evaluate, "t.h5", "test.csv")
    fastcep.save_model(fastcep.fit(np.array([[0, 0], [1, 1], [0, 1]]), np.array([1.0, 2.0, 0.5]),
                                   model="cp_gaussian", rank=1, max_iter=3), tmp / "cp.h5")  # fmt: skip
    assert "it is a CP model file: evaluate it with `fastcep evaluate cp.h5 TEST.h5`" in _bad(
        capsys, *evaluate, "cp.h5", "test.csv"
    )
    err = _bad(capsys, "evaluate", "m.h5", "t.h5")
    assert "it is a regression model file: evaluate it with `fastcep glm evaluate m.h5 DATA`" in err


def test_a_likelihood_of_values_fits_and_evaluates(tmp_path, monkeypatch, capsys):
    rng = np.random.default_rng(5)
    X = rng.standard_normal((300, 3))
    y = X @ np.array([1.0, -0.5, 0.2]) + 2.0 + 0.4 * rng.standard_normal(300)
    rows = [",".join([*NAMES, "value"])] + [
        ",".join(repr(float(v)) for v in [*x, t]) for x, t in zip(X, y, strict=True)
    ]
    (tmp_path / "values.csv").write_text("\n".join(rows) + "\n")
    monkeypatch.chdir(tmp_path)
    code, out, err = run(
        capsys, "glm", "fit", "values.csv", "--target", "value", "--model", "gaussian", "-o", "g.h5"
    )
    assert code == 0
    m = load_glm_model("g.h5")
    res = fastcep.fit(X, y, model="gaussian")
    assert m.result.likelihood == res.likelihood
    np.testing.assert_allclose(m.result.posterior.mean, res.posterior.mean, rtol=1e-12)
    code, out, err = run(capsys, "glm", "evaluate", "g.h5", "values.csv", "--json")
    report = json.loads(out)
    assert report["rmse"] == pytest.approx(res.rmse(X, y), rel=1e-12)
    assert report["test_log_likelihood"] == pytest.approx(res.log_likelihood(X, y), rel=1e-12)
    assert report["mean_deviance"] == pytest.approx(res.deviance(X, y), rel=1e-12)
    err = _bad(capsys, "glm", "fit", "values.csv", "--target", "value", "--model", "poisson", "-o", "p.h5")
    assert "must hold counts (integers >= 0)" in err
    assert "rmse_log1p" not in report  # (not a count likelihood)


def test_a_count_model_is_scored_on_the_log_scale_too(tmp_path, monkeypatch, capsys):
    rng = np.random.default_rng(6)
    X = rng.standard_normal((300, 3))
    y = rng.poisson(np.exp(X @ np.array([0.6, -0.4, 0.3]) + 1.5))
    rows = [",".join([*NAMES, "count"])] + [
        ",".join([*(repr(float(v)) for v in x), str(int(t))]) for x, t in zip(X, y, strict=True)
    ]
    (tmp_path / "counts.csv").write_text("\n".join(rows) + "\n")
    monkeypatch.chdir(tmp_path)
    code, out, err = run(
        capsys, "glm", "fit", "counts.csv", "--target", "count", "--model", "poisson", "-o", "p.h5"
    )
    assert code == 0
    res = load_glm_model("p.h5").result
    code, out, err = run(capsys, "glm", "evaluate", "p.h5", "counts.csv")
    assert code == 0 and "RMSE on the log scale" in out
    code, out, err = run(capsys, "glm", "evaluate", "p.h5", "counts.csv", "--json")
    report = json.loads(out)
    assert report["rmse_log1p"] == pytest.approx(res.rmse(X, y, scale="log1p"), rel=1e-12)
    assert report["rmse_log1p"] < report["rmse"]


def test_csv_errors_name_the_file_s_line_and_column(data, capsys):
    """Issue 38, items 16 and 19. Before: a field over 128 kB gave a ``_csv.Error`` traceback
    (exit 1); a NaN cell was reported as "The 'X' parameter of fit ... rows [5]"."""
    tmp, _, _ = data
    fit = ("glm", "fit")
    (tmp / "long.csv").write_text('x1,label\n0.5,1\n"' + "9" * 200_000 + '",0\n')
    err = _bad(capsys, *fit, "long.csv", "--target", "label", "-o", "m.h5")
    assert "line 3: a field is longer than 131,072 characters" in err
    (tmp / "nan.csv").write_text("x1,x2,label\n0.5,1,1\n0.2,0.1,0\n0.3,nan,1\n0.1,NaN,0\n")
    err = _bad(capsys, *fit, "nan.csv", "--target", "label", "-o", "m.h5")
    assert "line 4, column 'x2': 'nan' is not a finite number (2 such cells in the column)" in err
    (tmp / "inf.csv").write_text("x1,label\n0.5,1\n-inf,0\n")
    assert "line 3, column 'x1': '-inf' is not a finite number" in _bad(
        capsys, *fit, "inf.csv", "--target", "label", "-o", "m.h5"
    )
    with h5py.File(tmp / "nan.h5", "w") as f:
        f["x1"] = np.array([0.5, 0.2, np.inf])
        f["label"] = np.array([1.0, 0.0, 1.0])
    assert "column 'x1', row 2 (counting from 0): inf is not a finite number" in _bad(
        capsys, *fit, "nan.h5", "--target", "label", "-o", "m.h5"
    )
    assert not (tmp / "m.h5").exists()


def test_an_output_that_is_another_kind_of_file_is_refused_unless_forced(data, capsys):
    """Issue 38, item 18. Before: -o and --checkpoint silently replaced any file, a data CSV too."""
    tmp, _, _ = data
    fit = ("glm", "fit", "train.csv", "--target", "label", "--quiet")
    precious = (tmp / "test.csv").read_bytes()
    err = _bad(capsys, *fit, "-o", "test.csv")
    assert "the output (-o) 'test.csv' exists and holds a text table (CSV data?)" in err
    assert "Give --force to replace it" in err
    assert (tmp / "test.csv").read_bytes() == precious
    (tmp / "picture.png").write_bytes(b"not a picture")
    assert "the output (--plot) 'picture.png' exists and holds text" in _bad(
        capsys, *fit, "-o", "m.h5", "--plot", "picture.png"
    )
    assert not (tmp / "m.h5").exists()
    # the same kind of file is replaced (a model by a model), and --force replaces anything
    assert run(capsys, *fit, "-o", "m.h5")[0] == 0
    assert run(capsys, *fit, "-o", "m.h5")[0] == 0
    assert run(capsys, *fit, "-o", "test.csv", "--force")[0] == 0
    assert load_glm_model("test.csv").target == "label"
    # the CP verbs: fit -o, stream --checkpoint, convert's destination
    fastcep.write_tensor(tmp / "t.h5", np.array([[0, 0], [1, 1], [0, 1]]), np.array([1.0, 2.0, 0.5]))
    for argv, flag in [
        (("fit", "t.h5", "--model", "cp_gaussian", "--rank", "1", "-o", "train.csv"), "-o"),
        (
            (
                "stream",
                "t.h5",
                "--model",
                "cp_gaussian",
                "--rank",
                "1",
                "-o",
                "s.h5",
                "--checkpoint",
                "train.csv",
            ),
            "--checkpoint",
        ),  # fmt: skip
        (("convert", "train.csv", "m.h5"), "dst"),
    ]:
        assert f"the output ({flag}) " in _bad(capsys, *argv, "--quiet" if argv[0] != "convert" else "--json")
    assert "label" in (tmp / "train.csv").read_text()


@pytest.fixture
def rows(tmp_path, monkeypatch):
    """A click log as svmlight text, its first 2,000 rows for training, the rest for testing."""
    from fastcep.data_tools import make_click_log

    log = make_click_log(3_000, fields=5, bits=9, seed=1)
    for name, part in (("train.svm", slice(0, 2_000)), ("test.svm", slice(2_000, 3_000))):
        X = log.X[part]
        with open(tmp_path / name, "w") as fh:
            for i in range(X.shape[0]):
                cols = X.indices[X.indptr[i] : X.indptr[i + 1]]
                vals = X.data[X.indptr[i] : X.indptr[i + 1]]
                fh.write(
                    f"{log.y[part][i]} "
                    + " ".join(f"{j}:{v:g}" for j, v in zip(cols, vals, strict=True))
                    + "\n"
                )
    monkeypatch.chdir(tmp_path)
    return tmp_path, log


def test_sparse_rows_convert_fit_evaluate_and_stream(rows, capsys):
    tmp, log = rows
    code, out, _ = run(capsys, "convert", "train.svm", "train.h5", "--width", "512", "--json")
    assert code == 0 and json.loads(out) | {"seconds": 0} == {
        "file": "train.h5", "format": "fastcep-csr", "rows": 2_000, "n_features": 512,
        "nnz": int(log.X[:2_000].nnz), "seconds": 0,
    }  # fmt: skip
    code, out, _ = run(capsys, "info", "train.h5")
    assert code == 0 and "sparse rows, 2000 rows x 512 columns" in out
    # the text and its HDF5 copy fit to one model
    for data, model in (("train.svm", "a.h5"), ("train.h5", "b.h5")):
        argv = ["glm", "fit", data, "-o", model, "--schedule", "sequential", "--width", "512", "--quiet"]
        assert run(capsys, *argv)[0] == 0
    a, b = load_glm_model("a.h5"), load_glm_model("b.h5")
    np.testing.assert_array_equal(a.result.posterior.mean, b.result.posterior.mean)
    assert a.features is None and a.result.posterior.mean.size == 512
    code, out, _ = run(capsys, "glm", "evaluate", "a.h5", "test.svm", "--json")
    m = json.loads(out)
    res = fastcep.fit(log.X[:2_000, :512], log.y[:2_000], schedule="sequential")
    assert m["rows"] == 1_000 and m["auc"] == pytest.approx(
        res.auc(log.X[2_000:, :512], log.y[2_000:]), abs=1e-12
    )
    # the online pass, with a checkpoint that a second run resumes from (nothing left to do)
    argv = [
        "glm",
        "stream",
        "train.h5",
        "-o",
        "s.h5",
        "--batch-rows",
        "300",
        "--checkpoint",
        "ck.h5",
        "--json",
    ]
    code, out, err = run(capsys, *argv)
    assert code == 0 and json.loads(out)["rows"] == 2_000 and "rows/s" in err
    code, out, _ = run(capsys, *argv, "--resume", "--force")
    assert code == 0 and json.loads(out)["rows"] == 2_000
    streamed = fastcep.load("s.h5")
    assert streamed.options["rows_absorbed"] == 2_000
    code, out, _ = run(capsys, "info", "s.h5")
    assert "then 2,000 rows absorbed online" in out


def test_sparse_rows_errors(rows, capsys):
    tmp, _ = rows
    assert run(capsys, "glm", "fit", "train.svm", "-o", "a.h5", "--schedule", "sequential", "--quiet")[0] == 0
    (tmp / "bad.svm").write_text("1 3:1\n2 4:1\n")
    err = _bad(capsys, "glm", "evaluate", "a.h5", "bad.svm")
    assert "'bad.svm', line 2: the label 2 is not a binary label (0/1 or -1/1)" in err
    (tmp / "wide.svm").write_text("1 3:1\n0 100000:1\n")
    err = _bad(capsys, "glm", "evaluate", "a.h5", "wide.svm")
    assert "line 2: index 100000 is beyond the" in err
    (tmp / "t.csv").write_text("label,x\n1,2\n")
    err = _bad(capsys, "glm", "evaluate", "a.h5", "t.csv")
    assert "was fitted on sparse rows" in err
    err = _bad(capsys, "glm", "fit", "t.csv", "-o", "c.h5")
    assert "is a table: give --target COL" in err
    err = _bad(capsys, "glm", "fit", "train.svm", "-o", "c.h5", "--features", "x")
    assert "--features names a table's columns" in err
    err = _bad(capsys, "convert", "t.csv", "t.h5", "--width", "8")
    assert "--target, --hash and --width convert" in err
    err = _bad(capsys, "fit", "a.h5", "-o", "m.h5", "--model", "cp", "--rank", "2")
    assert "it is a regression model file" in err


def test_convert_hashes_a_csv_table(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.csv").write_text("click,site,hour\n1,a.com,3\n0,b.com,4\n")
    code, out, _ = run(
        capsys, "convert", "t.csv", "t.h5", "--target", "click", "--hash", "site", "--hash-bits", "8"
    )
    assert code == 0 and "2 rows, 256 columns, 4 nonzeros" in out
    assert fastcep.io.csr.read_csr("t.h5").y.tolist() == [1.0, 0.0]


def test_stream_never_replaces_another_kind_of_file_with_its_checkpoint(rows, capsys):
    tmp, _ = rows
    (tmp / "notes.csv").write_text("a,b\n1,2\n")
    err = _bad(capsys, "glm", "stream", "train.svm", "-o", "s.h5", "--checkpoint", "notes.csv", "--quiet")
    assert "--checkpoint" in err and "--force" in err
    assert (tmp / "notes.csv").read_text() == "a,b\n1,2\n"
