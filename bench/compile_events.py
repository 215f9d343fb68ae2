"""Which kernels the test run compiles, in which tests, and for how long (numba's compile events).

    FASTCEP_CACHE_DIR=$(mktemp -d) python -m pytest -n auto --dist loadfile -p bench.compile_events
    python -m bench.compile_events summary

As a pytest plugin (``-p bench.compile_events``) it listens to numba's ``numba:compile`` events
in every test process and counts each outermost compile (a driver with the leaves it inlines)
against the test that ran it: the function, its argument types and the seconds. Each process
writes bench/results/compile-events-{worker}.json when the session ends. Start from an empty
kernel cache (``FASTCEP_CACHE_DIR``) to see what a fresh machine compiles; subprocesses and a
cluster's workers are not counted.

``summary`` adds the files up: the compile seconds in all, per test file and per function, and
the functions compiled for argument types that differ only in a read-only array or in an
argument left out where another caller gives None (numba types each apart, so each such pair
compiles twice).
"""

import collections
import json
import os
import pathlib
import re
import sys
import threading
import time

RESULTS = pathlib.Path(__file__).resolve().parent / "results"

_test = {"id": "<collection>"}
_events = []
_local = threading.local()


def _listener():
    from numba.core import event

    class Outermost(event.Listener):
        def on_start(self, ev):
            depth = getattr(_local, "depth", 0)
            _local.depth = depth + 1
            if depth == 0:
                _local.start = time.perf_counter()

        def on_end(self, ev):
            _local.depth -= 1
            if _local.depth:
                return
            func = getattr(ev.data.get("dispatcher"), "py_func", None)
            name = f"{getattr(func, '__module__', '?')}.{getattr(func, '__qualname__', '?')}"
            _events.append((_test["id"], name, str(ev.data.get("args")), time.perf_counter() - _local.start))

    return Outermost()


def pytest_configure(config):
    from numba.core import event

    event.register("numba:compile", _listener())


def pytest_runtest_logstart(nodeid, location):
    _test["id"] = nodeid


def pytest_sessionfinish(session):
    RESULTS.mkdir(exist_ok=True)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    (RESULTS / f"compile-events-{worker}.json").write_text(json.dumps(_events))


def _same_code(args):
    """Argument types with the two distinctions that compile the same code twice taken away."""
    return re.sub(r"omitted\(default=None\)", "none", args.replace("readonly ", ""))


def summary(folder=RESULTS):
    events = []
    for path in sorted(folder.glob("compile-events-*.json")):
        events += [(path.stem.rsplit("-", 1)[-1], *row) for row in json.loads(path.read_text())]
    if not events:
        print(f"no compile-events-*.json in {folder}: run the tests with -p bench.compile_events first")
        return
    print(f"{len(events)} compiles, {sum(e[4] for e in events):.1f} s")
    for title, key in (("per test file", lambda e: e[1].split("::")[0]), ("per function", lambda e: e[2])):
        seconds, count = collections.Counter(), collections.Counter()
        for e in events:
            seconds[key(e)] += e[4]
            count[key(e)] += 1
        print(f"\n{title} (seconds, compiles):")
        for name, s in seconds.most_common(20):
            print(f"  {s:7.1f} {count[name]:4d}  {name}")
    twins = collections.defaultdict(list)
    for e in events:
        twins[(e[2], _same_code(e[3]))].append(e)
    print("\nthe same code compiled again (a read-only array, or an argument left out against None):")
    spare = 0.0
    for (name, _), group in sorted(twins.items()):
        if len({e[3] for e in group}) > 1:
            extra = sum(sorted(e[4] for e in group)[:-1])
            spare += extra
            print(f"  {extra:7.1f}  {name}: " + "; ".join(f"{e[1]} ({e[4]:.1f} s)" for e in group))
    print(f"  {spare:7.1f}  in all")


if __name__ == "__main__":
    if sys.argv[1:] != ["summary"]:
        raise SystemExit(__doc__)
    summary()
