"""Files of labelled sparse rows (issue 39): svmlight text, the sparse-row HDF5 file, hashed CSV
tables, the online pass over a file (``stream_file``) with checkpoints and resume, read-ahead."""

import os

import h5py
import numpy as np
import pytest
import scipy.sparse as sp

import fastcep
from fastcep.data_tools import make_click_log
from fastcep.glm.stream import stream_file
from fastcep.io.csr import CSRReader, CSRWriter, read_csr, svmlight_to_csr, write_csr
from fastcep.io.files import FileFormatError
from fastcep.io.hashed import hash_csv_to_csr
from fastcep.io.prefetch import read_ahead
from fastcep.io.svmlight import iter_svmlight, read_svmlight

RCV1 = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "rcv1")
RCV1_TRAIN, RCV1_TEST = (os.path.join(RCV1, f"rcv1-small-{part}.svm") for part in ("train", "test"))
needs_rcv1 = pytest.mark.skipif(not os.path.exists(RCV1_TRAIN), reason="../shared/data/rcv1 is absent")


def _svmlight(path, X, y, fmt="%.17g"):
    """Write rows as svmlight text (our own writer, for the round trips)."""
    X = sp.csr_array(X)
    with open(path, "w") as fh:
        for i in range(X.shape[0]):
            lo, hi = X.indptr[i], X.indptr[i + 1]
            fields = " ".join(f"{j}:{fmt % v}" for j, v in zip(X.indices[lo:hi], X.data[lo:hi], strict=True))
            fh.write(f"{y[i]:g} {fields}\n")


@pytest.fixture(scope="module")
def clicks(tmp_path_factory):
    log = make_click_log(3_000, fields=6, bits=10, seed=5)
    path = tmp_path_factory.mktemp("clicks") / "clicks.svm"
    _svmlight(path, log.X, log.y)
    return log, path


def test_svmlight_reads_what_scikit_learn_reads(clicks):
    from sklearn.datasets import load_svmlight_file

    log, path = clicks
    rows = read_svmlight(path, n_features=1024)
    X, y = load_svmlight_file(str(path), n_features=1024, zero_based=True)
    assert (rows.X != X).nnz == 0 and (rows.X != log.X).nnz == 0
    np.testing.assert_array_equal(rows.y, y)
    np.testing.assert_array_equal(rows.lines, np.arange(1, 3_001))
    # any block size reads the same rows
    parts = list(iter_svmlight(path, rows=700, n_features=1024))
    assert [p.first for p in parts] == [0, 700, 1400, 2100, 2800]
    assert (sp.vstack([p.X for p in parts]) != rows.X).nnz == 0


@needs_rcv1
def test_rcv1_reads_as_scikit_learn_reads_it():
    from sklearn.datasets import load_svmlight_file

    rows = read_svmlight(RCV1_TRAIN)
    X, y = load_svmlight_file(RCV1_TRAIN, zero_based=True)
    assert rows.X.shape == (1_000, 47_118) == X.shape and rows.X.nnz == 77_739
    assert (rows.X != X).nnz == 0 and np.array_equal(rows.y, y)


def test_svmlight_comments_blank_lines_order_and_repeats(tmp_path):
    path = tmp_path / "a.svm"
    path.write_bytes(b"# a header comment\n1 3:1 1:2 3:4\n\n-1 2:5 # a comment\n+1 0:0 4:1e-3\n")
    with pytest.warns(
        UserWarning, match="1 row hold a column twice .first: line 2.; their values are summed"
    ):
        rows = read_svmlight(path)
    np.testing.assert_array_equal(rows.X.toarray(), [[0, 2, 0, 5, 0], [0, 0, 5, 0, 0], [0, 0, 0, 0, 1e-3]])
    assert rows.X.has_sorted_indices and rows.X.nnz == 4  # (the explicit zero dropped)
    np.testing.assert_array_equal(rows.y, [1, -1, 1])
    np.testing.assert_array_equal(rows.lines, [2, 4, 5])
    shifted = tmp_path / "b.svm"
    shifted.write_bytes(b"1 1:2 3:4\n")
    np.testing.assert_array_equal(read_svmlight(shifted, index_base=1).X.toarray(), [[2, 0, 4]])


@pytest.mark.parametrize(
    "line, message",
    [
        (b"0 a:2", "line 2: the index 'a' is not an integer"),
        (b"0 1.5:2", "line 2: the index '1.5' is not an integer"),
        (b"0 -3:1", "line 2: the index -3 is negative; indices are 0-based here"),
        (b"0 3:", "line 2: the field '3:' is a missing value"),
        (b"0 :3", "line 2: the field ':3' is not index:value"),
        (b"0 1:2:3 5", "line 2: the field '1:2:3' is not index:value"),
        (b"1:2 3 4:5", "line 2: the label '1:2' is not a number"),
        (b"x 1:2", "line 2: the label 'x' is not a number"),
        (b"0 qid:3 1:2", "line 2: 'qid:3' is a query id"),
        (b"0 1:nan", "line 2: the value 'nan' of index 1 is not finite"),
        (b"0 1:inf", "line 2: the value 'inf' of index 1 is not finite"),
        (b"0 1:zz", "line 2: the value 'zz' of index 1 is not a number"),
        (b"inf 1:2", "line 2: the label 'inf' is not finite"),
        (b"0 9:1", "line 2: index 9 is beyond the 5 columns asked for"),
    ],
)
def test_bad_svmlight_lines_are_named(tmp_path, line, message):
    path = tmp_path / "bad.svm"
    path.write_bytes(b"1 1:1\n" + line + b"\n1 2:1\n")
    with pytest.raises(FileFormatError, match=message.replace("(", r"\(").replace(")", r"\)")):
        read_svmlight(path, n_features=5)
    with pytest.raises(FileFormatError, match="line 2"):  # (and nothing is written)
        svmlight_to_csr(path, tmp_path / "out.h5", n_features=5)
    assert not (tmp_path / "out.h5").exists()


def test_one_based_svmlight_index_zero_is_refused(tmp_path):
    path = tmp_path / "a.svm"
    path.write_bytes(b"1 1:1\n0 0:1\n")
    with pytest.raises(FileFormatError, match="line 2: the index 0 is below the index base 1"):
        read_svmlight(path, index_base=1)


def test_sparse_row_file_round_trip_blocks_and_atomicity(clicks, tmp_path):
    log, path = clicks
    n, d, nnz = svmlight_to_csr(path, tmp_path / "c.h5", rows=1_000)
    assert (n, nnz) == (3_000, log.X.nnz) and d == int(log.X.indices.max()) + 1
    back = read_csr(tmp_path / "c.h5")
    assert (back.X != log.X[:, :d]).nnz == 0 and np.array_equal(back.y, log.y)
    with CSRReader(tmp_path / "c.h5") as r:
        parts = list(r.blocks(1_100, start=200))
        assert [p.first for p in parts] == [200, 1300, 2400] and parts[-1].y.size == 600
        assert (sp.vstack([p.X for p in parts]) != back.X[200:]).nnz == 0
    # a width given: kept, and a column beyond it refused
    write_csr(tmp_path / "w.h5", log.X, log.y)
    assert read_csr(tmp_path / "w.h5").X.shape == (3_000, 1024)
    with (
        pytest.raises(ValueError, match="column 7 is beyond the file's 5 columns"),
        CSRWriter(tmp_path / "x.h5", 5) as w,
    ):
        w.append(sp.csr_array(([1.0], [7], [0, 1]), shape=(1, 9)), [1.0])
    with pytest.raises(ValueError, match="non-finite value in row 1"), CSRWriter(tmp_path / "x.h5") as w:
        w.append(sp.csr_array(np.array([[1.0, 0.0], [0.0, np.nan]])), [1.0, 0.0])
    assert not (tmp_path / "x.h5").exists()


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda f: f["indices"].__setitem__(3, 10_000), "row 0 holds a column outside 0..1023"),
        (lambda f: f["indices"].__setitem__(1, 0), "row 0 holds indices not sorted and distinct"),
        (lambda f: f["data"].__setitem__(5, np.inf), "row 0 holds a non-finite value"),
        (lambda f: f["y"].__setitem__(2, np.nan), "row 2 has a non-finite label"),
        (lambda f: f.attrs.__setitem__("nnz", 5), "datasets of lengths"),
        (lambda f: f.attrs.__setitem__("format_version", 2), "format version 2, this fastcep reads 1"),
        (lambda f: f["indptr"].__setitem__(1, 10**9), r"the pointers of row 0 \(indptr\[0\] = 0, indptr\[1"),
        # (issue 56: the rows read as empty; a pointer that falls named no row)
        (
            lambda f: f["indptr"].__setitem__(slice(None), 0),
            "its row pointers run from 0 to 0, not from 0 to its",
        ),
        (
            lambda f: f["indptr"].__setitem__(1500, 5),
            r"the pointers of row 1499 \(indptr\[1499\] = \d+, indp",
        ),
    ],
)
def test_a_damaged_sparse_row_file_is_refused_by_name(clicks, tmp_path, damage, message):
    log, _ = clicks
    path = tmp_path / "c.h5"
    write_csr(path, log.X, log.y)
    with h5py.File(path, "r+") as f:
        damage(f)
    with pytest.raises(FileFormatError, match=message):
        with CSRReader(path) as r:
            r.read()


def test_hashed_csv_is_feature_hasher_of_its_rows(tmp_path):
    from sklearn.feature_extraction import FeatureHasher

    path = tmp_path / "t.csv"
    path.write_text("click,site,app,age\n1,a.com,x,30\n0,b.com,,41.5\n\n0,a.com,y,0\n")
    n, d, nnz = hash_csv_to_csr(path, tmp_path / "t.h5", "click", ["site", "app"], n_features=256)
    rows = read_csr(tmp_path / "t.h5")
    dicts = [
        {"site=a.com": 1, "app=x": 1, "age": 30.0},
        {"site=b.com": 1, "app=": 1, "age": 41.5},
        {"site=a.com": 1, "app=y": 1},
    ]
    want = FeatureHasher(256, input_type="dict", alternate_sign=False).transform(dicts)
    assert (n, d, nnz) == (3, 256, 8) and (rows.X != want).nnz == 0
    np.testing.assert_array_equal(rows.y, [1, 0, 0])
    path.write_text("click,site,age\n1,a.com,30\n0,b.com,old\n")
    with pytest.raises(FileFormatError, match="line 3: column 'age': 'old' is not a number; hash it"):
        hash_csv_to_csr(path, tmp_path / "u.h5", "click", ["site"])
    with pytest.raises(FileFormatError, match="line 1: the header has no column 'app'"):
        hash_csv_to_csr(path, tmp_path / "u.h5", "click", ["app"])
    assert not (tmp_path / "u.h5").exists()


def test_read_ahead_hands_on_errors_and_stops_when_closed():
    import threading

    def items():
        yield 1
        yield 2
        raise RuntimeError("block 3 is damaged")

    got = []
    with pytest.raises(RuntimeError, match="block 3 is damaged"):
        for item in read_ahead(items()):
            got.append(item)
    assert got == [1, 2]
    before = threading.active_count()
    gen = read_ahead(iter(range(10**6)))
    assert next(gen) == 0
    gen.close()
    assert threading.active_count() == before


def _updates(log, batch, forget, width):
    """The stream by hand: the prior, then ``update`` batch by batch."""
    opts = dict(prior_var=1.0, fit_intercept=True, intercept_var=100.0, tol=1e-5, n_threads=None)
    res = fastcep.RegressionResult.prior("probit", "cep1", width, opts)
    for lo in range(0, log.y.size, batch):
        res.update(log.X[lo : lo + batch, :width], log.y[lo : lo + batch], forget=forget)
    return res


def test_a_stream_is_its_updates_from_text_or_hdf5(clicks, tmp_path):
    log, path = clicks
    svmlight_to_csr(path, tmp_path / "c.h5", n_features=1024)
    by_hand = _updates(log, 500, 1e-4, 1024)
    for source in (path, tmp_path / "c.h5"):
        res = stream_file(source, batch_rows=500, forget=1e-4, n_features=1024)
        np.testing.assert_array_equal(res.posterior.mean, by_hand.posterior.mean)
        np.testing.assert_array_equal(res.posterior.var, by_hand.posterior.var)
        assert res.intercept == by_hand.intercept
        info = res.options["stream"]
        assert info["rows"] == 3_000 and info["batch_rows"] == 500 and info["forget"] == 1e-4


def test_a_resumed_stream_ends_with_the_bits_of_an_uninterrupted_one(clicks, tmp_path, monkeypatch):
    log, path = clicks
    kw = dict(batch_rows=250, forget=1e-3, n_features=1024, checkpoint_every=3)
    whole = stream_file(path, checkpoint=tmp_path / "whole.h5", **kw)
    calls = {"n": 0}
    update = fastcep.RegressionResult.update

    def dies_in_batch_8(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 8:
            raise KeyboardInterrupt
        return update(self, *args, **kwargs)

    monkeypatch.setattr(fastcep.RegressionResult, "update", dies_in_batch_8)
    with pytest.raises(KeyboardInterrupt):
        stream_file(path, checkpoint=tmp_path / "ck.h5", **kw)
    monkeypatch.setattr(fastcep.RegressionResult, "update", update)
    assert fastcep.load(tmp_path / "ck.h5").options["stream"]["rows"] == 6 * 250
    resumed = stream_file(path, checkpoint=tmp_path / "ck.h5", resume=True, **kw)
    np.testing.assert_array_equal(resumed.posterior.mean, whole.posterior.mean)
    np.testing.assert_array_equal(resumed.posterior.var, whole.posterior.var)
    assert resumed.intercept == whole.intercept and resumed.options["stream"]["rows"] == 3_000
    # the checkpoint is bound to its file, batch size and forgetting
    with pytest.raises(ValueError, match="is of another stream"):
        stream_file(path, checkpoint=tmp_path / "ck.h5", resume=True, **dict(kw, batch_rows=300))


def _padded(path, log, y):
    """The rows as svmlight text whose lines end with a comment of 1,000 characters (3 MB for 3,000
    rows: more than the first and last MiB)."""
    X = sp.csr_array(log.X)
    with open(path, "w") as fh:
        for i in range(X.shape[0]):
            lo, hi = X.indptr[i], X.indptr[i + 1]
            fields = " ".join(f"{j}:{v:.17g}" for j, v in zip(X.indices[lo:hi], X.data[lo:hi], strict=True))
            fh.write(f"{y[i]:g} {fields} # {'x' * 1000}\n")


def test_a_checkpoint_is_bound_to_every_row_it_absorbed(clicks, tmp_path, monkeypatch):
    """Issue 56: a checkpoint was bound to its file's size and first and last MiB, so a label
    changed in the middle of the rows it had absorbed was resumed as if unchanged."""
    log, _ = clicks
    path = tmp_path / "padded.svm"
    _padded(path, log, log.y)
    kw = dict(batch_rows=250, forget=1e-3, n_features=1024, checkpoint_every=3)
    update, calls = fastcep.RegressionResult.update, {"n": 0}

    def dies_in_batch_8(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 8:
            raise KeyboardInterrupt
        return update(self, *args, **kwargs)

    monkeypatch.setattr(fastcep.RegressionResult, "update", dies_in_batch_8)
    with pytest.raises(KeyboardInterrupt):
        stream_file(path, checkpoint=tmp_path / "ck.h5", **kw)
    monkeypatch.setattr(fastcep.RegressionResult, "update", update)
    assert fastcep.load(tmp_path / "ck.h5").options["stream"]["rows"] == 1_500
    size = os.path.getsize(path)
    row = 1_100 + int(np.flatnonzero(log.y[1_100:1_400] == 0)[0])  # (in the middle MiB)
    _padded(path, log, np.where(np.arange(log.y.size) == row, 1.0, log.y))
    assert os.path.getsize(path) == size
    with pytest.raises(ValueError, match="was written for other data: the first 1,500 rows of"):
        stream_file(path, checkpoint=tmp_path / "ck.h5", resume=True, **kw)
    _padded(path, log, log.y)  # (the rows it absorbed: resumed)
    resumed = stream_file(path, checkpoint=tmp_path / "ck.h5", resume=True, **kw)
    assert resumed.options["stream"]["rows"] == 3_000


def test_a_refused_resume_names_the_settings_that_differ(clicks, tmp_path, capsys):
    """Issue 56: the refusal printed the checkpoint's and the run's dictionaries."""
    from fastcep.cli import main

    log, _ = clicks
    path = tmp_path / "few.svm"
    _svmlight(path, log.X[:500], log.y[:500])
    stream_file(path, batch_rows=250, forget=1e-3, n_features=1024, checkpoint=tmp_path / "ck.h5")
    argv = ["glm", "stream", str(path), "-o", str(tmp_path / "m.h5"), "--checkpoint", str(tmp_path / "ck.h5")]
    assert main([*argv, "--resume", "--width", "1024", "--batch-rows", "300", "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "{" not in err
    want = (
        "other settings (batch_rows 250 in the checkpoint, 300 now; forget 0.001 in the checkpoint, 0.0 now)"
    )
    assert want in err


def test_write_csr_refuses_a_broken_structure():
    """Issue 56: a row pointer that falls corrupted the heap in scipy's sort (the process died:
    "munmap_chunk(): invalid pointer"), and negative or too large columns were written into a
    file that the reader then refused. Run in a child process, so that a crash fails the test."""
    import json
    import subprocess
    import sys

    code = """if True:
        import json, numpy as np, scipy.sparse as sp, tempfile, os
        from fastcep.io.csr import CSRWriter, write_csr
        out, folder = [], tempfile.mkdtemp()
        for ptr, ind in (([0, 2, 1, 3], [1, 2, 3]), ([0, 1, 2, 3], [1, -2, 3]), ([0, 1, 2, 3], [1, 20, 3])):
            X = sp.csr_array((np.ones(3), np.array(ind), np.array(ptr)), shape=(3, 10))
            for how in ("write_csr", "append"):
                path = os.path.join(folder, "x.h5")
                try:
                    if how == "write_csr":
                        write_csr(path, X, np.zeros(3))
                    else:
                        with CSRWriter(path) as w:
                            w.append(sp.csr_array(np.ones((2, 10))), np.zeros(2))
                            w.append(X, np.zeros(3))
                    out.append("written")
                except ValueError as exc:
                    out.append(str(exc) + (" (no file)" if not os.path.exists(path) else ""))
        print(json.dumps(out))
    """
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2_000:]
    falls, negative, beyond = (json.loads(run.stdout)[k : k + 2] for k in (0, 2, 4))
    head = (
        "write_csr: X is not a valid sparse matrix: ",
        "CSRWriter.append: X is not a valid sparse matrix: ",
    )
    falling = "the pointers of row {} (indptr[1] = 2, indptr[2] = 1) do not rise from 0 within its 3 indices"
    assert falls == [f"{head[0]}{falling.format(1)}. (no file)", f"{head[1]}{falling.format(3)}. (no file)"]
    assert negative == [
        f"{h}row {r} holds column -2, outside 0..9. (no file)" for h, r in zip(head, (1, 3), strict=True)
    ]
    assert beyond == [
        f"{h}row {r} holds column 20, outside 0..9. (no file)" for h, r in zip(head, (1, 3), strict=True)
    ]


def test_stream_labels_are_checked_by_line(tmp_path):
    path = tmp_path / "a.svm"
    path.write_bytes(b"1 1:1\n0 2:1\n\n2 1:1\n")
    with pytest.raises(FileFormatError, match="line 4: the label 2 is not a binary label"):
        stream_file(path, batch_rows=2)
    path.write_bytes(b"-1 1:1\n1 2:1\n")
    res = stream_file(path, "logistic", n_features=3)
    assert res.posterior.mean.size == 3 and res.options["stream"]["rows"] == 2
    with pytest.raises(ValueError, match="resume=True needs the checkpoint"):
        stream_file(path, resume=True)
    with pytest.raises(FileFormatError, match="is not svmlight text or a sparse-row HDF5 file"):
        (tmp_path / "t.csv").write_text("a,b\n1,2\n")
        stream_file(tmp_path / "t.csv")


@needs_rcv1
def test_rcv1_from_the_command_line_reaches_scikit_learn(tmp_path):
    """Issue 39: the RCV1 sample's test AUC from `fastcep glm fit` and `evaluate` on the svmlight
    files is within 0.01 of the best scikit-learn logistic regression over C."""
    import contextlib
    import io
    import json

    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score

    from fastcep.cli import main

    train, test = read_svmlight(RCV1_TRAIN, 47_118), read_svmlight(RCV1_TEST, 47_118)
    best = 0.0
    for C in (0.1, 1.0, 10.0, 100.0, 1000.0):
        model = LogisticRegression(C=C, max_iter=5_000).fit(train.X, train.y)
        best = max(best, roc_auc_score(test.y, model.predict_proba(test.X)[:, 1]))
    model = str(tmp_path / "m.h5")
    fit = [
        "glm",
        "fit",
        RCV1_TRAIN,
        "-o",
        model,
        "--model",
        "logistic",
        "--schedule",
        "sequential",
        "--quiet",
    ]
    assert main(fit) == 0
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["glm", "evaluate", model, RCV1_TEST, "--json"]) == 0
    auc = json.loads(buf.getvalue())["auc"]
    assert auc >= best - 0.01, (auc, best)
