"""Damaged model files never crash or hang a reader (issue 56, build point 4): every damaged copy
reads to the same numbers, bit for bit, or is refused with FileFormatError. Each copy is read by a
child process (``bench.fuzz_files.Reader``), so that a crash or a hang fails the test instead of
ending the run. The long run: ``python -m bench.fuzz_files``."""

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from bench.fuzz_files import Reader, apply, spread_flips, write_files

#: single-bit flips that crashed (segfaults in HDF5's conversion of an attribute whose type the
#: flip changed) or hung (a free-space size in the heap of strings, parsed forever) a reader of
#: the regression model file before seals: (byte counted from HDF5's superblock, bit)
CRASHED = [(849, 3), (5329, 1), (5625, 2), (1529, 2)]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A regression model file that absorbed online rows and a CP model file, each with a reader."""
    folder = tmp_path_factory.mktemp("fuzz")
    paths = write_files(folder, ("regression", "cp"))
    reader = Reader(paths, folder)
    yield {kind: path.read_bytes() for kind, path in paths.items()}, reader
    reader.close()


def _superblock(data):
    """Where HDF5's superblock starts: after a seal, if the file has one."""
    return 512 if data.startswith(b"fastcep sealed") else 0


@pytest.mark.parametrize("kind", ["regression", "cp"])
def test_thousands_of_flips_never_crash_a_reader(files, kind):
    """Before seals, 3 of 3,500 damaged copies of the regression model file crashed the reader
    (segmentation faults) and 8 hung it, and most flips (in bytes HDF5 does not use) read as the
    file (bench.fuzz_files). Now every flip, the seal's own bytes included, is refused before
    HDF5 parses the file."""
    data, reader = files[0][kind], files[1]
    base = _superblock(data)
    known = [[("flip", base + pos, bit)] for pos, bit in CRASHED] if kind == "regression" else []
    n = 3_000 if kind == "regression" else 2_000
    outcomes = {}
    for damage in known + spread_flips(np.arange(len(data)), n, np.random.default_rng(0)):
        outcome, detail = reader.outcome(kind, apply(data, damage))
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        assert outcome in ("same", "refused"), (damage, outcome, detail)
    assert outcomes == {"refused": len(known) + n}


@st.composite
def damages(draw, size):
    """1-3 damages of a file of ``size`` bytes: a bit or byte flipped, the end cut off, a range
    zeroed, garbage appended, two blocks swapped."""
    pos = st.integers(0, size - 1)
    one = st.one_of(
        st.tuples(st.just("flip"), pos, st.integers(0, 7)),
        st.tuples(st.just("byte"), pos, st.integers(0, 255)),
        st.tuples(st.just("truncate"), pos),
        st.tuples(st.just("zero"), pos, st.integers(1, 4096)),
        st.tuples(st.just("append"), st.binary(min_size=1, max_size=64)),
        st.tuples(st.just("swap"), pos, pos, st.integers(1, 2048)).filter(lambda op: op[1] != op[2]),
    )
    return draw(st.lists(one, min_size=1, max_size=3))


@pytest.mark.parametrize("kind", ["regression", "cp"])
def test_damaged_model_files_are_refused_or_read_unchanged(files, kind):
    """Flips, truncations, zeroed ranges, garbage, swapped blocks: a changed file is refused
    (before seals, such damages crashed or hung the reader, 11 of 3,500)."""
    data, reader = files[0][kind], files[1]

    @settings(
        max_examples=100, deadline=None, database=None, derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )  # fmt: skip
    @given(damages(len(data)))
    def check(damage):
        damaged = apply(data, damage)
        assume(damaged != data)  # (zeroed zeros, a byte set to itself: no damage)
        outcome, detail = reader.outcome(kind, damaged)
        assert outcome in ("same", "refused"), (outcome, detail)
        assert outcome == "refused"  # (a sealed file: any change)

    check()
