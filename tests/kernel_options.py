"""Test helper: every compiled kernel of a module uses the central options of ``kernels._config``."""

from numba.core.registry import CPUDispatcher

from fastcep.kernels._config import ERROR_MODEL, FASTMATH


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
        assert disp._cache.__class__.__name__ == "FunctionCache"
    return len(found)
