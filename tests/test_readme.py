"""The README's Python examples run as written."""

import pathlib
import re
import warnings

import pytest

import fastcep

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


@pytest.mark.parametrize("i", range(len(BLOCKS)))
def test_readme_example_runs(i, tmp_path, monkeypatch):
    """... and their fits converge: a ConvergenceWarning is an error here."""
    monkeypatch.chdir(tmp_path)
    warnings.simplefilter("error", fastcep.ConvergenceWarning)
    exec(compile(BLOCKS[i], f"README.md block {i}", "exec"), {})
