"""Regression model files (``fastcep.io.glm_model``), data tables (``fastcep.io.table``) and what
a file holds (``fastcep.io.kinds``)."""

import json

import h5py
import numpy as np
import pytest
from edits import edited

import fastcep
from fastcep.data_tools import make_regression_simulation
from fastcep.io import FileFormatError, file_kind, load_glm_model, read_table, save_glm_model


@pytest.fixture(scope="module")
def fitted():
    X, y, _ = make_regression_simulation("logistic", "gaussian", n=300, d=3, seed=1)
    return X, y, fastcep.fit(X, y, model="logistic", method="ep")


def test_a_model_file_predicts_as_the_fit(fitted, tmp_path):
    X, y, res = fitted
    save_glm_model(res, tmp_path / "m.h5", ["a", "b", "c"], target="label")
    m = load_glm_model(tmp_path / "m.h5")
    assert m.features == ("a", "b", "c") and m.target == "label"
    got = m.result
    assert (got.model, got.method, got.n_iter, got.converged, got.stop_reason) == (
        "logistic", "ep", res.n_iter, res.converged, res.stop_reason,
    )  # fmt: skip
    np.testing.assert_array_equal(got.posterior.mean, res.posterior.mean)
    np.testing.assert_array_equal(got.posterior.var, res.posterior.var)
    assert got.intercept == res.intercept
    np.testing.assert_array_equal(got.predict_proba(X), res.predict_proba(X))
    assert got.log_likelihood(X, y) == res.log_likelihood(X, y)
    np.testing.assert_array_equal(got.trace.change, res.trace.change)
    assert got.options["damping"] == res.options["damping"] and got.state is None
    with h5py.File(tmp_path / "m.h5") as f:
        assert f.attrs["format"] == "fastcep-glm-model" and f.attrs["format_version"] == 5
        assert json.loads(f.attrs["likelihood"]) == {"link": "logistic"}
        assert sorted(f["posterior"]) == ["mean", "var"] and sorted(f["intercept"]) == ["mean", "var"]
        # a centred fit keeps its centre and its fitted intercept, b_c
        np.testing.assert_array_equal(f["center"][()], res.center)
        assert f["intercept/mean"][()] == res.centered_intercept.mean
    assert got.centered_intercept == res.centered_intercept


def test_a_version_2_file_of_an_uncentred_fit_still_loads(fitted, tmp_path):
    """Files before version 3 hold un-centred fits: no ``center``, the intercept b itself."""
    X, y, _ = fitted
    res = fastcep.fit(X, y, model="logistic", method="ep", center=False)
    save_glm_model(res, tmp_path / "m.h5", ["a", "b", "c"])
    _corrupt(tmp_path / "m.h5", lambda f: f.attrs.__setitem__("format_version", 2))
    got = load_glm_model(tmp_path / "m.h5").result
    assert got.center is None and got.intercept == res.intercept
    np.testing.assert_array_equal(got.predict_proba(X), res.predict_proba(X))


def test_without_an_intercept(tmp_path):
    X, y, _ = make_regression_simulation("probit", "gaussian", n=200, d=2, seed=0)
    res = fastcep.fit(X, y, fit_intercept=False)
    save_glm_model(res, tmp_path / "m.h5", ["u", "v"])
    m = load_glm_model(tmp_path / "m.h5")
    assert m.result.intercept is None and m.target == ""
    np.testing.assert_array_equal(m.result.predict_proba(X), res.predict_proba(X))


def test_save_checks_its_arguments(fitted, tmp_path):
    _, _, res = fitted
    with pytest.raises(ValueError, match="3 distinct names"):
        save_glm_model(res, tmp_path / "m.h5", ["a", "a", "b"])
    with pytest.raises(ValueError, match="3 distinct names"):
        save_glm_model(res, tmp_path / "m.h5", ["a", "b"])
    with pytest.raises(TypeError, match="RegressionResult"):
        save_glm_model(object(), tmp_path / "m.h5", ["a"])
    assert not (tmp_path / "m.h5").exists()


def _corrupt(path, edit):
    """Apply ``edit`` and sign and seal the file again: only the field checks can catch it (an
    unsigned change fails the checksum, ``tests/test_files.py``)."""
    with edited(path) as f:
        edit(f)


def _set(name, value):
    def edit(f):
        del f[name]
        f[name] = value

    return edit


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda f: f.attrs.__setitem__("format", "fastcep-cp-model"), "format attribute is 'fastcep-cp-mo"),
        (lambda f: f.attrs.__setitem__("format_version", 6), "format version 6, this fastcep reads 5"),
        (lambda f: f.attrs.__setitem__("likelihood", '{"link": "probit"}'), "its likelihood's parameters"),
        (lambda f: f.attrs.__setitem__("likelihood", '{"var": 1.0}'), "its likelihood's parameters"),
        (lambda f: f.attrs.__setitem__("model", "cauchit"), "unknown model 'cauchit'"),
        (lambda f: f.attrs.__setitem__("method", "mcmc"), "unknown method 'mcmc'"),
        (_set("posterior/mean", np.array([0.1, np.nan, 0.3])), "the posterior holds non-finite numbers"),
        (_set("posterior/var", np.array([0.1, 0.0, 0.3])), "a posterior variance is not positive"),
        (_set("posterior/var", np.array([0.1, 0.2])), "3 features but posterior arrays of shapes"),
        (_set("intercept/var", -1.0), "the intercept's variance is not positive"),
        (_set("intercept/mean", np.inf), "the intercept holds non-finite numbers"),
        (lambda f: f.__delitem__("posterior/mean"), "missing or unreadable content"),
        # (a version 3 file always names its features)
        (lambda f: (f.__delitem__("features"), f.attrs.__setitem__("format_version", 3)), "missing or"),
        (_set("features", np.array(["a", "a", "b"], dtype=object)), "its feature names repeat"),
    ],
)  # fmt: skip
def test_load_refuses_bad_files(fitted, tmp_path, edit, message):
    _, _, res = fitted
    path = tmp_path / "m.h5"
    save_glm_model(res, path, ["a", "b", "c"])
    _corrupt(path, edit)
    with pytest.raises(FileFormatError, match="is not a valid fastcep regression model file: " + message):
        load_glm_model(path)


def test_load_refuses_other_files(tmp_path):
    (tmp_path / "t.txt").write_text("1,1,1,0.5\n")
    with pytest.raises(FileFormatError, match="cannot be opened as HDF5"):
        load_glm_model(tmp_path / "t.txt")
    with pytest.raises(FileNotFoundError, match="no such file"):
        load_glm_model(tmp_path / "missing.h5")


# ------------------------------------------------------------------------------- tables
def test_read_csv(tmp_path):
    path = tmp_path / "d.csv"
    path.write_bytes(b"\xef\xbb\xbfx, y ,label\r\n1.5,2,1\r\n\r\n-3,4e-1,0\r\n")
    table = read_table(path)
    assert table.names == ("x", "y", "label") and table.n == 2
    np.testing.assert_array_equal(table.columns["y"], [2.0, 0.4])
    table = read_table(path, ["label", "x"])
    assert list(table.columns) == ["label", "x"]
    path.write_text("x\ty\n1\t2\n")
    np.testing.assert_array_equal(read_table(path, delimiter="\t").columns["y"], [2.0])


@pytest.mark.parametrize(
    "text, message",
    [
        ("x,y\n1,2\n3,oops\n", "line 3, column 'y': 'oops' is not a number"),
        ("x,y\n1,2\n3,\n", "line 3, column 'y': an empty cell is not a number"),
        ("x,y\n1,2\n3,4,5\n", "line 3 has 3 fields, the header 2"),
        ("x,x\n1,2\n", "the header names column 'x' twice"),
        ("", "the file is empty"),
        ("x,y\n", "it has no rows"),
    ],
)
def test_read_csv_refuses_bad_tables(tmp_path, text, message):
    (tmp_path / "d.csv").write_text(text)
    with pytest.raises(FileFormatError, match=message):
        read_table(tmp_path / "d.csv")


def test_a_missing_column_lists_the_tables(tmp_path):
    (tmp_path / "d.csv").write_text("x,y\n1,2\n")
    with pytest.raises(FileFormatError, match="no column 'z'; its columns are 'x', 'y'"):
        read_table(tmp_path / "d.csv", ["x", "z"])


def test_read_hdf5_table(tmp_path):
    path = tmp_path / "d.h5"
    with h5py.File(path, "w") as f:
        f["b"] = np.array([1.0, 2.0])
        f["a"] = np.array([3, 4], dtype=np.int32)
        f["matrix"] = np.zeros((2, 2))  # (not a column)
    table = read_table(path)
    assert table.names == ("a", "b") and table.n == 2
    np.testing.assert_array_equal(table.columns["a"], [3.0, 4.0])
    with h5py.File(path, "a") as f:
        f.attrs["columns"] = ["b", "a"]
    assert read_table(path).names == ("b", "a")
    with h5py.File(path, "a") as f:
        f["c"] = np.array([1.0, 2.0, 3.0])
    with pytest.raises(FileFormatError, match="no column 'c'; its columns are 'b', 'a'"):
        read_table(path, ["a", "c"])  # (the attribute lists the columns)
    with h5py.File(path, "a") as f:
        f.attrs["columns"] = ["b", "a", "c"]
    with pytest.raises(FileFormatError, match="different lengths"):
        read_table(path, ["a", "c"])
    fastcep.write_tensor(tmp_path / "t.h5", np.array([[0, 0], [1, 1]]), np.array([1.0, 2.0]))
    with pytest.raises(FileFormatError, match="fastcep file of format 'fastcep-tensor'"):
        read_table(tmp_path / "t.h5")


def test_file_kind(tmp_path, fitted):
    (tmp_path / "t.txt").write_text("1,2,3,0.5\n")
    (tmp_path / "d.csv").write_text("x,y,label\n1,2,1\n")
    (tmp_path / "notes.txt").write_text("hello\n")
    (tmp_path / "b.bin").write_bytes(b"\x00\x01\x02")
    (tmp_path / "e").write_bytes(b"")
    with h5py.File(tmp_path / "other.h5", "w") as f:
        f["x"] = [1.0]
    save_glm_model(fitted[2], tmp_path / "m.h5", ["a", "b", "c"])
    kinds = {
        name: file_kind(tmp_path / name)
        for name in ("t.txt", "d.csv", "notes.txt", "b.bin", "e", "other.h5", "m.h5", "missing")
    }
    assert kinds == {
        "t.txt": "numbers",
        "d.csv": "table",
        "notes.txt": "text",
        "b.bin": "binary",
        "e": "empty",
        "other.h5": "hdf5",
        "m.h5": "fastcep-glm-model",
        "missing": "missing",
    }


def test_a_learned_likelihood_round_trips_and_version_1_files_still_load(tmp_path):
    rng = np.random.default_rng(3)
    X = rng.standard_normal((200, 2))
    y = X @ np.array([1.0, 2.0]) + rng.standard_normal(200)
    res = fastcep.fit(X, y, model="gaussian")
    save_glm_model(res, tmp_path / "g.h5", ["a", "b"])
    got = load_glm_model(tmp_path / "g.h5").result
    assert got.likelihood == res.likelihood and got.likelihood.var == res.likelihood.var
    np.testing.assert_array_equal(got.predict(X, return_var=True), res.predict(X, return_var=True))
    _corrupt(tmp_path / "g.h5", lambda f: f.attrs.__setitem__("likelihood", '{"var": -2.0}'))
    with pytest.raises(FileFormatError, match="its likelihood's parameters"):
        load_glm_model(tmp_path / "g.h5")
    # a file of format 1 (binary likelihoods, no likelihood attribute) reads as before
    Xb, yb, _ = make_regression_simulation("probit", "gaussian", n=200, d=2, seed=0)
    old = fastcep.fit(Xb, yb)
    save_glm_model(old, tmp_path / "v1.h5", ["a", "b"])
    _corrupt(
        tmp_path / "v1.h5",
        lambda f: (f.attrs.__delitem__("likelihood"), f.attrs.__setitem__("format_version", 1)),
    )
    assert load_glm_model(tmp_path / "v1.h5").result.likelihood == old.likelihood


def test_a_custom_likelihood_is_not_written(tmp_path):
    numba = pytest.importorskip("numba")

    @numba.njit
    def logpdf(y, f):
        return -0.5 * (y - f) ** 2

    res = fastcep.fit(np.eye(3), np.ones(3), model="gaussian")
    res.likelihood = fastcep.likelihoods.Custom(logpdf)
    with pytest.raises(ValueError, match="a Custom likelihood cannot be written"):
        save_glm_model(res, tmp_path / "c.h5", ["a", "b", "c"])
    assert not (tmp_path / "c.h5").exists()
