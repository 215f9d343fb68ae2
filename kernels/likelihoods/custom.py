"""A user's own log-density behind the seam: ``custom_likelihood(logpdf)`` and ``uncached``.

``logpdf`` is a user's ``numba.njit`` function of two floats (y, f) returning log p(y | f); nothing
else is known about it. ``custom_likelihood`` makes a fresh NamedTuple class for it (one per
``logpdf``, remembered), registers a ``log_lik`` leaf that calls it, and as ``tilted`` leaf the
rule of ``adaptive`` without derivatives: Newton for the mode on central differences, then the
same refined rule (a weak factor's beta loses about log10(1 / (v |d^2/df^2 log p|)) digits there,
having no derivatives for the integration by parts; a second mode far from the one reached from
the cavity mean is not looked for, as there is no ``peak``).

Why not the cached drivers. The seam compiles a driver once per likelihood class and caches it on
disk (``seam``). Passing ``logpdf`` itself into a cached kernel would miss the cache in every
process (STYLE.md: the type of a jitted function is not stable across processes), and caching a
driver compiled for a class made here does not help either: the class is new in every process,
so its cache entries can never be found again, yet each process would write new ones (and the
cached code would not follow a change of ``logpdf``, whose source is outside ``kernels/``). So
such classes go through ``uncached(driver)``: the driver compiled from its Python function with
the same options but no disk cache, once per process (memoised), and likewise every jitted
function it calls by a global name (the leaves it calls with the likelihood would otherwise be
compiled through their own cached dispatchers). Its leaves here are uncached for the same reason.
"""

import types
import typing

from numba import jit, njit
from numba.core.registry import CPUDispatcher

from .._cache import NEVER_CACHED
from .._config import LEAF
from .adaptive import adaptive_tilted
from .seam import register

#: the options of the leaves here: those of every leaf, without the disk cache
UNCACHED_LEAF = {k: v for k, v in LEAF.items() if k != "cache"}

#: logpdf -> its likelihood class
_CLASSES = {}
#: dispatcher -> its uncached copy
_UNCACHED = {}
#: logpdf -> its probe (``probe``)
_PROBES = {}


def uncached(dispatcher):
    """An uncached copy of the jitted function ``dispatcher`` (same options, no disk cache), for
    likelihoods made by ``custom_likelihood`` (the module's text says why).

    The copy is compiled from ``dispatcher.py_func`` with a copy of its globals in which every
    jitted function it names is replaced by that function's own uncached copy, recursively (a
    jitted function reached as a module's attribute, ``mod.f``, is not replaced). Copies are
    memoised: calling ``uncached`` twice gives the same copy, compiled once per process and
    argument types.

    Parameters
    ----------
    dispatcher : numba CPUDispatcher
        A jitted function (a driver or a leaf).

    Returns
    -------
    numba CPUDispatcher
    """
    copy = _UNCACHED.get(dispatcher)
    if copy is not None:
        return copy
    py_func = dispatcher.py_func
    globals_ = dict(py_func.__globals__)
    func = types.FunctionType(
        py_func.__code__, globals_, py_func.__name__, py_func.__defaults__, py_func.__closure__
    )
    func.__qualname__ = py_func.__qualname__
    func.__doc__ = py_func.__doc__
    func.__kwdefaults__ = py_func.__kwdefaults__
    options = {k: v for k, v in dispatcher.targetoptions.items() if k != "cache"}
    copy = jit(**options)(func)  # (targetoptions hold nopython=True: ``jit``, not ``njit``)
    _UNCACHED[dispatcher] = copy  # before the recursion: a function may name itself
    for name in py_func.__code__.co_names:
        value = globals_.get(name)
        if isinstance(value, CPUDispatcher):
            globals_[name] = uncached(value)
    return copy


def custom_likelihood(logpdf):
    """The likelihood of a user's log-density: an instance of a NamedTuple class (new for each
    ``logpdf``, the same one for the same ``logpdf``) registered with the seam.

    Parameters
    ----------
    logpdf : numba CPUDispatcher
        ``numba.njit`` function of two floats (y, f) returning log p(y | f) (-inf where p is 0).

    Returns
    -------
    NamedTuple
        An instance with no fields; pass it to drivers compiled by ``uncached``.
    """
    cls = _CLASSES.get(logpdf)
    if cls is None:
        name = getattr(logpdf, "__name__", "logpdf")

        class cls(typing.NamedTuple):
            """The likelihood of a user's log-density (``logpdf``, its class attribute)."""

        # (a class name must be an identifier: numba pickles it, ``lambda`` has none)
        cls.__name__ = cls.__qualname__ = "Custom_" + (
            "".join(c if c.isalnum() else "_" for c in name).strip("_") or "logpdf"
        )

        def log_lik(lik, y, f):
            return logpdf(y, f)

        # (nothing is known of its shape: its sites may have negative precisions)
        register(
            cls, log_concave=False, log_lik=njit(**UNCACHED_LEAF)(log_lik), tilted=uncached(adaptive_tilted)
        )
        cls.logpdf = logpdf
        NEVER_CACHED.add(cls)  # (its kernels are neither read from nor written to the disk)
        _CLASSES[logpdf] = cls
    return cls()


def probe(logpdf):
    """A kernel ``run(ys, fs, out)`` setting out[i, j] = logpdf(ys[i], fs[j]), compiled once per
    ``logpdf`` (uncached): the checks of a user's log-density before a fit evaluate it on a grid
    in one call instead of one Python call per value."""
    run = _PROBES.get(logpdf)
    if run is None:

        def run(ys, fs, out):
            for i in range(ys.size):
                for j in range(fs.size):
                    out[i, j] = logpdf(ys[i], fs[j])

        run = _PROBES[logpdf] = njit(**UNCACHED_LEAF)(run)
    return run
