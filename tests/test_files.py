"""Files: no input overwritten, nothing half-written, a full disk reported in one line, stale
temporary files removed, permissions by the umask."""

import hashlib
import os
import resource
import subprocess
import sys

import h5py
import numpy as np
import pytest
from edits import edited
from flips import flip_bytes

import fastcep
from fastcep.cli import main
from fastcep.data_tools import make_cp_tensor
from fastcep.io.files import TMP_PREFIX, AtomicH5, NoRoomError, check_output, remove_stale_temporaries


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    T, _ = make_cp_tensor((12, 10, 8), 2, 600, noise_sd=0.1, seed=0)
    fastcep.write_tensor("X.h5", T.coords, T.values, shape=T.shape)
    with open("a.txt", "w") as f:
        for c, v in zip(T.coords, T.values, strict=True):
            f.write("\t".join(str(int(i) + 1) for i in c) + f"\t{v:.6f}\n")
    os.symlink("X.h5", "link.h5")
    os.link("X.h5", "hard.h5")
    return tmp_path


# ------------------------------------------------------------------ inputs are never outputs
@pytest.mark.parametrize(
    "argv",
    [
        ["fit", "X.h5", "-o", "X.h5"],
        ["fit", "X.h5", "-o", "link.h5"],
        ["fit", "X.h5", "-o", "hard.h5"],
        ["stream", "X.h5", "-o", "X.h5"],
        ["stream", "X.h5", "-o", "m.h5", "--checkpoint", "X.h5"],
        ["stream", "X.h5", "-o", "m.h5", "--checkpoint", "./link.h5"],
    ],
)
def test_an_output_that_is_the_input_is_refused(workdir, capsys, argv):
    before = digest("X.h5")
    assert main([*argv, "--model", "cp_gaussian", "--rank", "2", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is the input file" in err and "choose another path" in err
    assert digest("X.h5") == before and not os.path.exists("m.h5")


def test_convert_onto_its_input_is_refused(workdir, capsys):
    before = digest("a.txt")
    assert main(["convert", "a.txt", "a.txt"]) == 2
    assert "is the input file" in capsys.readouterr().err
    assert digest("a.txt") == before


def test_the_output_folder_is_checked_before_the_work(workdir, capsys):
    os.mkdir("ro")
    os.chmod("ro", 0o500)
    try:
        folder = "ro"
        if os.access("ro", os.W_OK):  # root writes into read-only folders, not into /proc
            if not os.path.isdir("/proc/self"):
                pytest.skip("this user writes into read-only folders")
            folder = "/proc"
        argv = ["fit", "X.h5", "-o", f"{folder}/m.h5", "--model", "cp_gaussian", "--rank", "2"]
        assert main([*argv, "--max-iter", "100000", "--tol", "0"]) == 2  # (the fit would be long)
        assert "cannot write the output" in capsys.readouterr().err
    finally:
        os.chmod("ro", 0o700)


def test_check_output_refuses_folders_and_missing_folders(tmp_path):
    with pytest.raises(IsADirectoryError, match="is a folder"):
        check_output(tmp_path)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        check_output(tmp_path / "none" / "m.h5")
    check_output(tmp_path / "m.h5", [tmp_path / "other.h5"])  # fine: no file written
    assert os.listdir(tmp_path) == []


def test_stream_api_refuses_its_input_as_checkpoint(workdir):
    with pytest.raises(ValueError, match="checkpoint 'hard.h5' is the input file"):
        fastcep.stream("X.h5", model="cp_gaussian", rank=2, checkpoint="hard.h5")


# ------------------------------------------------------------------ a full disk
#: each writes the file "out.h5" in the current folder (the command line with --force: the
#: previous file is not of its kind)
WRITERS = {
    "convert": "from fastcep.cli import main; sys.exit(main(['convert', 'a.txt', 'out.h5', '--force']))",
    "text_to_tensor": "fastcep.text_to_tensor('a.txt', 'out.h5')",
    "write_tensor": (
        "c, v, s = fastcep.read_tensor('X.h5'); fastcep.write_tensor('out.h5', np.tile(c, (40, 1)), "
        "np.tile(v, 40), shape=s)"
    ),
    "fit -o": (
        "from fastcep.cli import main; "
        "sys.exit(main(['fit', 'X.h5', '-o', 'out.h5', '--model', 'cp_gaussian', '--rank', '6', '--quiet',"
        " '--force']))"
    ),
    "stream checkpoint": (
        "fastcep.stream('X.h5', model='cp_gaussian', rank=6, batch_size=200, checkpoint='out.h5')"
    ),
}


def warm_kernels(writer):
    """The kernels of a writer that fits, compiled in this process first, so that its subprocess
    loads them from the kernel cache: compiled under the file-size limit, they could not be
    written to the cache (a KernelCacheWarning each), and each subprocess took about a minute."""
    if writer in ("fit -o", "stream checkpoint") and writer not in _WARM:
        c, v, shape = fastcep.read_tensor("X.h5")
        if writer == "fit -o":
            fastcep.fit(c, v, model="cp_gaussian", rank=6, shape=shape)
        else:
            fastcep.stream("X.h5", model="cp_gaussian", rank=6, batch_size=200)
        _WARM.append(writer)


_WARM = []


def run_limited(code, limit, cwd):
    """Run ``code`` in a subprocess whose files may not exceed ``limit`` bytes (RLIMIT_FSIZE)."""

    def limited():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    prog = f"import sys, numpy as np, fastcep\n{code}\n"
    return subprocess.run(
        [sys.executable, "-c", prog], cwd=cwd, preexec_fn=limited, capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize("writer", list(WRITERS))
def test_a_full_disk_is_one_clear_error_and_the_previous_file_survives(workdir, writer):
    with h5py.File("out.h5", "w") as f:  # the previous file, smaller than the limit
        f.attrs["previous"] = 1
    before = digest("out.h5")
    warm_kernels(writer)
    out = run_limited(WRITERS[writer], 20_000, workdir)
    assert out.returncode in (1, 2), (out.returncode, out.stderr[-2000:])  # not a crash (-11)
    lines = out.stderr.strip().splitlines()
    assert "File too large" in lines[-1] and "ulimit -f" in lines[-1], out.stderr[-2000:]
    if writer in ("convert", "fit -o"):
        assert out.returncode == 2 and len(lines) == 1  # the command line: one line, status 2
    else:
        assert "NoRoomError" in lines[-1]
    assert digest("out.h5") == before
    assert not [n for n in os.listdir(workdir) if n.startswith(".tmp")]


@pytest.mark.parametrize("writer", list(WRITERS))
def test_the_writers_write_when_there_is_room(workdir, writer):
    warm_kernels(writer)
    out = run_limited(WRITERS[writer], 1 << 30, workdir)
    assert out.returncode == 0, out.stderr[-2000:]
    with h5py.File("out.h5", "r") as f:
        assert str(f.attrs["format"]).startswith("fastcep-")


def test_no_room_error_is_an_os_error(tmp_path):
    assert issubclass(NoRoomError, OSError)


# ------------------------------------------------------------------ temporary files, permissions
def test_temporaries_of_a_killed_writer_are_removed_by_the_next_write(tmp_path):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    stale = tmp_path / f"{TMP_PREFIX}{gone.pid}-abc.h5"
    stale.write_bytes(b"half")
    live = tmp_path / f"{TMP_PREFIX}{os.getppid()}-abc.h5"  # a running process's: kept
    live.write_bytes(b"busy")
    other = tmp_path / ".tmp-user.h5"  # not ours: kept
    other.write_bytes(b"x")
    fastcep.write_tensor(tmp_path / "t.h5", [[0, 0], [1, 1]], [1.0, 2.0])
    assert not stale.exists() and live.exists() and other.exists()
    assert remove_stale_temporaries(tmp_path) == 0


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_files_follow_the_umask(tmp_path, umask):
    old = os.umask(umask)
    try:
        fastcep.write_tensor(tmp_path / "t.h5", [[0, 0], [1, 1]], [1.0, 2.0])
        with AtomicH5(tmp_path / "a.h5") as f:
            f.attrs["x"] = 1
    finally:
        os.umask(old)
    for name in ("t.h5", "a.h5"):
        assert os.stat(tmp_path / name).st_mode & 0o777 == 0o666 & ~umask


def test_an_error_inside_the_write_leaves_nothing(tmp_path):
    target = tmp_path / "m.h5"
    target.write_bytes(b"previous")
    with pytest.raises(RuntimeError, match="boom"):
        with AtomicH5(target) as f:
            f.create_dataset("x", data=np.arange(10))
            raise RuntimeError("boom")
    assert target.read_bytes() == b"previous" and os.listdir(tmp_path) == ["m.h5"]


# ------------------------------------------------------------------ model files are checked
@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    T, _ = make_cp_tensor((9, 8, 7), 2, 400, noise_sd=0.1, seed=1)
    res = fastcep.fit(T.coords, T.values, model="cp_gaussian", shape=T.shape, rank=2, max_iter=20)
    path = tmp_path_factory.mktemp("model") / "m.h5"
    fastcep.save_model(res, path)
    return path


def tampered(model_file, tmp_path, change, resign=True, reseal=True):
    """A copy of the model file with ``change(h5py.File)`` applied (and signed and sealed again:
    only the field checks can catch it)."""
    path = tmp_path / "t.h5"
    path.write_bytes(model_file.read_bytes())
    if reseal:
        with edited(path, resign) as f:
            change(f)
    else:
        with h5py.File(path, "a") as f:
            change(f)
    return path


def _set(name, value):
    def change(f):
        if name in f:
            del f[name]
            f[name] = value
        else:
            f.attrs[name] = value

    return change


def _negated(name):
    """The dataset ``name`` negated (a positive definite matrix becomes negative definite)."""

    def change(f):
        arr = np.array(f[name])
        del f[name]
        f[name] = -arr

    return change


@pytest.mark.parametrize(
    "change,match",
    [
        (_set("noise", [np.nan, 1.0]), "noise posterior"),
        (_set("noise", [0.0, 0.0]), "noise posterior"),
        (_negated("covs/0"), "not positive definite"),
        (_set("model", "banana"), "unknown model 'banana'"),
        (_set("covariance", "sparse"), "unknown covariance"),
        (_set("rank", 2.5), "rank is 2.5, not an integer"),
        (_set("shape", [9.0, 8.0, 7.0]), "shape is 9.0, not an integer"),
        (_set("shape", [9, 8, 6]), "mode 2 arrays have shapes"),
        (_set("means/1", np.full((8, 2), np.inf)), "mode 1 holds non-finite numbers"),
        (_set("n_iter", 10**6), "does not match its trace"),
        (_set("options", "[1, 2]"), "not a JSON object"),
    ],
)
def test_every_field_of_a_model_file_is_checked(model_file, tmp_path, change, match):
    with pytest.raises(fastcep.FileFormatError, match=match):
        fastcep.load_model(tampered(model_file, tmp_path, change))


def test_a_changed_model_file_fails_its_checksum(model_file, tmp_path):
    for reseal in (False, True):  # (refused by its seal, or by its contents' digest)
        path = tampered(model_file, tmp_path, _set("noise", [2.0, 3.0]), resign=False, reseal=reseal)
        with pytest.raises(fastcep.FileFormatError, match="checksum does not match"):
            fastcep.load_model(path)
    path = tampered(model_file, tmp_path, lambda f: f.attrs.__delitem__("sha256"), resign=False)
    with pytest.raises(fastcep.FileFormatError, match="checksum is missing"):
        fastcep.load_model(path)


def _numbers(res):
    post = res.posterior
    return [*post.means, *post.covs, np.asarray(post.noise), res.trace.change, res.options]


def test_single_byte_flips_never_load_as_changed_numbers(model_file, tmp_path):
    """Before the checksum, 24 of 200 flips loaded with changed numbers."""
    loaded, refused = flip_bytes(model_file, tmp_path / "flip.h5", 200, fastcep.load_model, _numbers)
    assert refused > 20 and loaded + refused == 200  # (measured: 83 refused, 117 unused bytes)


# ------------------------------------------------------------------ checkpoints
STREAM = dict(model="cp_gaussian", rank=2, batch_size=100)


@pytest.fixture
def partial_checkpoint(workdir):
    """A stream over X.h5 stopped after two of its six batches, with its checkpoint ck.h5."""
    fastcep.stream("X.h5", checkpoint="ck.h5", max_batches=2, **STREAM)
    return workdir / "ck.h5"


def test_a_checkpoint_resumes_only_on_its_data(workdir, partial_checkpoint):
    c, v, shape = fastcep.read_tensor("X.h5")
    fastcep.write_tensor("other.h5", c, v + 0.5, shape=shape)  # same shape, length and options
    with pytest.raises(fastcep.FileFormatError, match="written for other data"):
        fastcep.stream("other.h5", checkpoint="ck.h5", resume=True, **STREAM)
    with pytest.raises(fastcep.FileFormatError, match="written for other data"):
        fastcep.stream(c, v + 0.5, shape=shape, checkpoint="ck.h5", resume=True, **STREAM)
    # the same entries elsewhere: content, not path
    os.rename("X.h5", "moved.h5")
    res = fastcep.stream("moved.h5", checkpoint="ck.h5", resume=True, **STREAM)
    assert res.state.batches_done == 6


@pytest.mark.parametrize(
    "change,match",
    [
        (_set("seen", np.ones(5, dtype=bool)), "seen has shape"),
        (_set("batches_done", 10**6), "batches_done 1000000 is outside 0..6"),
        (_set("rows_done", 150), "rows_done 150 does not match 2 batches of 100"),
        (_set("batches_done", 1.5), "batches_done is 1.5, not an integer"),
        (_set("noise", [np.nan, 1.0]), "non-finite"),
        (_set("noise", [0.0, 1.0]), "noise posterior"),
        (_negated("P_Lam"), "P_Lam holds a matrix that is not positive definite"),
        (_set("options", "[]"), "not a JSON object"),
    ],
)
def test_every_field_of_a_checkpoint_is_checked(partial_checkpoint, change, match):
    with edited(partial_checkpoint) as f:
        change(f)
    with pytest.raises(fastcep.FileFormatError, match=match):
        fastcep.stream("X.h5", checkpoint="ck.h5", resume=True, **STREAM)


def test_a_changed_checkpoint_fails_its_checksum(partial_checkpoint):
    with h5py.File(partial_checkpoint, "a") as f:
        f.attrs["batches_done"] = 1
    with pytest.raises(fastcep.FileFormatError, match="checksum does not match"):
        fastcep.stream("X.h5", checkpoint="ck.h5", resume=True, **STREAM)


def test_every_byte_of_a_checkpoint_s_seal_counts(partial_checkpoint, tmp_path):
    """Issue 56: a checkpoint's first 512 bytes (its seal: format, length, digest) are checked
    before HDF5 reads the file; a flip in the format's name once passed (the digest covered only
    the bytes after the seal)."""
    from fastcep.io import read_checkpoint

    good = partial_checkpoint.read_bytes()
    flipped = tmp_path / "flipped.h5"
    for pos in range(512):
        data = bytearray(good)
        data[pos] ^= 1 << (pos % 8)
        flipped.write_bytes(bytes(data))
        with pytest.raises(fastcep.FileFormatError):
            read_checkpoint(flipped, None)


def test_a_refused_resume_names_the_settings_that_differ(workdir, partial_checkpoint, capsys):
    """Issue 56: "... (method: checkpoint None vs now 'post', prior_var: checkpoint 1.0 vs now 2.0,
    ..., prior: checkpoint 'wishart' vs now None)": internal values (a default is left out: None)."""
    argv = ["stream", "X.h5", "-o", "m.h5", "--checkpoint", "ck.h5", "--resume", "--model", "cp_gaussian"]
    argv += ["--rank", "2", "--batch-size", "100", "--method", "post", "--prior-var", "2", "--quiet"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "None" not in err
    assert (
        "settings (method cep1 in the checkpoint, post now; prior_var 1.0 in the checkpoint, 2.0 now;" in err
    )
    assert (
        "; prior wishart in the checkpoint, fixed now)." in err
    )  # (fixed: a default, left out of the run's)


def test_a_version_1_checkpoint_resumes_with_a_warning(partial_checkpoint):
    """Checkpoints written before the digests existed still resume, but say that their data
    cannot be checked."""
    with edited(partial_checkpoint, resign=False) as f:
        f.attrs["format_version"] = 1
        del f.attrs["sha256"], f.attrs["data_sha256"]
    with pytest.warns(UserWarning, match="predates data digests"):
        res = fastcep.stream("X.h5", checkpoint="ck.h5", resume=True, **STREAM)
    assert res.state.batches_done == 6


# ------------------------------------------------------------------ memory
def test_a_fit_that_cannot_fit_in_memory_is_refused_before_allocating(monkeypatch, capsys, tmp_path):
    from fastcep.tensor import layout

    rng = np.random.default_rng(0)
    c, v = rng.integers(0, 20, (2000, 3)), rng.normal(size=2000)
    with pytest.raises(MemoryError, match=r"needs about 547\.6 GiB .*1000000040 objects.*rank 2"):
        fastcep.fit(c, v, model="cp_gaussian", rank=2, shape=(10**9, 20, 20))
    with pytest.raises(MemoryError, match="the stream needs about"):
        fastcep.stream(c, v, model="cp_gaussian", rank=2, shape=(10**9, 20, 20))
    monkeypatch.setattr(layout, "available_bytes", lambda: 2**30)  # 1 GiB left
    for method in ("cep1", "lp", "vmp"):  # (CP-WOPT holds no covariances: 0.2 GiB)
        with pytest.raises(MemoryError, match="1.0 GiB are available: lower the rank"):
            fastcep.fit(c, v, model="cp_gaussian", rank=1000, method=method)
    fastcep.write_tensor(tmp_path / "t.h5", c, v)
    argv = ["fit", str(tmp_path / "t.h5"), "-o", str(tmp_path / "m.h5"), "--model", "cp_gaussian"]
    assert main([*argv, "--rank", "1000"]) == 2
    assert "needs about" in capsys.readouterr().err


@pytest.mark.parametrize("covariance", ["full", "diag"])
@pytest.mark.parametrize("model, copies", [("cp_gaussian", 1), ("cp_student_t", 2)])
def test_the_memory_estimate_bounds_what_a_fit_allocates(covariance, model, copies):
    """The estimate is above what the fit's arrays take (tracemalloc sees numpy's), and not
    absurdly so; a Student-t fit's guard keeps a second copy of the messages."""
    import tracemalloc

    from fastcep.tensor.layout import estimate_bytes

    T, _ = make_cp_tensor((300, 200, 100), 8, 20_000, noise_sd=0.1, seed=0)
    kw = dict(model=model, shape=T.shape, rank=8, max_iter=2, covariance=covariance)
    fastcep.fit(T.coords, T.values, **kw)
    tracemalloc.start()
    try:
        fastcep.fit(T.coords, T.values, **kw)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    est = estimate_bytes(20_000, T.shape, 8, covariance, copies)
    assert peak < est < 6 * peak, (peak, est)
    if copies > 1:  # (one copy's estimate does not bound it: 58 MB against 80 MB, full)
        assert estimate_bytes(20_000, T.shape, 8, covariance) < peak


def test_text_to_tensor_refuses_its_input_as_output(workdir):
    before = digest("a.txt")
    with pytest.raises(ValueError, match="text_to_tensor: the output 'a.txt' is the input file"):
        fastcep.text_to_tensor("a.txt", "a.txt")
    assert digest("a.txt") == before


def test_a_changed_regression_model_file_fails_its_checksum(tmp_path):
    from fastcep.io import load_glm_model, save_glm_model

    X = np.random.default_rng(0).normal(size=(200, 2))
    res = fastcep.fit(X, X[:, 0] > 0, model="probit")
    save_glm_model(res, tmp_path / "g.h5", ["a", "b"])
    assert load_glm_model(tmp_path / "g.h5").result.posterior.mean.tolist() == res.posterior.mean.tolist()
    with h5py.File(tmp_path / "g.h5", "a") as f:
        del f["features"]
        f.create_dataset("features", data=np.array(["a", "c"], dtype=object), dtype=h5py.string_dtype())
    with pytest.raises(fastcep.FileFormatError, match="checksum does not match"):
        load_glm_model(tmp_path / "g.h5")


def test_a_model_file_predicts_on_any_thread_count(tmp_path):
    T, _ = make_cp_tensor((9, 8, 7), 2, 400, noise_sd=0.1, seed=1)
    res = fastcep.fit(T.coords, T.values, model="cp_gaussian", shape=T.shape, rank=2, n_threads=1, max_iter=5)
    expected = res.predict(T.coords[:10])
    res.options["n_threads"] = 10_000  # (a machine with more cores wrote it)
    fastcep.save_model(res, tmp_path / "m.h5")
    back = fastcep.load_model(tmp_path / "m.h5")
    assert back.options["n_threads"] is None
    np.testing.assert_array_equal(back.predict(T.coords[:10]), expected)


def test_a_non_integer_shape_is_refused_not_truncated():
    c, v = np.array([[0, 0], [1, 2]]), np.array([1.0, 2.0])
    for shape in ((2, 8.5), (2.0, 3), (2, True)):
        with pytest.raises(TypeError, match="'shape' parameter of fit must be a sequence of 2 positive ints"):
            fastcep.fit(c, v, model="cp_gaussian", rank=1, shape=shape)
    with pytest.raises(TypeError, match="'shape' parameter of stream"):
        fastcep.stream(c, v, model="cp_gaussian", rank=1, shape=(2, 8.5))
    fastcep.fit(c, v, model="cp_gaussian", rank=1, shape=(np.int64(2), 3), max_iter=2, tol=0)
