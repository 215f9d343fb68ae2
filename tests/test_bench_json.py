"""bench's result files are standard JSON: an overflowed figure is written as a string."""

import json

import numpy as np
import pytest

from bench.cp_counts import strict_json


def test_floats_that_are_not_finite_are_written_as_strings():
    cell = dict(lpd=-np.inf, rmse=float("inf"), nested=[1.5, np.float64("nan"), (2, -np.inf)], n=3)
    text = strict_json(cell, indent=1)
    assert "Infinity" not in text and "NaN" not in text
    back = json.loads(text, parse_constant=lambda name: pytest.fail(f"non-standard JSON constant {name}"))
    assert back == dict(lpd="-inf", rmse="inf", nested=[1.5, "nan", [2, "-inf"]], n=3)
    assert float(back["lpd"]) == -np.inf  # (float() reads the strings back)


def test_finite_records_are_written_as_json_dumps_writes_them():
    cell = dict(a=1.25, b=[0, -3.5e-300], c="x", d=None, e=True)
    assert strict_json(cell, indent=1) == json.dumps(cell, indent=1)
