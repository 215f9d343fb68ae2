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
