"""Short fuzz sessions of the text readers (issue 56): svmlight files and CSV tables drawn by the
strategies of ``text_fuzz``, each read by the library and by the slow reference parser there, and
converted by ``fastcep convert``; either both read the same rows or the library refuses the file
in one line (never another exception, never another exit status). The long session, in
subprocesses that a crash cannot take down: ``python -m bench.fuzz_text --examples 20000``."""

import os
import tempfile

import pytest
import text_fuzz as F
from hypothesis import HealthCheck, example, given, settings

#: the default run's sessions: the same examples every run, a few seconds
SHORT = settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """Where the inputs are written: memory if there is a tmpfs (each conversion's fsync costs a
    disk's latency)."""
    if os.access("/dev/shm", os.W_OK):
        with tempfile.TemporaryDirectory(dir="/dev/shm", prefix="fastcep-fuzz-") as path:
            yield path
    else:
        yield str(tmp_path_factory.mktemp("fuzz"))


@SHORT
@given(data=F.svmlight_files())
@example(data=b"1 1.0:2\n")  # (an index that is no integer was read as 1)
@example(data=b"1 3:1_0\n")  # (a value Python reads: "cannot be read as svmlight")
@example(data=b"1 3:1e308 3:1e308\n")  # (a repeated column summing to inf was kept)
def test_svmlight_files_are_read_by_the_rules_or_refused_in_one_line(folder, data):
    F.check_svmlight(data, folder)


@SHORT
@given(table=F.csv_tables())
@example(table=F.Table((["y", "c"], [["1", F.HUGE]], ",", ",", False, "\n", False, None)))  # (exit 1)
def test_csv_tables_are_read_by_the_rules_or_refused_in_one_line(folder, table):
    F.check_csv(table, folder)
