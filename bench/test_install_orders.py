"""The README's two first commands, in either order, in one fresh venv each (about 140 s on two
cores, so out of the default test run): ``python -m pytest bench/test_install_orders.py``.

The venv sees this interpreter's packages (numpy, numba, pytest, ...) through a ``.pth`` line and
pip runs offline (``PIP_NO_INDEX``, no build isolation), so the test needs no network; the
commands are otherwise the README's own, on a copy of the checkout. The test command's stand-in is
one small test, ``tests/test_install.py::test_the_suite_imports_the_package``: the whole suite
would run itself. ``fastcep demo --help`` stands in for the demo, whose table
``tests/test_cli.py`` checks; what the demo would show of the install, its kernels compiling and
running from wherever the last install put them, a small fit from outside the checkout shows.
"""

import concurrent.futures
import os
import pathlib
import shutil
import subprocess
import sys

import pytest
from envs import parent_site_packages
from test_install import ROOT, readme_commands


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
    stand_in = "tests/test_install.py::test_the_suite_imports_the_package"
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
