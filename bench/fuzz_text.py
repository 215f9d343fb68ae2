"""A long fuzz session of the text readers (issue 56, build point 7): svmlight files and CSV tables
drawn by the strategies of ``tests/text_fuzz.py``, each held to the slow reference parsers there.

    python -m bench.fuzz_text --examples 20000 [--kinds svmlight csv] [--seed 0] [--show]

The inputs are tried in worker subprocesses; each writes every input to a file before trying it,
so a worker that dies (a signal: a crash of the interpreter) leaves the input that killed it, is
counted as a crash and replaced by a fresh worker for the rest. A check that fails (an accepted
file the reference refuses, other numbers, an exception that is not the library's, an exit
status other than 0 or 2) is counted and printed, and the session goes on. The counts are printed
at the end and written to bench/results/fuzz_text.json. ``--show`` prints every input tried.
"""

import argparse
import collections
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"


def _worker(kind, count, seed, state, show):
    """Try ``count`` inputs of ``kind``, appending one JSON line per input to ``state``."""
    sys.path.insert(0, str(ROOT / "tests"))
    import warnings

    import text_fuzz as F
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed

    strategy, check = {
        "svmlight": (F.svmlight_files(), F.check_svmlight),
        "csv": (F.csv_tables(), F.check_csv),
    }[kind]
    # (in memory if there is a tmpfs: each conversion's fsync costs a disk's latency)
    folder = tempfile.mkdtemp(
        prefix="fastcep-fuzz-", dir="/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    )
    last = state + ".input"

    @hseed(seed)
    @settings(
        max_examples=count, deadline=None, database=None, phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )  # fmt: skip
    @given(x=strategy)
    def run(x):
        with open(last, "w") as fh:
            fh.write(repr(x))
        if show:
            print(repr(x)[:300], flush=True)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                outcome = {"seen": check(x, folder)}
        except AssertionError as exc:
            outcome = {"failure": str(exc)[:500], "input": repr(x)[:2000]}
        except Exception as exc:  # (not the library's clear error: counted, with the input)
            outcome = {"failure": f"{type(exc).__name__}: {exc}"[:500], "input": repr(x)[:2000]}
        with open(state, "a") as fh:
            fh.write(json.dumps(outcome) + "\n")

    try:
        run()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _read_state(state):
    if not os.path.exists(state):
        return []
    with open(state) as fh:
        return [json.loads(line) for line in fh if line.strip()]


def session(kind, examples, seed, show):
    """Run workers until ``examples`` inputs of ``kind`` are tried; returns the counts."""
    state = tempfile.mktemp(prefix=f"fastcep-fuzz-{kind}-", suffix=".jsonl")
    crashes, tried, round_ = [], 0, 0
    while tried < examples:
        args = f"{kind!r}, {examples - tried}, {seed + round_}, {state!r}, {show}"
        code = f"import bench.fuzz_text as B; B._worker({args})"
        run = subprocess.run([sys.executable, "-c", code], cwd=ROOT)
        done = len(_read_state(state))
        if run.returncode != 0:
            if done + len(crashes) == tried:  # (nothing tried: the worker itself failed)
                raise SystemExit(f"the {kind} worker failed before its first input (exit {run.returncode})")
            with open(state + ".input") as fh:
                culprit = fh.read()
            crashes.append({"exit": run.returncode, "input": culprit[:2000]})
            print(f"CRASH ({kind}, exit {run.returncode}) on {culprit[:300]}", flush=True)
        round_ += 1
        tried = done + len(crashes)
        if run.returncode == 0:
            break  # (the worker tried its inputs, or hypothesis ran out of distinct ones)
    outcomes = _read_state(state)
    failures = [o for o in outcomes if "failure" in o]
    groups = collections.defaultdict(list)
    for f in failures:  # (one line per kind of failure: its message without numbers, paths and quotes)
        groups[re.sub(r"'[^']*'|\d+", "_", f["failure"])[:90]].append(f)
    for same in groups.values():
        print(f"FAILURE ({kind}, {len(same)}x): {same[0]['failure'][:200]}\n    on {same[0]['input'][:200]}")
    seen = collections.Counter(o["seen"] for o in outcomes if "seen" in o)
    for path in (state, state + ".input"):
        if os.path.exists(path):
            os.remove(path)
    return {
        "kind": kind, "tried": len(outcomes) + len(crashes), "outcomes": dict(seen),
        "failures": len(failures), "crashes": len(crashes), "failure_examples": failures[:20],
        "crash_examples": crashes[:20],
    }  # fmt: skip


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench.fuzz_text", description=__doc__.splitlines()[0])
    p.add_argument("--examples", type=int, default=20_000, help="inputs in all, split among the kinds")
    p.add_argument("--kinds", nargs="+", default=["svmlight", "csv"], choices=["svmlight", "csv"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--show", action="store_true", help="print every input tried")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    report = []
    for kind in args.kinds:
        counts = session(kind, args.examples // len(args.kinds), args.seed, args.show)
        report.append(counts)
        print(
            f"{kind}: {counts['tried']:,} inputs tried, outcomes {counts['outcomes']}, "
            f"{counts['failures']} failures, {counts['crashes']} crashes",
            flush=True,
        )
    secs = time.perf_counter() - t0
    total = sum(r["tried"] for r in report)
    bad = sum(r["failures"] + r["crashes"] for r in report)
    print(f"all: {total:,} inputs tried in {secs:.0f} s, {bad} failures or crashes")
    RESULTS.mkdir(exist_ok=True)
    with open(RESULTS / "fuzz_text.json", "w") as fh:
        json.dump({"argv": sys.argv[1:], "seconds": secs, "kinds": report}, fh, indent=1)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
