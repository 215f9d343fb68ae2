"""Outputs that are not plain files to replace (issue 56, build point 2): a device, a FIFO or a
socket is refused before any work and left as it was; one path given twice in one command is
refused; a model is never written over an input, a data file or a read-only file; a link is
written through; ``fastcep.save`` follows the command line's rules."""

import os
import socket
import stat
import subprocess
import sys

import numpy as np
import pytest

import fastcep
from fastcep.cli import main
from fastcep.cli._files import PATH_ARGS
from fastcep.cli._parser import build_parser
from fastcep.io import load_glm_model


@pytest.fixture
def folder(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 2))
    y = (X[:, 0] + 0.5 * rng.normal(size=60) > 0).astype(int)
    rows = ["x1,x2,label"] + [f"{float(a)!r},{float(b)!r},{t}" for (a, b), t in zip(X, y, strict=True)]
    (tmp_path / "train.csv").write_text("\n".join(rows) + "\n")
    fastcep.write_tensor(tmp_path / "t.h5", np.array([[0, 0], [1, 1], [0, 1]]), np.array([1.0, 2.0, 0.5]))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def refused(capsys, *argv):
    code = main(list(argv))
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    return err


GLM_FIT = ("glm", "fit", "train.csv", "--target", "label", "--quiet")


def test_one_path_given_twice_is_refused_before_any_work(folder, capsys):
    """Before: ``-o X --plot X`` wrote the plot over the model (exit 0), and ``glm stream --init
    m.h5 -o m.h5`` overwrote its own input."""
    err = refused(capsys, *GLM_FIT, "-o", "m.h5", "--plot", "m.h5")
    assert "'m.h5' is given as -o and as --plot; one file cannot be both" in err
    assert not (folder / "m.h5").exists()
    err = refused(capsys, *GLM_FIT, "-o", "m.h5", "--plot", "./sub/../m.h5")
    assert "is given as -o and as --plot" in err
    (folder / "sub").mkdir()
    os.symlink(folder / "m.h5", folder / "sub" / "link.h5")  # (a link to a file not yet there)
    assert "is given as -o and as --plot" in refused(capsys, *GLM_FIT, "-o", "m.h5", "--plot", "sub/link.h5")
    assert main([*GLM_FIT, "-o", "m.h5"]) == 0
    before = (folder / "m.h5").read_bytes()
    (folder / "rows.svm").write_text("1 1:0.5\n0 2:1.5\n1 1:1.0 2:0.2\n")
    err = refused(capsys, "glm", "stream", "rows.svm", "--init", "m.h5", "-o", "m.h5", "--quiet")
    assert "the output (-o) 'm.h5' is the input file 'm.h5' (--init); it would be overwritten" in err
    assert (folder / "m.h5").read_bytes() == before
    cp = ("fit", "t.h5", "--model", "cp_gaussian", "--rank", "1")
    err = refused(capsys, *cp, "-o", "m2.h5", "--plot", "m2.h5")
    assert "is given as -o and as --plot" in err
    assert "the output (DST) './train.csv' is the input file 'train.csv' (SRC)" in refused(
        capsys, "convert", "train.csv", "./train.csv"
    )


def test_every_verb_names_its_file_arguments():
    """``PATH_ARGS`` lists each verb's file arguments: a verb added without an entry fails here."""
    parser = build_parser()
    verbs = set()
    for name, sub in _verbs(parser).items():
        if name == "glm":
            verbs |= {f"glm {v}" for v in _verbs(sub)}
        elif name != "demo":
            verbs.add(name)
    assert verbs == set(PATH_ARGS)
    for verb, names in PATH_ARGS.items():
        sub = parser
        for word in verb.split():
            sub = _verbs(sub)[word]
        assert set(names) <= {a.dest for a in sub._actions}, verb


def _verbs(parser):
    return parser._subparsers._group_actions[0].choices


def run_with_timeout(code, cwd, seconds=120):
    """Run ``python -c code`` in ``cwd``; a hang (a FIFO opened for reading) fails instead of
    stalling the run."""
    try:
        return subprocess.run(
            [sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=seconds
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"hung for {seconds} s")


def test_a_fifo_as_output_is_refused_at_once_and_left_a_fifo(folder):
    """Before: the output-kind probe opened the FIFO for reading and waited for ever."""
    os.mkfifo(folder / "pipe")
    code = (
        "import sys; from fastcep.cli import main\n"
        "sys.exit(main(['glm', 'fit', 'train.csv', '--target', 'label', '--quiet', '-o', 'pipe']))"
    )
    done = run_with_timeout(code, folder)
    assert done.returncode == 2, done.stderr
    assert "'pipe' is a FIFO (a named pipe), not a regular file" in done.stderr
    assert "HDF5, which needs a seekable regular file" in done.stderr
    code = (
        "import fastcep, numpy as np\n"
        "X = np.random.default_rng(0).normal(size=(40, 2)); y = (X[:, 0] > 0).astype(int)\n"
        "res = fastcep.fit(X, y)\n"
        "try:\n    fastcep.save(res, 'pipe')\nexcept ValueError as e:\n    print(e)\n"
    )
    done = run_with_timeout(code, folder)
    assert "save: the output 'pipe' is a FIFO (a named pipe)" in done.stdout, done.stderr
    assert stat.S_ISFIFO(os.stat(folder / "pipe").st_mode)


@pytest.fixture
def model(folder):
    X = np.random.default_rng(1).normal(size=(40, 2))
    return fastcep.fit(X, (X[:, 0] > 0).astype(int))


def test_devices_and_sockets_as_outputs_are_refused_and_left_as_they_were(folder, model, capsys):
    """Before: the atomic rename replaced a character device with a regular file (as root,
    ``-o /dev/null`` replaced the machine's ``/dev/null``)."""
    os.symlink("/dev/null", folder / "null")  # (a character device, reached through a link)
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(folder / "sock"))
    try:
        for name, what in (("null", "a character device"), ("sock", "a socket")):
            with pytest.raises(ValueError, match=f"save: the output '{name}' is {what}, not a regular file"):
                fastcep.save(model, name)
            err = refused(capsys, *GLM_FIT, "-o", name)
            assert f"'{name}' is {what}, not a regular file" in err
            err = refused(capsys, "convert", "train.csv", name, "--target", "label", "--hash", "x1")
            assert f"'{name}' is {what}" in err
            with pytest.raises(ValueError, match=f"is {what}"):  # (the writers' own last check)
                fastcep.write_tensor(name, np.array([[0, 0]]), np.array([1.0]))
        assert os.path.islink(folder / "null") and stat.S_ISCHR(os.stat(folder / "null").st_mode)
        assert stat.S_ISSOCK(os.lstat(folder / "sock").st_mode)
    finally:
        sock.close()
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_save_follows_the_command_line_s_rules(folder, model):
    """Before: ``fastcep.save`` replaced a CSV or tensor file, a read-only file, and a link with a
    file of its own."""
    csv = (folder / "train.csv").read_bytes()
    with pytest.raises(FileExistsError, match="'train.csv' exists and holds a text table.*force=True"):
        fastcep.save(model, "train.csv")
    with pytest.raises(FileExistsError, match="'t.h5' exists and holds a fastcep tensor"):
        model.save("t.h5")
    assert (folder / "train.csv").read_bytes() == csv
    fastcep.save(model, "m.h5")
    fastcep.save(model, "m.h5")  # (a model of its kind is replaced)
    coords, values = np.array([[0, 0], [1, 1], [0, 1]]), np.array([1.0, 2.0, 0.5])
    cp = fastcep.fit(coords, values, model="cp_gaussian", rank=1)
    with pytest.raises(FileExistsError, match="holds a fastcep regression model, not a fastcep CP model"):
        fastcep.save(cp, "m.h5")
    fastcep.save(model, "train.csv", force=True)
    assert load_glm_model("train.csv").result.posterior.mean.tolist() == model.posterior.mean.tolist()
    # read-only: refused, with force too
    os.chmod(folder / "m.h5", 0o444)
    before = (folder / "m.h5").read_bytes()
    for force in (False, True):
        with pytest.raises(PermissionError, match="'m.h5' is read-only; it is not replaced"):
            fastcep.save(model, "m.h5", force=force)
    assert (folder / "m.h5").read_bytes() == before
    # a link is written through: it stays a link, its target holds the model
    (folder / "models").mkdir()
    os.symlink(folder / "models" / "real.h5", folder / "link.h5")
    fastcep.save(model, "link.h5")
    fastcep.save(model, "link.h5")
    assert os.path.islink(folder / "link.h5") and (folder / "models" / "real.h5").is_file()
    again = fastcep.load(folder / "models" / "real.h5")
    assert again.posterior.mean.tolist() == model.posterior.mean.tolist()


def test_the_command_line_refuses_a_read_only_output(folder, capsys):
    assert main([*GLM_FIT, "-o", "m.h5"]) == 0
    os.chmod(folder / "m.h5", 0o444)
    before = (folder / "m.h5").read_bytes()
    for extra in ((), ("--force",)):
        assert "'m.h5' is read-only; it is not replaced" in refused(capsys, *GLM_FIT, "-o", "m.h5", *extra)
    assert (folder / "m.h5").read_bytes() == before
