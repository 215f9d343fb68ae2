"""The fastcep command line: convert, info, fit, stream, evaluate; exit status 2 on user errors."""

import json
import warnings

import h5py
import numpy as np
import pytest

import fastcep
from fastcep import load_model
from fastcep.cli import main
from fastcep.data_tools import make_cp_tensor


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    T, _ = make_cp_tensor((20, 15, 10), 2, 1500, noise_sd=0.1, seed=0)
    lines = [
        f"{a + 1},{b + 1},{c + 1},{v!r}" for (a, b, c), v in zip(T.coords, T.values.tolist(), strict=True)
    ]
    (tmp_path / "t.txt").write_bytes(("\r\n".join(lines) + "\r\n").encode())
    monkeypatch.chdir(tmp_path)
    return tmp_path, T


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_convert_info_fit_evaluate_stream(workdir, capsys):
    tmp, T = workdir
    code, out, _ = run(capsys, "convert", "t.txt", "t.h5", "--shape", "20,15,10", "--json")
    assert code == 0 and json.loads(out)["entries"] == 1500
    code, out, _ = run(capsys, "info", "t.h5", "--json")
    assert code == 0 and json.loads(out)["shape"] == [20, 15, 10]
    code, out, err = run(
        capsys, "fit", "t.h5", "-o", "m.h5", "--model", "cp_gaussian", "--rank", "2", "--json"
    )
    assert code == 0 and json.loads(out)["converged"]
    code, out, _ = run(capsys, "evaluate", "m.h5", "t.h5", "--json")
    assert code == 0 and json.loads(out)["rmse"] < 0.15
    code, out, err = run(
        capsys, "stream", "t.h5", "-o", "s.h5", "--model", "cp_gaussian", "--rank", "2",
        "--batch-size", "300", "--checkpoint", "ck.h5", "--checkpoint-every", "2",
    )  # fmt: skip
    assert code == 0 and "5 batches" in out and "entries" in err  # progress bar on stderr
    code, out, _ = run(capsys, "info", "ck.h5", "--json")
    assert json.loads(out)["batches_done"] == 5
    code, out, _ = run(capsys, "info", "s.h5")
    assert code == 0 and "cp_gaussian model, rank 2" in out
    code, out, err = run(
        capsys, "stream", "t.h5", "-o", "s2.h5", "--model", "cp_gaussian", "--rank", "2",
        "--batch-size", "300", "--quiet",
    )  # fmt: skip
    assert code == 0 and err == ""


def test_fit_binary_with_prior_mean_and_rank_one_curvature(tmp_path, monkeypatch, capsys):
    T, _ = make_cp_tensor((20, 15, 10), 2, 1500, binary=True, seed=3, factor_scale=1.2)
    lines = [f"{a + 1},{b + 1},{c + 1},{int(v)}" for (a, b, c), v in zip(T.coords, T.values, strict=True)]
    (tmp_path / "b.txt").write_text("\n".join(lines) + "\n")
    monkeypatch.chdir(tmp_path)
    assert run(capsys, "convert", "b.txt", "b.h5", "--binary")[0] == 0
    code, out, _ = run(
        capsys, "fit", "b.h5", "-o", "m.h5", "--model", "cp_probit", "--rank", "2", "--prior-mean", "0.3",
        "--probit-curvature", "rank1", "--json",
    )  # fmt: skip
    assert code == 0
    res = load_model("m.h5")
    assert res.options["probit_curvature"] == "rank1" and res.options["prior_mean"] == 0.3
    code, out, _ = run(capsys, "evaluate", "m.h5", "b.h5", "--json")
    assert code == 0 and json.loads(out)["auc"] > 0.8
    code, _, err = run(
        capsys, "fit", "b.h5", "-o", "m2.h5", "--model", "cp_gaussian", "--rank", "2",
        "--probit-curvature", "rank1",
    )  # fmt: skip
    assert code == 2 and "probit_curvature" in err
    code, _, _ = run(
        capsys, "stream", "b.h5", "-o", "s.h5", "--model", "cp_probit", "--rank", "2", "--prior-mean", "0.2",
        "--probit-curvature", "rank1", "--expect-under", "cavity", "--quiet",
    )  # fmt: skip
    assert code == 0
    res = load_model("s.h5")
    assert res.options["probit_curvature"] == "rank1" and res.options["prior_mean"] == 0.2
    assert res.options["expect_under"] == "cavity"


def test_fit_passes_the_prior_and_start_options(workdir, capsys):
    run(capsys, "convert", "t.txt", "t.h5", "--shape", "20,15,10")
    code, _, _ = run(
        capsys, "fit", "t.h5", "-o", "m.h5", "--model", "cp_gaussian", "--rank", "2", "--a0", "2",
        "--b0", "3", "--init", "random", "--noise-warmup", "0", "--max-iter", "5", "--expect-under", "cavity",
        "--quiet",
    )  # fmt: skip
    assert code == 0
    opts = load_model("m.h5").options
    assert (opts["a0"], opts["b0"], opts["init"], opts["noise_warmup"]) == (2.0, 3.0, "random", 0)
    assert opts["expect_under"] == "cavity"
    args = ("fit", "t.h5", "-o", "m.h5", "--model", "cp_gaussian", "--rank", "2", "--a0", "-1")
    code, _, err = run(capsys, *args)
    assert code == 2 and "'a0' parameter" in err


@pytest.mark.parametrize("method", ["lp", "vmp", "cp_wopt"])
def test_fit_with_a_baseline_method(workdir, capsys, method):
    run(capsys, "convert", "t.txt", "t.h5", "--shape", "20,15,10")
    code, out, _ = run(
        capsys, "fit", "t.h5", "-o", "m.h5", "--model", "cp_gaussian", "--rank", "2", "--method", method,
        "--max-iter", "30", "--json",
    )  # fmt: skip
    assert code == 0
    code, out, _ = run(capsys, "info", "m.h5", "--json")
    assert code == 0 and json.loads(out)["method"] == method


def test_stream_post_and_refused_option(workdir, capsys):
    run(capsys, "convert", "t.txt", "t.h5", "--shape", "20,15,10")
    code, out, _ = run(
        capsys, "stream", "t.h5", "-o", "p.h5", "--model", "cp_gaussian", "--rank", "2", "--method", "post",
        "--batch-size", "500", "--quiet",
    )  # fmt: skip
    assert code == 0 and "3 batches" in out
    err = _bad(
        capsys, "stream", "t.h5", "-o", "p2.h5", "--model", "cp_gaussian", "--rank", "2", "--method", "post",
        "--damping", "0.5", "--quiet",
    )  # fmt: skip
    assert "damping" in err


def _bad(capsys, *argv):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert err.startswith(f"fastcep {argv[0]}: error:") and err.count("\n") == 1 and "Traceback" not in err
    return err


def test_user_errors_exit_2_with_one_line(workdir, capsys):
    tmp, _ = workdir
    assert "missing.h5" in _bad(capsys, "info", "missing.h5")
    assert "no such tensor file" in _bad(
        capsys, "fit", "missing.h5", "-o", "m.h5", "--model", "cp_gaussian", "--rank", "2"
    )
    (tmp / "bad.txt").write_text("1,1,1,0.5\n1,1,x,2\n")
    assert "bad.txt:2: malformed line" in _bad(capsys, "convert", "bad.txt", "bad.h5")
    assert not (tmp / "bad.h5").exists()
    (tmp / "junk.h5").write_bytes(b"junk" * 100)
    assert "not an HDF5 file" in _bad(capsys, "info", "junk.h5")
    assert "cannot be opened as HDF5" in _bad(
        capsys, "fit", "junk.h5", "-o", "m.h5", "--model", "cp_gaussian", "--rank", "2"
    )
    run(capsys, "convert", "t.txt", "t.h5")
    with h5py.File(tmp / "t.h5", "a") as f:
        f.attrs["format_version"] = 9
    assert "format version 9" in _bad(capsys, "info", "t.h5")
    assert "not a valid fastcep model file" in _bad(capsys, "evaluate", "t.h5", "t.h5")
    run(capsys, "convert", "t.txt", "t.h5")
    assert "binary labels" in _bad(capsys, "fit", "t.h5", "-o", "m.h5", "--model", "cp_probit", "--rank", "2")
    assert "needs binary values" in _bad(
        capsys, "stream", "t.h5", "-o", "m.h5", "--model", "cp_probit", "--rank", "2"
    )
    assert "'rank' parameter" in _bad(
        capsys, "fit", "t.h5", "-o", "m.h5", "--model", "cp_gaussian", "--rank", "0"
    )
    assert not (tmp / "m.h5").exists()
    (tmp / "big.txt").write_text("1,1,1,0.5\n5,1,1,0.5\n")
    assert "big.txt:2" in _bad(capsys, "convert", "big.txt", "big.h5", "--shape", "2,2,2")
    with pytest.raises(SystemExit) as exc:  # argparse: missing arguments
        main(["fit", "t.h5"])
    assert exc.value.code == 2


def test_empty_and_truncated_files(workdir, capsys):
    tmp, _ = workdir
    (tmp / "empty.txt").write_text("")
    assert "no entries" in _bad(capsys, "convert", "empty.txt", "e.h5")
    run(capsys, "convert", "t.txt", "t.h5")
    data = (tmp / "t.h5").read_bytes()
    (tmp / "trunc.h5").write_bytes(data[: len(data) // 2])
    _bad(capsys, "info", "trunc.h5")
    (tmp / "nan.txt").write_text("1,1,1,0.5\n2,2,2,nan\n")
    assert "nan.txt:2" in _bad(capsys, "convert", "nan.txt", "nan.h5")
    np.testing.assert_equal((tmp / "nan.h5").exists(), False)


def test_demo_table(capsys):
    """The README's first command: the regression comparison table, as JSON. On the paper's
    probit simulation CEP-1, CEP-2 and EP reach the same test log-likelihood; every row is a
    finished fit with a plausible AUC, and nothing warns (the warm-up stops early on purpose)."""
    warnings.simplefilter("error", fastcep.ConvergenceWarning)
    assert main(["demo", "--json", "--quiet"]) == 0
    rows = json.loads(capsys.readouterr().out)
    sim = [r for r in rows if r["data"].startswith("simulation")]
    assert [(r["model"], r["method"]) for r in sim] == [
        (m, k) for m in ("probit", "logistic") for k in ("cep1", "cep2", "ep")
    ]
    assert len(rows) in (6, 12)  # (the UCI part needs the datasets packages)
    for r in rows:
        assert r["converged"] and r["iterations"] > 1 and r["seconds"] > 0
        assert 0.6 < r["test_auc"] <= 1.0 and np.isfinite(r["test_log_likelihood"])
    for model in ("probit", "logistic"):
        ll = {r["method"]: r["test_log_likelihood"] for r in sim if r["model"] == model}
        assert abs(ll["cep1"] - ll["ep"]) < 1e-3 and abs(ll["cep2"] - ll["ep"]) < 1e-3


def test_convert_header_index_base_and_shape(workdir, capsys):
    """convert: --skip-header, the inferred shape said, the index-base hints in flag words, a
    --shape of the wrong length or not integers; every error one line naming file and line."""
    tmp, T = workdir
    lines = (tmp / "t.txt").read_text().splitlines()
    (tmp / "h.txt").write_text("\n".join(["i,j,k,value", *lines]) + "\n")
    err = _bad(capsys, "convert", "h.txt", "h.h5")
    assert "h.txt:1: line 'i,j,k,value' looks like a header: use --skip-header" in err
    code, out, err = run(capsys, "convert", "h.txt", "h.h5", "--skip-header")
    assert code == 0 and err == ""
    assert out.startswith("wrote h.h5: 1500 entries, shape 20x15x10 (inferred from the largest index")
    code, out, _ = run(capsys, "convert", "h.txt", "h.h5", "--skip-header", "--shape", "20,15,10", "--json")
    assert code == 0 and json.loads(out)["shape_inferred"] is False
    # a 1-based file read as 0-based: every mode one too large, and said so
    code, out, err = run(capsys, "convert", "t.txt", "z.h5", "--index-base", "0", "--json")
    assert code == 0 and json.loads(out)["shape"] == [21, 16, 11] and json.loads(out)["shape_inferred"]
    assert err.startswith("fastcep convert: warning: t.txt: no index 0 in mode(s) 1, 2, 3 ")
    assert "may be 1-based (try --index-base 1)" in err and err.count("\n") == 1
    (tmp / "z.txt").write_text("1,1,1,0.5\n0,1,2,1.5\n")
    assert (
        "z.txt:2: index below the index base 1 in '0,1,2,1.5' (index 0 in a 1-based file: try --index-base 0)"
        in _bad(capsys, "convert", "z.txt", "z2.h5")
    )
    err = _bad(capsys, "convert", "t.txt", "s.h5", "--shape", "20,15")
    assert "t.txt:1: shape (20, 15) has 2 modes but the file's lines have 3 indices" in err
    for shape in ("20,15.5,10", "20,15,0", "20", "20,1_5,10"):
        assert "--shape must be two or more positive integers" in _bad(
            capsys, "convert", "t.txt", "s.h5", "--shape", shape
        )
    assert "--delimiter must be" in _bad(capsys, "convert", "t.txt", "s.h5", "--delimiter", "semicolon")
    assert not (tmp / "s.h5").exists()


def test_convert_refuses_misread_numbers(workdir, capsys):
    tmp, _ = workdir
    for body, words in [
        (
            "1\t1\t1\t0.5\n1\t2\t1\t1,5\n",
            "b.txt:2: malformed line '1\\t2\\t1\\t1,5': value field 4 '1,5' has a decimal comma",
        ),
        (
            "1,1,1,0.5\n1,1,1,1_0\n",
            "b.txt:2: malformed line '1,1,1,1_0': value field 4 '1_0' is not a number",
        ),
        (f"1,1,1,0.5\n{2**63},1,1,1\n", f"b.txt:2: malformed line '{2**63},1,1,1': index field 1"),
        (
            "1,1,1,0.5\n1,1,1,1\n" + "1," * 500_000 + "1\n",
            "b.txt:3: expected 4 fields, got 500001 in '1,1,1,",
        ),
    ]:
        (tmp / "b.txt").write_text(body)
        err = _bad(capsys, "convert", "b.txt", "b.h5")
        assert words in err and len(err) < 300
    (tmp / "b.txt").write_bytes(b"1,1,1,0.5\n1,1,1,\xb5\n")
    assert "b.txt:2: not UTF-8 text" in _bad(capsys, "convert", "b.txt", "b.h5")
    assert not (tmp / "b.h5").exists()
