"""bench.compile_events's summary: the same code compiled for two argument types numba keeps apart."""

import json

from bench.compile_events import summary


def test_the_summary_finds_a_read_only_twin_and_a_left_out_argument(tmp_path, capsys):
    sig = "(array(float64, 1d, C), {})"
    events = [
        ["tests/test_a.py::test_one", "pkg.kernel", sig.format("none"), 5.0],
        ["tests/test_b.py::test_two", "pkg.kernel", sig.format("omitted(default=None)"), 4.0],
        ["tests/test_b.py::test_two", "pkg.rebuild", "(readonly array(float64, 1d, C),)", 2.0],
        ["tests/test_a.py::test_one", "pkg.rebuild", "(array(float64, 1d, C),)", 3.0],
        ["tests/test_a.py::test_one", "pkg.other", "(int64,)", 1.0],
        ["tests/test_b.py::test_two", "pkg.other", "(float64,)", 1.5],
    ]
    (tmp_path / "compile-events-gw0.json").write_text(json.dumps(events[:3]))
    (tmp_path / "compile-events-gw1.json").write_text(json.dumps(events[3:]))
    summary(tmp_path)
    out = capsys.readouterr().out
    assert "6 compiles, 16.5 s" in out
    # the smaller of each twin pair is what a shared signature would have saved; int64 against
    # float64 is a real second compile
    assert "4.0  pkg.kernel" in out and "2.0  pkg.rebuild" in out and "pkg.other:" not in out
    assert "6.0  in all" in out
