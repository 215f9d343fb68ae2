"""Inputs read once (issue 56): a pipe, a FIFO or /dev/stdin gives every line to every verb that
reads text; HDF5 through a pipe is refused in one line; svmlight is told from the other text by
its first rows (a row without features, a byte-order mark, qid, gzip); ``--skip-header`` checks
that there is a header. Every command that could block runs in a subprocess under a timeout."""

import gzip
import json
import pathlib
import subprocess
import sys
import warnings

import numpy as np
import pytest

import fastcep
from fastcep.cli import main
from fastcep.io import file_kind, read_csr, read_svmlight, read_table
from fastcep.io.files import FileFormatError

ROOT = pathlib.Path(__file__).resolve().parents[1]
ROWS = 2_000


def _text_tensor(rng):
    return "".join(
        f"{i},{j},{k},{v:.6f}\n"
        for i, j, k, v in zip(
            rng.integers(1, 31, ROWS), rng.integers(1, 21, ROWS), rng.integers(1, 11, ROWS), rng.random(ROWS),
            strict=True,
        )
    )  # fmt: skip


def _svmlight(rng):
    lines = []
    for _ in range(ROWS):
        cols = np.sort(rng.choice(50, 5, replace=False))
        vals = rng.standard_normal(5)
        label = int(vals @ np.where(cols < 25, 1.0, -1.0) + 0.5 * rng.standard_normal() > 0)
        lines.append(f"{label} " + " ".join(f"{c}:{v:.5f}" for c, v in zip(cols, vals, strict=True)))
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    rng = np.random.default_rng(56)
    tmp = tmp_path_factory.mktemp("inputs")
    (tmp / "t.txt").write_text(_text_tensor(rng))
    (tmp / "r.svm").write_text(_svmlight(rng))
    cats = rng.integers(0, 20, ROWS)
    rows = (
        f"c{c},{x:.4f},{y}"
        for c, x, y in zip(cats, rng.random(ROWS), rng.integers(2, size=ROWS), strict=True)
    )
    (tmp / "h.csv").write_text("cat,num,y\n" + "\n".join(rows) + "\n")
    X = rng.standard_normal((ROWS, 2))
    ys = (X[:, 0] + rng.standard_normal(ROWS) > 0).astype(int)
    (tmp / "d.csv").write_text(
        "a,b,y\n" + "".join(f"{a:.5f},{b:.5f},{y}\n" for (a, b), y in zip(X, ys, strict=True))
    )
    fastcep.write_tensor(tmp / "t.h5", np.array([[0, 0], [1, 1]]), np.array([1.0, 2.0]))
    return tmp


def _same_tensor(a, b):
    ra, rb = fastcep.read_tensor(a), fastcep.read_tensor(b)
    np.testing.assert_array_equal(ra[0], rb[0])
    np.testing.assert_array_equal(ra[1], rb[1])


# the cases run through pipes and FIFOs, all in one subprocess (each under an alarm there):
# (the command line, "@" the pipe's path; the file fed through it; a pipe or a FIFO)
CASES = {
    # cat t.txt | fastcep convert /dev/stdin t.h5  (gave 1,488 of 2,000 entries, or a broken first line)
    "tensor-stdin": ("convert @ {tmp}/stdin.h5 --json", "t.txt", "stdin"),
    "tensor-fifo": ("convert @ {tmp}/fifo.h5 --json", "t.txt", "fifo"),
    "svmlight-pipe": ("convert @ {tmp}/rows.h5 --json", "r.svm", "pipe"),
    "hashed-fifo": ("convert @ {tmp}/hashed.h5 --target y --hash cat --hash-bits 8 --json", "h.csv", "fifo"),
    "glm-fit-csv": ("glm fit @ --target y -o {tmp}/mc.h5 --json --quiet", "d.csv", "pipe"),
    "glm-fit-svmlight": ("glm fit @ -o {tmp}/ms.h5 --json --quiet", "r.svm", "fifo"),
    "glm-evaluate-svmlight": ("glm evaluate {tmp}/ms.h5 @ --json", "r.svm", "pipe"),
    "glm-stream": ("glm stream @ -o {tmp}/st.h5 --width 50 --json --quiet", "r.svm", "fifo"),
    "glm-stream-no-width": ("glm stream @ -o {tmp}/st2.h5 --quiet", "r.svm", "pipe"),
    "fit-hdf5": ("fit @ -o {tmp}/m.h5 --model cp --rank 1", "t.h5", "pipe"),
    "info-hdf5": ("info @", "t.h5", "fifo"),
    "glm-evaluate-hdf5": ("glm evaluate @ {tmp}/r.svm", "ms.h5", "pipe"),
}


@pytest.fixture(scope="module")
def piped(data):
    cases = [
        {"argv": argv.format(tmp=data).split(), "data": str(data / name), "how": how}
        for argv, name, how in CASES.values()
    ]
    spec = data / "spec.json"
    spec.write_text(json.dumps({"folder": str(data), "cases": cases}))
    code = "import sys; sys.path.insert(1, 'tests'); import piped; piped.main()"
    out = subprocess.run(
        [sys.executable, "-c", code, str(spec)], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return dict(zip(CASES, json.loads(out.stdout), strict=True))


def _ok(result):
    assert result["code"] == 0, result
    return json.loads(result["out"])


@pytest.mark.parametrize("case", ["tensor-stdin", "tensor-fifo"])
def test_a_piped_text_tensor_converts_every_entry(data, piped, case):
    assert _ok(piped[case])["entries"] == ROWS
    if not (data / "file.h5").exists():
        assert main(["convert", str(data / "t.txt"), str(data / "file.h5")]) == 0
    _same_tensor(data / ("stdin.h5" if case == "tensor-stdin" else "fifo.h5"), data / "file.h5")


def test_piped_svmlight_and_csv_convert_every_row(data, piped):
    assert _ok(piped["svmlight-pipe"])["rows"] == ROWS
    got, want = read_csr(data / "rows.h5"), read_svmlight(data / "r.svm")
    assert (got.X != want.X).nnz == 0 and np.array_equal(got.y, want.y)
    assert _ok(piped["hashed-fifo"])["rows"] == ROWS
    assert read_csr(data / "hashed.h5").y.tolist() == read_table(data / "h.csv", ["y"]).columns["y"].tolist()


def test_glm_fit_evaluate_and_stream_read_every_piped_row(piped):
    assert _ok(piped["glm-fit-csv"])["rows"] == ROWS
    assert _ok(piped["glm-fit-svmlight"])["rows"] == ROWS
    assert _ok(piped["glm-evaluate-svmlight"])["rows"] == ROWS
    assert _ok(piped["glm-stream"])["rows"] == ROWS


def test_a_pipe_that_would_be_read_twice_is_refused_in_one_line(piped):
    res = piped["glm-stream-no-width"]
    assert res["code"] == 2 and "can be read only once: give --width" in res["err"]


@pytest.mark.parametrize("case", ["fit-hdf5", "info-hdf5", "glm-evaluate-hdf5"])
def test_hdf5_through_a_pipe_is_refused_in_one_line(piped, case):
    # (an h5py error of several lines, "Illegal seek"; info hung on a FIFO)
    res = piped[case]
    assert res["code"] == 2 and len(res["err"].splitlines()) == 1
    assert "is read by seeking: write it to a file" in res["err"]


# ------------------------------------------------------------------ svmlight told from the rest
def _run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _sklearn_rows(path):
    from sklearn.datasets import load_svmlight_file

    return load_svmlight_file(str(path), zero_based=True)


def test_svmlight_whose_first_rows_have_no_features_is_svmlight(tmp_path, capsys):
    # (a valid svmlight line is a lone label; convert took the file for a text tensor, glm fit for a table)
    path = tmp_path / "r.svm"
    path.write_text("1\n-1 # no features either\n\n1 2:0.5 7:-1\n-1 3:2\n")
    assert file_kind(path) == "svmlight"
    code, out, _ = _run(capsys, "convert", path, tmp_path / "r.h5", "--json")
    assert code == 0 and json.loads(out)["rows"] == 4
    X, y = _sklearn_rows(path)
    got = read_csr(tmp_path / "r.h5")
    assert got.X.shape[1] == X.shape[1] and (got.X != X).nnz == 0 and np.array_equal(got.y, y)
    code, out, err = _run(capsys, "glm", "fit", path, "-o", tmp_path / "m.h5", "--json", "--quiet")
    assert code == 0, err
    assert json.loads(out)["rows"] == 4


def test_svmlight_with_a_byte_order_mark_reads_as_without(tmp_path, capsys):
    text = "1 1:0.5 3:2\n-1 2:1\n"
    (tmp_path / "bom.svm").write_bytes(b"\xef\xbb\xbf" + text.encode())
    (tmp_path / "plain.svm").write_text(text)
    for name in ("bom", "plain"):
        assert _run(capsys, "convert", tmp_path / f"{name}.svm", tmp_path / f"{name}.h5")[0] == 0
    a, b = read_csr(tmp_path / "bom.h5"), read_csr(tmp_path / "plain.h5")
    assert (a.X != b.X).nnz == 0 and np.array_equal(a.y, b.y)


def test_qid_after_a_row_of_no_features_is_svmlight_and_refused_by_name(tmp_path, capsys):
    path = tmp_path / "rank.svm"
    path.write_text("1\n2 qid:1 3:4\n")
    assert file_kind(path) == "svmlight"
    code, _, err = _run(capsys, "convert", path, tmp_path / "rank.h5")
    assert code == 2 and "line 2: 'qid:1' is a query id (ranking data); remove the qid: fields" in err


def test_gzip_compressed_text_reads_as_the_text(data, tmp_path, capsys):
    for name in ("t.txt", "r.svm", "d.csv"):
        (tmp_path / f"{name}.gz").write_bytes(gzip.compress((data / name).read_bytes()))
        assert file_kind(tmp_path / f"{name}.gz") == file_kind(data / name)
    assert _run(capsys, "convert", tmp_path / "t.txt.gz", tmp_path / "t.h5")[0] == 0
    assert _run(capsys, "convert", data / "t.txt", tmp_path / "t0.h5")[0] == 0
    _same_tensor(tmp_path / "t.h5", tmp_path / "t0.h5")
    got, want = read_svmlight(tmp_path / "r.svm.gz"), read_svmlight(data / "r.svm")
    assert (got.X != want.X).nnz == 0 and np.array_equal(got.y, want.y)
    got, want = read_table(tmp_path / "d.csv.gz"), read_table(data / "d.csv")
    assert got.names == want.names and all(np.array_equal(got.columns[c], want.columns[c]) for c in got.names)


def test_damaged_gzip_is_one_clear_error_naming_gzip(data, tmp_path, capsys):
    whole = gzip.compress((data / "r.svm").read_bytes())
    (tmp_path / "cut.svm.gz").write_bytes(whole[: len(whole) // 2])
    code, _, err = _run(capsys, "convert", tmp_path / "cut.svm.gz", tmp_path / "cut.h5")
    assert code == 2 and len(err.splitlines()) == 1
    assert "cut.svm.gz' is gzip-compressed and cannot be decompressed" in err and "gzip -t" in err
    assert not (tmp_path / "cut.h5").exists()


@pytest.mark.parametrize(
    "line, message",
    [
        (b"1 3:1e308 3:1e308", "line 1: the values of index 3, which is repeated, sum to inf"),  # (kept: inf)
        (b"1 1.0:2", "line 1: the index '1.0' is not an integer"),  # (read as index 1)
        (b"1 1e1:2", "line 1: the index '1e1' is not an integer"),  # (read as index 10)
    ],
)
def test_svmlight_numbers_python_refuses_are_refused(tmp_path, line, message):
    (tmp_path / "r.svm").write_bytes(line + b"\n")
    with pytest.raises(FileFormatError, match=message), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # (a repeated column)
        read_svmlight(tmp_path / "r.svm")


def test_svmlight_numbers_python_reads_are_read(tmp_path):
    # ("cannot be read as svmlight": numpy's parse failed, and the slow path found nothing wrong)
    (tmp_path / "r.svm").write_bytes(b"1_0 3:1_0 +2:.5\n")
    rows = read_svmlight(tmp_path / "r.svm")
    assert rows.y.tolist() == [10.0] and rows.X.toarray().tolist() == [[0.0, 0.0, 0.5, 10.0]]


# ------------------------------------------------------------------ --skip-header
def test_skip_header_on_a_file_without_a_header_is_refused(tmp_path, capsys):
    # (the first entry was dropped, exit 0)
    (tmp_path / "t.txt").write_text("# made by hand\n\n1,2,3,0.5\n2,2,1,1.5\n")
    code, _, err = _run(capsys, "convert", tmp_path / "t.txt", tmp_path / "t.h5", "--skip-header")
    assert code == 2 and not (tmp_path / "t.h5").exists()
    assert "t.txt:3: --skip-header, but line '1,2,3,0.5' is an entry like line 4's, not a header" in err
    assert "leave out --skip-header" in err
    with pytest.raises(ValueError, match=r"t.txt:3: skip_header=True, but line '1,2,3,0.5' is an entry"):
        list(fastcep.io.iter_text_rows(tmp_path / "t.txt", skip_header=True))
    # a header, or a line of other numbers (a shape line, say), is skipped
    for first in ("i,j,k,value", "30 20 10"):
        (tmp_path / "h.txt").write_text(f"{first}\n1,2,3,0.5\n2,2,1,1.5\n")
        code, out, err = _run(
            capsys, "convert", tmp_path / "h.txt", tmp_path / "h.h5", "--skip-header", "--force"
        )
        assert code == 0 and "2 entries" in out, err


# ------------------------------------------------------------------ option ranges at parse time
def _parse_error(capsys, *argv):
    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in argv])
    assert exc.value.code == 2
    return capsys.readouterr().err.splitlines()[-1]


@pytest.mark.parametrize("bits", ["0", "40", "-1"])
def test_hash_bits_out_of_range_are_refused_before_any_work(data, tmp_path, capsys, bits):
    # (0 and 40 were accepted, 40 writing a file 2**40 columns wide; -1 gave "negative shift count")
    argv = (
        "convert",
        data / "h.csv",
        tmp_path / "h.h5",
        "--target",
        "y",
        "--hash",
        "cat",
        "--hash-bits",
        bits,
    )
    err = _parse_error(capsys, *argv)
    assert err == (
        "fastcep convert: error: argument --hash-bits: must be an integer from 1 to 24 (a width of 2**BITS = "
        f"2 to 16,777,216 columns, which a regression holds in memory); got '{bits}'"
    )
    assert not (tmp_path / "h.h5").exists()


@pytest.mark.parametrize("verb", [("convert",), ("glm", "fit"), ("glm", "stream")])
def test_a_width_below_one_is_refused_naming_the_option(data, tmp_path, capsys, verb):
    # (the messages named CSRWriter's and iter_svmlight's 'n_features' parameter)
    out = ["-o", tmp_path / "o.h5"] if verb != ("convert",) else [tmp_path / "o.h5"]
    err = _parse_error(capsys, *verb, data / "r.svm", *out, "--width", "0")
    assert err.endswith("error: argument --width: must be a positive integer (the rows' columns); got '0'")


# ------------------------------------------------------------------ messages that point the right way
@pytest.fixture(scope="module")
def rows_model(data, tmp_path_factory):
    """A regression model fitted on sparse rows (its columns have no names)."""
    path = tmp_path_factory.mktemp("model") / "m.h5"
    rows = read_svmlight(data / "r.svm")
    fastcep.save(fastcep.fit(rows.X, rows.y, max_iter=20), path)
    return path


def _truncated(data, tmp_path):
    whole = (data / "t.h5").read_bytes()
    (tmp_path / "cut.h5").write_bytes(whole[: len(whole) // 3])
    return tmp_path / "cut.h5"


def test_the_command_line_names_no_internals(tmp_path, capsys):
    # (CSRWriter: no rows written to ...; stream_file: ... (its kind is 'table'))
    (tmp_path / "h.csv").write_text("cat,y\n")
    code, _, err = _run(
        capsys, "convert", tmp_path / "h.csv", tmp_path / "h.h5", "--target", "y", "--hash", "cat"
    )
    assert code == 2 and "CSRWriter" not in err and "line 1: the header is followed by no rows" in err
    (tmp_path / "t.csv").write_text("a,y\n1,0\n")
    code, _, err = _run(capsys, "glm", "stream", tmp_path / "t.csv", "-o", tmp_path / "s.h5")
    assert code == 2 and "its kind is" not in err
    assert "it is a text table (CSV data?); convert a table with `fastcep convert`" in err


def test_load_says_what_a_file_is_in_words(tmp_path):
    # (it is its kind is 'numbers')
    (tmp_path / "t.txt").write_text("1,2,3,0.5\n")
    with pytest.raises(FileFormatError, match=r"it is text of numbers \(a text tensor\?\)\.$"):
        fastcep.load(tmp_path / "t.txt")


def test_a_failed_write_names_the_file_not_its_temporary(rows_model, tmp_path):
    # (No such file or directory: '.../.tmp-fastcep-8800-vkg7bwyr.h5')
    from fastcep.io.files import TMP_PREFIX

    res = fastcep.load(rows_model)
    (tmp_path / "folder").mkdir()
    for path in (tmp_path / "missing" / "m.h5", tmp_path / "folder"):
        with pytest.raises(OSError) as exc:
            fastcep.save(res, path)
        assert TMP_PREFIX not in str(exc.value) and repr(str(path)) in str(exc.value)


def test_glm_evaluate_of_a_missing_file_says_it_does_not_exist(rows_model, tmp_path, capsys):
    # (it said the model "was fitted on sparse rows ... evaluate it on svmlight text")
    code, _, err = _run(capsys, "glm", "evaluate", rows_model, tmp_path / "missing.svm")
    assert (
        code == 2 and err == f"fastcep glm evaluate: error: no such data file '{tmp_path / 'missing.svm'}'\n"
    )


@pytest.mark.parametrize("verb", ["fit", "evaluate"])
def test_a_truncated_hdf5_file_is_called_damaged_not_a_table(data, rows_model, tmp_path, capsys, verb):
    # (glm fit: "'cut.h5' is a table: give --target COL"; glm evaluate: the model "was fitted on sparse rows")
    cut = _truncated(data, tmp_path)
    argv = (
        ["glm", "fit", cut, "-o", tmp_path / "m.h5"]
        if verb == "fit"
        else ["glm", "evaluate", rows_model, cut]
    )
    code, _, err = _run(capsys, *argv)
    assert code == 2 and "is a table" not in err and "sparse rows" not in err
    assert err.endswith(f"'{cut}' is a damaged HDF5 file (cut short or corrupt: h5py cannot open it)\n")


# ------------------------------------------------------------------ --target of sparse rows
@pytest.mark.parametrize("verb", ["fit", "evaluate"])
def test_target_with_sparse_rows_is_refused_not_ignored(data, rows_model, tmp_path, capsys, verb):
    # (ignored: glm fit wrote a model whose target was "foo", glm evaluate reported its metrics)
    if verb == "fit":
        argv = ["glm", "fit", data / "r.svm", "--target", "foo", "-o", tmp_path / "m.h5"]
    else:
        argv = ["glm", "evaluate", rows_model, data / "r.svm", "--target", "foo"]
    code, out, err = _run(capsys, *argv)
    assert code == 2 and out == "" and not (tmp_path / "m.h5").exists()
    assert err.endswith(
        f"error: --target names a table's column; '{data / 'r.svm'}' holds sparse rows, whose label is the "
        "first field of each row: leave out --target\n"
    )


# ------------------------------------------------------------------ --plot's name, before the work
@pytest.mark.parametrize(
    "verb, image",
    [("glm fit", "out.txt"), ("glm fit", "out"), ("glm evaluate", "out.txt"), ("fit", "out.txt")],
)
def test_a_plot_name_matplotlib_cannot_write_is_refused_before_the_work(
    data, rows_model, tmp_path, capsys, verb, image
):
    # (found after the fit, the model written: "Format 'txt' is not supported"; no extension wrote out.png)
    argv = {
        "glm fit": ["glm", "fit", data / "d.csv", "--target", "y", "-o", tmp_path / "m.h5"],
        "glm evaluate": ["glm", "evaluate", rows_model, data / "r.svm"],
        "fit": ["fit", data / "t.h5", "--model", "cp", "--rank", "1", "-o", tmp_path / "m.h5"],
    }[verb]
    code, out, err = _run(
        capsys, *argv, "--plot", tmp_path / image, "--quiet" if verb != "glm evaluate" else "--json"
    )
    assert code == 2 and out == "" and sorted(p.name for p in tmp_path.iterdir()) == []
    assert f"error: --plot '{tmp_path / image}' does not end in a format matplotlib writes (" in err
    assert ".pdf, " in err and ".png, " in err and err.endswith("): name it FILE.png, say\n")
