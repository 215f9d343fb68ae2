"""The fastcep command line: convert, info, fit, stream, evaluate; exit status 2 on user errors."""

import argparse
import json
import pathlib
import subprocess
import sys
import warnings

import h5py
import numpy as np
import pytest

import fastcep
from fastcep import _options as O
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
        "--prior", "ard", "--quiet",
    )  # fmt: skip
    assert code == 0
    model = load_model("m.h5")
    opts = model.options
    assert (opts["a0"], opts["b0"], opts["init"], opts["noise_warmup"]) == (2.0, 3.0, "random", 0)
    assert opts["expect_under"] == "cavity" and opts["prior"] == "ard" and model.hyper.kind == "ard"
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


# ------------------------------------------------------------- --version and python -m fastcep
ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out == f"fastcep {fastcep.__version__}\n"


def test_python_m_fastcep_runs_the_command_line_and_exits_with_its_status(tmp_path):
    def python_m(*argv):
        # (from the checkout's root, so that its fastcep is the one imported)
        return subprocess.run(
            [sys.executable, "-m", "fastcep", *argv], cwd=ROOT, capture_output=True, text=True
        )

    out = python_m("--version")
    assert out.returncode == 0 and out.stdout == f"fastcep {fastcep.__version__}\n"
    out = python_m("info", str(tmp_path / "missing.h5"))
    assert out.returncode == 2 and out.stderr.startswith("fastcep info: error: no such file")


# --------------------------------------------------------------------- help and defaults
def _parsers(parser, name="fastcep"):
    """Every parser of the command line, its verbs' and their verbs' (glm fit, ...)."""
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for verb, sub in action.choices.items():
                yield from _parsers(sub, f"{name} {verb}")


#: each verb's family in the option table
FAMILIES = {"fastcep fit": "cp", "fastcep stream": "stream", "fastcep glm fit": "regression"}


def test_every_option_has_help_that_states_its_default():
    from fastcep.cli import build_parser

    seen = set()
    for name, parser in _parsers(build_parser()):
        for action in parser._actions:
            if isinstance(
                action, (argparse._HelpAction, argparse._VersionAction, argparse._SubParsersAction)
            ):
                continue
            where = (name, action.dest)
            seen.add(where)
            assert action.help, where
            if not action.option_strings:  # positional: nothing to default
                continue
            text = action.help % {**vars(action), "prog": parser.prog}  # as argparse expands it
            if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
                continue  # a flag: off unless given
            if action.required:
                assert "required" in text, where
                continue
            assert "default" in text, where
            if action.default is not None:
                assert str(action.default) in text or repr(action.default) in text, where
            # the options of the option table take its help
            option = "n_threads" if action.dest == "threads" else action.dest
            if name in FAMILIES and option in O.BY_NAME:
                assert action.help == O.cli_help(option, FAMILIES[name]), where
    assert {
        ("fastcep glm fit", "fit_intercept"),
        ("fastcep evaluate", "plot"),
        ("fastcep demo", "uci"),
    } <= seen
    assert ("fastcep glm evaluate", "target") in seen


# ----------------------------------------------------------------- errors that name the fix
def test_a_file_of_the_wrong_kind_gets_the_command_that_takes_it(workdir, capsys):
    tmp, _ = workdir
    run(capsys, "convert", "t.txt", "t.h5")
    run(
        capsys,
        "fit",
        "t.h5",
        "-o",
        "m.h5",
        "--model",
        "cp_gaussian",
        "--rank",
        "2",
        "--max-iter",
        "3",
        "--quiet",
    )
    fit_args = ("-o", "x.h5", "--model", "cp_gaussian", "--rank", "2")
    convert = "convert it with `fastcep convert t.txt t.h5`"
    # a text tensor where a tensor or model file is expected
    assert convert in _bad(capsys, "fit", "t.txt", *fit_args)
    assert convert in _bad(capsys, "stream", "t.txt", *fit_args)
    assert convert in _bad(capsys, "evaluate", "m.h5", "t.txt")
    assert convert in _bad(capsys, "evaluate", "t.txt", "t.h5")
    assert convert in _bad(capsys, "info", "t.txt")
    # a model where a tensor is expected, and a tensor where a model is
    model = "it is a CP model file: evaluate it with `fastcep evaluate m.h5 TEST.h5`"
    assert model in _bad(capsys, "fit", "m.h5", *fit_args)
    assert model in _bad(capsys, "stream", "m.h5", *fit_args)
    assert model in _bad(capsys, "evaluate", "m.h5", "m.h5")
    tensor = "it is a tensor file: decompose it with `fastcep fit t.h5 -o MODEL.h5"
    assert tensor in _bad(capsys, "evaluate", "t.h5", "t.h5")
    assert "the model file comes first: `fastcep evaluate m.h5 t.h5`" in _bad(
        capsys, "evaluate", "t.h5", "m.h5"
    )
    # a checkpoint, a CSV table, and a file of another program
    run(capsys, "stream", "t.h5", "-o", "s.h5", "--model", "cp_gaussian", "--rank", "2",
        "--checkpoint", "ck.h5", "--quiet")  # fmt: skip
    assert "--checkpoint ck.h5 --resume" in _bad(capsys, "evaluate", "ck.h5", "t.h5")
    (tmp / "d.csv").write_text("x,y,label\n1,2,1\n")
    assert "`fastcep glm fit d.csv --target COL -o MODEL.h5`" in _bad(capsys, "fit", "d.csv", *fit_args)
    with h5py.File(tmp / "other.h5", "w") as f:
        f["x"] = [1.0]
    assert "a tensor file comes from `fastcep convert`" in _bad(capsys, "fit", "other.h5", *fit_args)
    assert "`fastcep info` describes" in _bad(capsys, "info", "other.h5")
    # outputs checked before any work
    assert "does not exist" in _bad(capsys, "fit", "t.h5", *fit_args[2:], "-o", str(tmp / "nowhere" / "m.h5"))
    assert "is the input file" in _bad(capsys, "fit", "t.h5", *fit_args[2:], "-o", "t.h5")
    assert fastcep.read_tensor("t.h5")[0].shape == (1500, 3)  # (untouched)


# ------------------------------------------------------------------------------- Ctrl-C
def _interrupting(real):
    """``real`` (fit or stream) with a callback that presses Ctrl-C at the second iteration."""

    def call(*args, callback=None, **kw):
        def stop(info):
            if callback is not None:
                callback(info)
            if info.iteration == 2:
                raise KeyboardInterrupt

        return real(*args, callback=stop, **kw)

    return call


@pytest.mark.parametrize("verb", ["fit", "stream"])
def test_the_interrupt_message_starts_a_line_of_its_own(workdir, capsys, monkeypatch, verb):
    import fastcep.api

    run(capsys, "convert", "t.txt", "t.h5")
    monkeypatch.setattr(fastcep.api, "fit", _interrupting(fastcep.api.fit))
    monkeypatch.setattr(fastcep.api, "stream", _interrupting(fastcep.api.stream))
    extra = ("--batch-size", "300") if verb == "stream" else ()
    code, out, err = run(capsys, verb, "t.h5", "-o", "m.h5", "--model", "cp_gaussian", "--rank", "2", *extra)
    assert code == 130
    assert "\r" in err  # a progress line was being drawn ...
    assert err.endswith(f"\nfastcep {verb}: interrupted\n")  # ... and the message is not on it
    assert not (workdir[0] / "m.h5").exists()


# ---------------------------------------------------------------------------------- plots
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _png(path, width, height):
    """A valid PNG of the given size in pixels, not blank."""
    import matplotlib.image

    data = path.read_bytes()
    assert data.startswith(PNG_MAGIC) and len(data) > 10_000, path
    image = matplotlib.image.imread(path)
    assert image.shape[:2] == (height, width) and image.std() > 0.05, path


def test_fit_stream_and_evaluate_plot(workdir, capsys):
    pytest.importorskip("matplotlib")
    tmp, _ = workdir
    run(capsys, "convert", "t.txt", "t.h5")
    code, out, _ = run(
        capsys, "fit", "t.h5", "-o", "m.h5", "--model", "cp_gaussian", "--rank", "2", "--plot", "conv.png",
        "--json", "--quiet",
    )  # fmt: skip
    assert code == 0 and json.loads(out)["plot"] == "conv.png"
    _png(tmp / "conv.png", 1000, 400)
    code, out, _ = run(capsys, "stream", "t.h5", "-o", "s.h5", "--model", "cp_gaussian", "--rank", "2",
                       "--batch-size", "300", "--plot", "sconv.png", "--quiet")  # fmt: skip
    assert code == 0 and "wrote sconv.png" in out
    _png(tmp / "sconv.png", 1000, 400)
    code, out, _ = run(capsys, "evaluate", "m.h5", "t.h5", "--plot", "pred.png")
    assert code == 0 and "wrote pred.png" in out
    _png(tmp / "pred.png", 600, 600)


def test_binary_evaluate_plot(tmp_path, monkeypatch, capsys):
    pytest.importorskip("matplotlib")
    T, _ = make_cp_tensor((20, 15, 10), 2, 1500, binary=True, seed=3, factor_scale=1.2)
    fastcep.write_tensor(tmp_path / "b.h5", T.coords, T.values, shape=T.shape, binary=True)
    monkeypatch.chdir(tmp_path)
    run(capsys, "fit", "b.h5", "-o", "m.h5", "--model", "cp_probit", "--rank", "2", "--quiet")
    code, out, _ = run(capsys, "evaluate", "m.h5", "b.h5", "--plot", "ev.png")
    assert code == 0
    _png(tmp_path / "ev.png", 1000, 500)


def test_plot_without_matplotlib_fails_before_the_fit(workdir, capsys, monkeypatch):
    run(capsys, "convert", "t.txt", "t.h5")
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")] + ["matplotlib"]:
        monkeypatch.setitem(sys.modules, name, None)
    err = _bad(
        capsys, "fit", "t.h5", "-o", "m.h5", "--model", "cp_gaussian", "--rank", "2", "--plot", "c.png"
    )
    assert "pip install 'fastcep[plot]'" in err
    assert not (workdir[0] / "m.h5").exists()


# ------------------------------------------------------------------------- evaluate's metrics
def test_evaluate_reports_calibration_for_binary_data(tmp_path, monkeypatch, capsys):
    from fastcep import metrics

    T, _ = make_cp_tensor((20, 15, 10), 2, 1500, binary=True, seed=3, factor_scale=1.2)
    fastcep.write_tensor(tmp_path / "b.h5", T.coords, T.values, shape=T.shape, binary=True)
    monkeypatch.chdir(tmp_path)
    run(capsys, "fit", "b.h5", "-o", "m.h5", "--model", "cp_probit", "--rank", "2", "--quiet")
    code, out, _ = run(capsys, "evaluate", "m.h5", "b.h5", "--json")
    got = json.loads(out)
    res = load_model("m.h5")
    p, y = res.predict(T.coords), T.values > 0
    assert got["auc"] == pytest.approx(metrics.auc(y, p), abs=1e-12)
    assert got["test_log_likelihood"] == pytest.approx(res.log_likelihood(T.coords, T.values), abs=1e-12)
    assert got["brier"] == pytest.approx(np.mean((p - y) ** 2), abs=1e-12)
    assert got["ece"] == pytest.approx(metrics.expected_calibration_error(y, p), abs=1e-12)
    assert got["mean_p"] == pytest.approx(p.mean(), abs=1e-12)
    assert got["positive_rate"] == pytest.approx(y.mean(), abs=1e-15)
    code, out, _ = run(capsys, "evaluate", "m.h5", "b.h5")
    assert code == 0 and f"mean P {p.mean():.4f} against a positive rate of {y.mean():.4f}" in out
    assert "Brier score" in out and "calibration error" in out and "test log-likelihood" in out
    # a point estimate scores but has no probabilities
    run(capsys, "fit", "b.h5", "-o", "w.h5", "--model", "cp_probit", "--rank", "2", "--method", "cp_wopt",
        "--quiet")  # fmt: skip
    got = json.loads(run(capsys, "evaluate", "w.h5", "b.h5", "--json")[1])
    assert got["auc"] > 0.5 and "brier" not in got and got["positive_rate"] == pytest.approx(y.mean())


def test_evaluate_reports_the_gaussian_test_log_likelihood(workdir, capsys):
    from scipy.stats import norm

    run(capsys, "convert", "t.txt", "t.h5")
    run(capsys, "fit", "t.h5", "-o", "m.h5", "--model", "cp_gaussian", "--rank", "2", "--quiet")
    got = json.loads(run(capsys, "evaluate", "m.h5", "t.h5", "--json")[1])
    coords, values = fastcep.read_tensor("t.h5")[:2]
    mean, var = load_model("m.h5").predict(coords, return_var=True)
    assert got["test_log_likelihood"] == pytest.approx(np.mean(norm.logpdf(values, mean, np.sqrt(var))))
    assert got["rmse"] == pytest.approx(np.sqrt(np.mean((values - mean) ** 2)), abs=1e-12)
    assert got["mean_prediction"] == pytest.approx(mean.mean()) and got["mean_value"] == pytest.approx(
        values.mean()
    )
    assert "rmse_log1p" not in got  # (not a count model)


def test_evaluate_scores_a_count_model_on_the_log_scale_too(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    T, _ = make_cp_tensor((15, 12, 10), 2, 900, noise_sd=0.1, seed=1)
    counts = np.random.default_rng(1).poisson(np.exp(0.5 * T.values + 1.0)).astype(float)
    fastcep.write_tensor(tmp_path / "c.h5", T.coords, counts, shape=T.shape)
    run(capsys, "fit", "c.h5", "-o", "m.h5", "--model", "cp_poisson", "--rank", "2", "--max-iter", "15",
        "--quiet")  # fmt: skip
    code, out, _ = run(capsys, "evaluate", "m.h5", "c.h5")
    assert code == 0 and "RMSE on the log scale" in out
    got = json.loads(run(capsys, "evaluate", "m.h5", "c.h5", "--json")[1])
    res = load_model("m.h5")
    assert got["rmse_log1p"] == pytest.approx(res.rmse(T.coords, counts, scale="log1p"), rel=1e-12)
    assert got["rmse_log1p"] == pytest.approx(
        np.sqrt(np.mean((np.log1p(counts) - res.predict(T.coords, scale="log1p")) ** 2)), rel=1e-12
    )
