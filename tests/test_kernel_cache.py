"""The kernel cache never breaks an import or a fit (issue 38, items 1-5; kernels/_cache.py): no
writable folder, damaged entries, and a user's likelihood, whose kernels are never written."""

import os
import pathlib
import pickle
import resource
import shutil
import subprocess
import sys
import time

import numba
import numpy as np
import pytest

import fastcep
from fastcep.likelihoods import Custom

#: one cached leaf compiled (or loaded) in a fresh process, its value checked, the folder printed
_LEAF_RUN = (
    "import warnings; warnings.simplefilter('always');"
    "import fastcep, fastcep.kernels as K; from fastcep.kernels.special import log_ndtr;"
    "assert abs(log_ndtr(0.0) + 0.6931471805599453) < 1e-15, log_ndtr(0.0);"
    "print(K.CACHE_FOLDER)"
)


def _run(code, cache):
    env = dict(os.environ, FASTCEP_CACHE_DIR=str(cache))
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)


def test_no_writable_cache_folder_compiles_in_memory_and_warns_once(tmp_path):
    """Before: ``import fastcep`` raised "cannot cache function 'finite': no locator available"
    where no folder could be written (here the root is below a file, which no user can write)."""
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    import fastcep.kernels

    beside = pathlib.Path(fastcep.kernels.__file__).parent
    before = set(beside.rglob("*.nb?"))
    out = _run(_LEAF_RUN, blocker / "cache")
    assert out.returncode == 0, out.stderr
    assert out.stderr.count("KernelCacheWarning") == 1, out.stderr
    assert "cannot be written" in out.stderr and str(blocker / "cache") in out.stderr
    assert set(beside.rglob("*.nb?")) == before  # (numba's fallback would write beside the sources)


def test_a_kernel_that_cannot_be_written_is_kept_in_memory_and_warns_once(tmp_path):
    """Before: a full disk or a file size limit while numba wrote a compiled kernel ended the
    process with "[Errno 27] File too large" from inside the compiler (a fit's ``-o`` never
    reached its own clear error). Now the kernel is used from memory, its entry is removed, one
    KernelCacheWarning says so, and a later process with room caches it."""
    cache = tmp_path / "cache"

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (2_000, 2_000))  # (the index fits, the object code not)

    env = dict(os.environ, FASTCEP_CACHE_DIR=str(cache))
    out = subprocess.run(
        [sys.executable, "-c", _LEAF_RUN], env=env, capture_output=True, text=True, preexec_fn=small_files
    )
    assert out.returncode == 0, out.stderr
    assert out.stderr.count("KernelCacheWarning") == 1, out.stderr
    assert "could not be written" in out.stderr and "File too large" in out.stderr, out.stderr
    folder = pathlib.Path(out.stdout.strip())
    assert not list(folder.rglob("*special*.nbi")) and not list(folder.rglob("*.tmp.*"))
    again = _run(_LEAF_RUN, cache)
    assert again.returncode == 0 and "KernelCacheWarning" not in again.stderr, again.stderr
    assert list(folder.rglob("*special*.nbc"))


#: _LEAF_RUN, and how its leaf was found: (compiled here, loaded from the cache)
_LEAF_STATS = (
    _LEAF_RUN + ";st = log_ndtr.stats;print(sum(st.cache_misses.values()), sum(st.cache_hits.values()))"
)


def test_a_process_waits_for_another_compiling_the_same_kernel_and_loads_it(tmp_path):
    """Two processes that start on an empty cache (the test run's workers, a cluster's) compile
    each kernel once: the first takes the kernel's lock and is slowed here while it holds it; the
    second, started then, waits for the lock and loads what the first wrote (before: both
    compiled everything, each on a core of its own)."""
    cache, started = tmp_path / "cache", tmp_path / "started"
    slowed = (
        "import pathlib, time, fastcep.kernels._cache as C\n"
        "take = C.take_lock\n"
        "def slow(path, wait):\n"
        "    fd = take(path, wait)\n"
        "    if 'log_ndtr' in path and fd is not None:\n"
        f"        pathlib.Path({str(started)!r}).write_text('')\n"
        "        time.sleep(3)\n"
        "    return fd\n"
        "C.take_lock = slow\n"
    )
    env = dict(os.environ, FASTCEP_CACHE_DIR=str(cache))
    first = subprocess.Popen(
        [sys.executable, "-c", slowed + _LEAF_STATS],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    for _ in range(1200):  # (the first process's import and its lock: a minute at most)
        if started.exists() or first.poll() is not None:
            break
        time.sleep(0.05)
    assert started.exists(), first.communicate()[1]
    second = _run(_LEAF_STATS, cache)
    out, err = first.communicate(timeout=120)
    assert first.returncode == 0 and second.returncode == 0, err + second.stderr
    assert out.split()[-2:] == ["1", "0"]  # (compiled)
    assert second.stdout.split()[-2:] == ["0", "1"]  # (waited, then loaded)


def _damage_truncate(path):
    path.write_bytes(path.read_bytes()[:100])


def _damage_flip(path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x10
    path.write_bytes(bytes(data))


def _damage_garbage(path):
    path.write_bytes(b"\x80\x04not a pickle at all")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """A cache into which a fresh process compiled the leaf: (the cache root, its kernel folder);
    each test damages a copy of it."""
    cache = tmp_path_factory.mktemp("compiled") / "cache"
    first = _run(_LEAF_RUN, cache)
    assert first.returncode == 0, first.stderr
    return cache, pathlib.Path(first.stdout.strip())


def _copy(compiled, tmp_path):
    """A copy of the compiled cache below ``tmp_path``: (its root, its kernel folder)."""
    cache, folder = compiled
    shutil.copytree(cache, tmp_path / "cache")
    return tmp_path / "cache", tmp_path / "cache" / folder.relative_to(cache)


@pytest.mark.parametrize(
    "suffix, damage",
    [
        (".nbc", _damage_truncate),
        (".nbc", _damage_flip),
        (".nbi", _damage_garbage),
        (".nbi", _damage_truncate),
    ],
)
def test_a_damaged_entry_is_dropped_recompiled_and_named(compiled, tmp_path, suffix, damage):
    """Before: an LLVM or unpickling traceback, exit 1, and the same again in every process."""
    cache, folder = _copy(compiled, tmp_path)
    files = sorted(folder.rglob(f"special.log_ndtr-*{suffix}"))
    assert len(files) == 1, sorted(folder.rglob("*"))
    damage(files[0])
    second = _run(_LEAF_RUN, cache)
    assert second.returncode == 0, second.stderr
    assert "KernelCacheWarning" in second.stderr and "damaged" in second.stderr
    assert str(folder) in second.stderr and "log_ndtr" in second.stderr
    third = _run(_LEAF_RUN, cache)  # compiled again and written whole: loaded without a word
    assert third.returncode == 0 and "KernelCacheWarning" not in third.stderr, third.stderr
    assert len(sorted(folder.rglob("special.log_ndtr-*.nbc"))) == 1


def test_a_data_file_carries_its_digest(compiled):
    """The check that catches a flipped byte before LLVM reads the object code."""
    import hashlib

    (data,) = compiled[1].rglob("special.log_ndtr-*.nbc")
    raw = data.read_bytes()
    assert hashlib.sha256(raw[:-32]).digest() == raw[-32:]


def _indexes():
    """Every index of the kernel cache this process uses: its (signature) keys as text."""
    keys = {}
    for path in pathlib.Path(fastcep.kernels.CACHE_FOLDER).rglob("*.nbi"):
        with open(path, "rb") as f:
            pickle.load(f)
            _, overloads = pickle.loads(f.read())  # (a Custom_<lambda> class made this raise)
        keys[path] = [str(key[0]) for key in overloads]
    return keys


def test_custom_kernels_are_never_written_and_a_lambda_does_not_break_later_fits():
    """Before: a fit with Custom(njit(lambda ...)) wrote index entries typed with a class named
    'Custom_<lambda>', which no later process could read ("Type names ... must be valid
    identifiers") until the cache was deleted; every Custom fit added entries never found again."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 2))
    y = rng.poisson(np.exp(X @ [0.4, -0.3] + 0.5)).astype(float)
    lam = numba.njit(lambda y, f: y * f - np.exp(f))
    res = fastcep.fit(X, y, model=Custom(lam), max_iter=50)
    assert np.all(np.isfinite(res.posterior.mean))
    name = type(Custom(lam).kernel()).__name__
    assert name.isidentifier() and name.startswith("Custom_")
    for path, keys in _indexes().items():
        assert not [k for k in keys if "Custom" in k], path


def _lp_one_argument(y):
    return y


def _lp_tuple(y, f):
    return y, f


def _lp_untypable(y, f):
    return y + "a"


def _lp_nan_at_three(y, f):
    return np.nan if y == 3.0 else -f * f


@pytest.mark.parametrize(
    "func, error, words",
    [
        (_lp_one_argument, TypeError, "too many arguments"),
        (_lp_tuple, TypeError, "must return one float"),
        (_lp_untypable, TypeError, "numba cannot compile logpdf(y=0.0, f=0.0): No implementation"),
        (_lp_nan_at_three, ValueError, "logpdf(y=3.0, f=-3.0) is nan at y[2]"),
    ],
)
def test_a_users_log_density_is_checked_before_the_fit(func, error, words):
    """Before: a raw numba TypingError, or a NaN blamed on "the scale of X" after 11 s."""
    X = np.eye(5)[:, :2]
    y = np.array([0.0, 1.0, 3.0, 1.0, 3.0])
    with pytest.raises(error) as info:
        fastcep.fit(X, y, model=Custom(numba.njit(func)))
    assert words in str(info.value)
    assert str(info.value).startswith("Custom: ")


def test_minus_infinity_is_a_density_of_zero_and_allowed():
    """A log-density may be -inf (the probe refuses NaN and +inf only)."""
    lp = numba.njit(lambda y, f: -np.inf if y < 0 else -0.5 * (y - f) ** 2)
    Custom(lp).probe(np.array([-1.0, 0.5, 2.0]))
    with pytest.raises(ValueError, match="inf at y"):
        Custom(numba.njit(lambda y, f: np.inf)).probe(np.array([1.0]))
