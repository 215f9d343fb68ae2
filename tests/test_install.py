"""The README's two first commands: that they are there, that CI runs exactly the second, and
the stand-in test, :func:`test_the_suite_imports_the_package`, that
``bench/test_install_orders.py`` runs in fresh venvs after each order of the two (two venvs and
two full compiles, about 140 s on two cores: out of the default run, which CI keeps under ten
minutes; run it before a change to the packaging or the README's commands lands)."""

import os
import pathlib
import re
import subprocess
import sys

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


def test_the_suite_imports_the_package():
    """The suite's stand-in in the fresh venvs below: the package and its kernels, from the
    install the test command made (the fit from elsewhere in ``both_commands`` compiles and runs
    them: a fit here too compiled them a third time, 36 s of CPU)."""
    import fastcep.kernels.glm.schedules

    assert callable(fastcep.fit) and callable(fastcep.kernels.glm.schedules.parallel_step)
    assert pathlib.Path(fastcep.__file__).parent.parent == ROOT
