"""Test helper: every compiled kernel of a module uses the central options of ``kernels._config``."""

from numba.core.registry import CPUDispatcher

from fastcep.kernels._cache import KernelCache
from fastcep.kernels._config import ERROR_MODEL, FASTMATH


def cached_on_disk(disp):
    """Whether the jitted function ``disp`` goes through the kernels' disk cache (a KernelCache
    at the kernels' folder, enabled)."""
    cache = disp._cache
    return isinstance(cache, KernelCache) and cache._kernel and cache._enabled


def central_options_count(module, imported=False):
    """Asserts that every kernel compiled in ``module`` (with ``imported`` also those it imports
    from other modules) uses FASTMATH, the numpy error model and the disk cache; returns how
    many kernels it checked."""
    found = [
        obj
        for obj in vars(module).values()
        if isinstance(obj, CPUDispatcher) and (imported or obj.__module__ == module.__name__)
    ]
    for disp in found:
        assert disp.targetoptions.get("fastmath") is FASTMATH
        assert disp.targetoptions.get("error_model") == ERROR_MODEL
        assert cached_on_disk(disp), disp
    return len(found)
