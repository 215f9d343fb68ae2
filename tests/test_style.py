"""Project rules that a test can hold: one fastmath setting (no nnan or ninf; reassoc in four
small sum kernels only), cached kernels that give the same bits as freshly compiled ones."""

import importlib
import inspect
import pathlib
import pkgutil
import subprocess

from cache_runs import compiled_then_cached
from kernel_options import cached_on_disk
from numba.core.registry import CPUDispatcher

import fastcep.kernels
from fastcep.kernels._config import FASTMATH, FASTMATH_SUMS


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


#: the kernels whose sums over a regression row or a CP entry's block may be reassociated
#: (FASTMATH_SUMS, kernels/_config.py): no other kernel
SUMS = {
    "fastcep.kernels.tensor.messages.gaussian_entry_update",
    "fastcep.kernels.glm.sweep.row_cavity",
    "fastcep.kernels.glm.sweep.row_dots",
    "fastcep.kernels.glm.sweep.sum_sq_dev",
}


def test_every_kernel_uses_the_central_fastmath_set():
    found = list(_dispatchers())
    assert len(found) > 15
    for name, disp in found:
        expected = FASTMATH_SUMS if name in SUMS else FASTMATH
        assert disp.targetoptions.get("fastmath") is expected, name
    # no nnan / ninf: the finiteness guards; no reassoc: the same bits from a fresh compile and
    # from the cache, and the leaves whose order of operations matters (kernels/_config.py)
    assert isinstance(FASTMATH, set) and not FASTMATH & {"nnan", "ninf", "fast", "reassoc"}
    assert FASTMATH_SUMS == FASTMATH | {"reassoc"}


#: a parallel driver whose fresh compile and cached code disagreed: each object's gathered sum
#: of its entries' messages (``tensor.posterior.rebuild_diag_coord``), on 70 entries an object
_GATHER_RUN = """
import hashlib
import numpy as np
from fastcep.kernels.tensor import CPProblem, CPStore, rebuild_diag_coord, state
rng = np.random.default_rng(0)
n_obj, per, n, K, R = 40, 70, 900, 3, 2
ptr = np.arange(0, n_obj * per + 1, per).astype(np.int64)
ent = rng.integers(0, n, n_obj * per).astype(np.int64)
Lam = rng.exponential(size=(n, K, R)) * 10.0 ** rng.uniform(-3, 3, (n, K, R))
eta = rng.standard_normal((n, K, R)) * 10.0 ** rng.uniform(-3, 3, (n, K, R))
prior_Lam, prior_eta = rng.random((n_obj, R)) + 1.0, rng.standard_normal((n_obj, R))
post = [np.zeros((n_obj, R)) for _ in range(5)]
store = CPStore(Lam, eta, np.zeros(n), np.zeros(n), *post, np.zeros(3))
none = np.empty(0)
gidx, obj_mode = np.zeros((n, K), dtype=np.int64), np.zeros(n_obj, dtype=np.int64)
problem = CPProblem(gidx, none, none, ptr, ent, obj_mode, prior_Lam, prior_eta, 0, 64)
rebuild_diag_coord(problem, store, state.scratch(store, 1, 64), 0, n_obj, 1, 0)
print(hashlib.sha256(b"".join(p.tobytes() for p in post)).hexdigest())
"""


def test_a_parallel_kernel_loaded_from_the_cache_gives_the_bits_of_a_fresh_compile(tmp_path):
    """With ``reassoc`` the process that compiled this kernel and every later one, which loads it
    from the cache, summed in different orders (kernels/_config.py)."""
    fresh, cached = compiled_then_cached(_GATHER_RUN, tmp_path)
    assert fresh == cached


def test_every_kernel_is_cached_and_uses_the_central_options():
    # parallel drivers are cached too: their compile time dominated a first fit (BENCHMARKS.md)
    from fastcep.kernels._config import ERROR_MODEL

    for name, disp in _dispatchers():
        assert cached_on_disk(disp), name
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

    ruff = shutil.which("ruff")
    if ruff is None:
        import pytest

        pytest.skip("ruff not installed (dev extra)")
    root = pathlib.Path(__file__).resolve().parents[1]
    lint = subprocess.run([ruff, "check", "."], cwd=root, capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout
    fmt = subprocess.run([ruff, "format", "--check", "."], cwd=root, capture_output=True, text=True)
    assert fmt.returncode == 0, fmt.stdout


def _package_modules():
    """{module name: source path} of fastcep and its kernels (installed as fastcep.kernels)."""
    root = pathlib.Path(fastcep.__file__).parent
    kernels = pathlib.Path(fastcep.kernels.__file__).parent
    out = {}
    for base, name in ((root, "fastcep"), (kernels, "fastcep.kernels")):
        for path in base.rglob("*.py"):
            if base == root and kernels in path.parents or "__pycache__" in path.parts:
                continue
            parts = [p for p in path.relative_to(base).with_suffix("").parts if p != "__init__"]
            out[".".join([name, *parts])] = path
    return out


def _imported(module, path, node, modules):
    """(what an ``ImportFrom`` node imports from: a module name, [(name, is a module)])."""
    base = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    if node.level:
        base = base[: len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    return target, [(a.name, f"{target}.{a.name}" in modules) for a in node.names]


def test_no_module_imports_another_module_s_private_names():
    """Issue 40: a private name (one underscore) stays in its module; the package's private
    modules (``_loop``, ``_options``, ...) may be imported, their private names may not."""
    import ast

    modules = _package_modules()
    bad = []
    for module, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            target, names = _imported(module, path, node, modules)
            if target not in modules:
                continue
            for name, is_module in names:
                if name.startswith("_") and not name.startswith("__") and not is_module:
                    bad.append(f"{path.name}:{node.lineno}: {name} from {target}")
    assert not bad, bad


def test_the_package_s_imports_have_no_cycles():
    """Issue 40: the modules' imports form no cycle (a cycle makes the import order matter, and a
    half-initialised module answer with missing names), the imports inside functions included
    (a lazy import only hides a cycle: a result's ``save`` writes through the writer that
    ``fastcep.io`` registers in ``fastcep.results``)."""
    import ast

    modules = _package_modules()
    graph = {}
    for module, path in modules.items():
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                target, names = _imported(module, path, node, modules)
                deps |= {f"{target}.{n}" if m else target for n, m in names} & modules.keys()
            elif isinstance(node, ast.Import):
                deps |= {a.name for a in node.names} & modules.keys()
        graph[module] = deps - {module}
    # a module is in a cycle when it reaches itself: depth-first, colouring visited modules
    state, cycles = {}, []

    def visit(m, trail):
        state[m] = "open"
        for d in sorted(graph[m]):
            if state.get(d) == "open":
                cycles.append(trail[trail.index(d) :] + [d])
            elif d not in state:
                visit(d, [*trail, d])
        state[m] = "done"

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    assert not cycles, cycles


def _tuple_unpacks_in_parallel_drivers(source):
    """(function, line) of every assignment in a ``parallel=True`` driver of ``source`` that
    unpacks a tuple: a variable (``a, b = store``) or a tuple display of four names or more.
    Python compiles ``a, b, c = x.a, x.b, x.c`` to three plain stores. (A shape or a leaf's
    returned scalars may be unpacked.)"""
    import ast

    bad = []
    for fn in ast.walk(ast.parse(source)):
        if not isinstance(fn, ast.FunctionDef):
            continue
        parallel = any("PARALLEL" in ast.unparse(d) for d in fn.decorator_list)
        if not parallel:
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Tuple) for t in node.targets):
                target = next(t for t in node.targets if isinstance(t, ast.Tuple))
                if isinstance(node.value, ast.Name) or (
                    isinstance(node.value, ast.Tuple) and len(target.elts) > 3
                ):
                    bad.append((fn.name, node.lineno))
    return bad


def test_the_parallel_drivers_never_unpack_a_tuple():
    """numba's parfor pass drops a loop's writes to an array that a tuple assignment unpacked
    (``kernels/tensor/state.py``): the drivers take their arrays at most three to a line."""
    kernels = pathlib.Path(fastcep.kernels.__file__).parent
    bad = []
    for path in sorted(kernels.rglob("*.py")):
        bad += [(path.name, *b) for b in _tuple_unpacks_in_parallel_drivers(path.read_text())]
    assert not bad, bad
    # (the check itself finds both forms)
    probe = (
        "@njit(**PARALLEL_CACHED)\ndef f(problem, store):\n    a, b = store\n"
        "    c, d, e, g = problem.c, problem.d, problem.e, problem.g\n    h, i = problem.h, problem.i\n"
    )
    assert _tuple_unpacks_in_parallel_drivers(probe) == [("f", 3), ("f", 4)]
