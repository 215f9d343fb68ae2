"""Test helper: a program run twice on one empty kernel cache, compiled in the first process and
loaded from the cache in the second (``tests/test_style.py``, ``bench/test_long_checks.py``)."""

import os
import subprocess
import sys


def compiled_then_cached(code, tmp_path):
    """stdout of ``code`` run in two fresh processes (one thread) that share one empty kernel
    cache: the first compiles the kernels and caches them, the second loads them."""
    cache = tmp_path / "cache"
    env = dict(os.environ, FASTCEP_CACHE_DIR=str(cache), NUMBA_NUM_THREADS="1")
    runs = [subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)]
    runs.append(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True))
    for run in runs:
        assert run.returncode == 0, run.stderr[-3000:]
    assert list(cache.rglob("*.nbc")), "nothing was cached"
    return [run.stdout for run in runs]
