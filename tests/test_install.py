"""The README's two first commands, in either order, in one fresh venv.

The venv sees this interpreter's packages (numpy, numba, pytest, ...) through a ``.pth`` line and
pip runs offline (``PIP_NO_INDEX``, no build isolation), so the test needs no network; the
commands are otherwise the README's own, on a copy of the checkout. The test command's stand-in is
one small test of this file, :func:`test_the_suite_imports_and_fits`: the whole suite would run
itself, and the README's examples would compile every kernel once more for each order (two minutes
of this suite's time: the examples themselves run in ``tests/test_readme.py``). Likewise
``fastcep demo --help`` stands in for the demo, whose table ``tests/test_cli.py`` checks: here
it compiled every regression kernel again in each venv (70 s of CPU each, on a machine whose
two cores run the suite). What the demo would show of the install, its kernels compiling and
running from wherever the last install put them, a small fit from outside the checkout shows.
"""

import concurrent.futures
import os
import pathlib
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
from envs import parent_site_packages

import fastcep

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def readme_commands():
    """(the install-and-demo command, the test command): the first two lines of the README's
    first bash block, without their comments."""
    block = re.search(r"```bash\n(.*?)```", README, flags=re.S).group(1)
    lines = [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]
    return lines[0], lines[1]


def test_readme_starts_with_the_two_commands():
    install, tests = readme_commands()
    assert install.startswith("pip install ") and "fastcep demo" in install
    assert tests.startswith("pip install -e ") and "&& python -m pytest" in tests


def test_ci_runs_exactly_the_readme_s_test_command():
    lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert lines[-1].replace("python -m pip", "pip") == readme_commands()[1]


def test_a_benchmark_plugin_that_warns_about_xdist_at_start_up_does_not_stop_the_run(tmp_path):
    """pytest-benchmark before 5.3 warns in ``pytest_configure`` that xdist turns benchmarks off.
    Under the project's ``filterwarnings = error`` that warning stopped the README's test command
    before any test ran (CI exit code 3). A stand-in plugin warns the same way here."""
    (tmp_path / "old_benchmark_plugin.py").write_text(
        "import warnings\n\n\n"
        "class PytestBenchmarkWarning(UserWarning):\n    pass\n\n\n"
        "def pytest_configure(config):\n"
        "    warnings.warn(PytestBenchmarkWarning('Benchmarks are automatically disabled because xdist"
        " plugin is active.Benchmarks cannot be performed reliably in a parallelized environment.'))\n"
    )
    (tmp_path / "test_one.py").write_text("def test_one():\n    assert True\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", str(ROOT / "pyproject.toml")]
        + ["--rootdir", str(tmp_path), "-p", "old_benchmark_plugin", str(tmp_path / "test_one.py")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed" in run.stdout


def test_the_suite_imports_and_fits():
    """The suite's stand-in in the fresh venvs below: the package, its kernels and a fit, from the
    install the test command made."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    y = (X @ np.array([1.0, -1.0, 0.5]) + 0.3 * rng.normal(size=60) > 0).astype(float)
    res = fastcep.fit(X, y, method="cep1")
    assert res.converged and np.all(np.isfinite(res.posterior.mean))
    assert np.corrcoef(res.posterior.mean[:3], [1.0, -1.0, 0.5])[0, 1] > 0.9


def fresh(tmp_path):
    """A copy of the checkout and a fresh venv that sees this interpreter's packages, below
    ``tmp_path``: (the copy, the environment that runs in the venv)."""
    repo = tmp_path / "fastcep"
    shutil.copytree(
        ROOT,
        repo,
        ignore=shutil.ignore_patterns(".git", "__pycache__", "build", "*.egg-info", ".pytest_cache", ".venv"),
    )
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
    bin_dir = venv / ("Scripts" if os.name == "nt" else "bin")
    py = bin_dir / "python"
    site = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    # the venv's own setuptools (bundled, maybe older than the build needs) would hide ours
    subprocess.run([str(py), "-m", "pip", "uninstall", "-q", "-y", "setuptools"], capture_output=True)
    (pathlib.Path(site) / "zz_parent_packages.pth").write_text("\n".join(parent_site_packages()) + "\n")
    env = dict(
        os.environ,
        PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        VIRTUAL_ENV=str(venv),
        PIP_NO_INDEX="1",
        PIP_NO_BUILD_ISOLATION="0",  # (pip reads "no-" options from the environment negated)
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        FASTCEP_CACHE_DIR=str(tmp_path / "cache"),
    )
    env.pop("PYTHONPATH", None)
    return repo, env


def run(command, cwd, env):
    out = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True)
    assert out.returncode == 0, f"{command}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out.stdout


def both_commands(tmp_path, order):
    """Run the README's two commands in ``order`` in a fresh venv; returns (where the package is
    imported from elsewhere, from the checkout's root, the command line's help)."""
    tmp_path.mkdir()
    repo, env = fresh(tmp_path)
    install, tests = readme_commands()
    stand_in = "tests/test_install.py::test_the_suite_imports_and_fits"
    tests = tests.replace("python -m pytest", f"python -m pytest -q -p no:cacheprovider {stand_in}")
    assert install.endswith("fastcep demo")
    install += " --help"
    for command in (install, tests) if order == "readme" else (tests, install):
        run(command, repo, env)
    where = "python -c 'import fastcep, fastcep.kernels; print(fastcep.kernels.__file__)'"
    fit = (
        "python -c 'import numpy as np, fastcep; X = np.random.default_rng(0).normal(size=(50, 2)); "
        "print(fastcep.fit(X, (X[:, 0] > 0).astype(float), max_iter=500).converged)'"
    )
    elsewhere = repo.parent / "elsewhere"  # (beside the copy, its folder name would shadow the package)
    elsewhere.mkdir()
    assert run(fit, elsewhere, env).strip() == "True"
    return run(where, repo.parent, env), run(where, repo, env), run("fastcep --help", repo.parent, env)


def test_the_readme_commands_work_in_either_order(tmp_path):
    pytest.importorskip("setuptools")
    orders = ("readme", "reversed")
    # the two orders at once: each is mostly one process compiling kernels
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        runs = dict(zip(orders, pool.map(lambda o: both_commands(tmp_path / o, o), orders), strict=True))
    for order, (elsewhere, in_checkout, help_text) in runs.items():
        # the last install answers, the command line included; in the checkout's root (where the
        # source folder comes first on the path) the package is whole too
        assert ("site-packages" in elsewhere) == (order == "reversed"), (order, elsewhere)
        assert "kernels" in in_checkout
        assert "CEP" in help_text
