"""Peak resident memory of a stretch of work, for the benchmarks' peak-memory subprocesses.

``ru_maxrss`` cannot be used there: Linux carries the high-water mark of a process across fork
and exec, so a subprocess started from a pytest process that holds gigabytes of benchmark data
reports the parent's peak (the regression benchmark once printed 0.00 x for that reason).
``reset_peak`` sets the high-water mark to the current resident size (Linux 4.0+).
"""

import pathlib
import subprocess
import sys

CLEAR_REFS = pathlib.Path("/proc/self/clear_refs")
#: the repository root: the scripts of ``run_script`` import ``bench._peak`` from there
ROOT = pathlib.Path(__file__).resolve().parents[1]


def status(key):
    """Bytes of a /proc/self/status field ("VmRSS:", "VmHWM:")."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(key))


def reset_peak():
    """Reset the high-water mark to the current RSS; returns the current RSS in bytes."""
    with open(CLEAR_REFS, "w") as f:
        f.write("5")
    return status("VmRSS:")


def peak():
    """The high-water mark (bytes) since the last ``reset_peak``."""
    return status("VmHWM:")


def run_script(script, *args):
    """Run a peak-memory script (which uses ``reset_peak`` / ``peak``) in a fresh interpreter;
    returns its standard output. The caller skips where ``CLEAR_REFS`` does not exist."""
    out = subprocess.run(
        [sys.executable, "-c", script, *map(str, args)], capture_output=True, text=True, check=True, cwd=ROOT
    )
    return out.stdout
