"""Project rules that a test can hold: one fastmath setting, cached leaves, no nnan/ninf."""

import importlib
import inspect
import pathlib
import pkgutil

from numba.core.registry import CPUDispatcher

import fastcep.kernels
from fastcep.kernels._config import FASTMATH, FASTMATH_ORDERED


def _kernel_modules():
    """Every module below fastcep.kernels (the folders included)."""
    mods = []
    for info in pkgutil.walk_packages(fastcep.kernels.__path__, "fastcep.kernels."):
        mods.append(importlib.import_module(info.name))
    return mods


KERNEL_MODULES = tuple(_kernel_modules())


def _dispatchers():
    for mod in KERNEL_MODULES:
        for name, obj in vars(mod).items():
            if isinstance(obj, CPUDispatcher) and obj.__module__ == mod.__name__:
                yield f"{mod.__name__}.{name}", obj


ORDERED_LEAVES = {
    "fastcep.kernels.special.exp_bounded",
    "fastcep.kernels.special.sigmoid_pair_bounded",
    "fastcep.kernels.likelihoods.adaptive._offset",
}


def test_every_kernel_uses_the_central_fastmath_set():
    found = list(_dispatchers())
    assert len(found) > 15
    for name, disp in found:
        # FASTMATH_ORDERED: the leaves whose error analysis fixes the order of operations
        expected = FASTMATH_ORDERED if name in ORDERED_LEAVES else FASTMATH
        assert disp.targetoptions.get("fastmath") is expected, name
    assert isinstance(FASTMATH, set) and not FASTMATH & {"nnan", "ninf", "fast"}
    assert FASTMATH_ORDERED == FASTMATH - {"reassoc"}


def test_every_kernel_is_cached_and_uses_the_central_options():
    # parallel drivers are cached too: their compile time dominated a first fit (BENCHMARKS.md)
    from fastcep.kernels._config import ERROR_MODEL

    for name, disp in _dispatchers():
        assert disp._cache.__class__.__name__ == "FunctionCache", name
        assert disp.targetoptions.get("error_model") == ERROR_MODEL, name


def test_the_kernels_test_finiteness_in_a_form_their_fastmath_keeps():
    """numba's math.isfinite(x) is ``x - x`` compared with itself; under the kernels' fastmath
    (reassoc and nsz) LLVM folds it to True when x is a sum or a difference, so the kernels use
    ``special.finite`` (a comparison, never folded without nnan / ninf), and no kernel source
    calls math.isfinite."""
    import math

    from numba import njit

    from fastcep.kernels.special import finite

    @njit(fastmath=FASTMATH)
    def checks(a, b):
        return finite(a - b), finite(a + b), finite(a * b), finite(a)

    assert checks(-math.inf, 0.0) == (False, False, False, False)
    assert checks(math.nan, 1.0) == (False, False, False, False)
    assert checks(1.0, 2.0) == (True, True, True, True)
    assert checks(math.inf, math.inf) == (False, False, False, False)
    root = pathlib.Path(inspect.getfile(fastcep.kernels)).parent
    for path in root.rglob("*.py"):
        code = [line for line in path.read_text().splitlines() if not line.lstrip().startswith(("#", "``"))]
        assert not any("math.isfinite(" in line and "``" not in line for line in code), path


def test_no_fastmath_true_in_sources():
    root = pathlib.Path(inspect.getfile(fastcep.kernels)).parent
    for path in list(root.rglob("*.py")) + list((root.parent / "fastcep").rglob("*.py")):
        assert "fastmath=True" not in path.read_text().replace(" ", ""), path


def test_ruff_lint_and_format_clean():
    import shutil
    import subprocess

    ruff = shutil.which("ruff")
    if ruff is None:
        import pytest

        pytest.skip("ruff not installed (dev extra)")
    root = pathlib.Path(__file__).resolve().parents[1]
    lint = subprocess.run([ruff, "check", "."], cwd=root, capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout
    fmt = subprocess.run([ruff, "format", "--check", "."], cwd=root, capture_output=True, text=True)
    assert fmt.returncode == 0, fmt.stdout
