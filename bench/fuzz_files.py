"""Damaged files never crash or hang a reader (issue 56, build point 4).

    python -m bench.fuzz_files [--flips 20000] [--damages 2000] [--seed 0] [--kinds regression cp ...]

Writes one file of each kind (``KINDS``: a regression model that absorbed online rows, a CP
model, a CP stream's checkpoint, a cluster fit's checkpoint, and the data files, a tensor and
sparse rows), then damages copies of it and reads each copy in a child process (``Reader``), so
that a crash or a hang is counted instead of ending the run:

- ``--flips`` single-bit flips at positions spread evenly over the whole file (the data files:
  over their metadata, the bytes outside their datasets' chunks), the bit drawn at random;
- ``--damages`` damages drawn at random (``random_damage``): byte and bit flips, truncations,
  zeroed ranges, appended garbage, swapped blocks.

Each copy must read to the numbers of the undamaged file, bit for bit, or be refused with
``FileFormatError``. Prints one JSON line per kind: the inputs tried (damages that leave the
bytes as they were, "unchanged", are counted apart and not read), the outcomes ("same",
"refused", "changed", "error": another exception, "crash": the child died, "hang": no answer
within ``TIMEOUT`` seconds) and the first few inputs of each bad outcome. The default test run
holds a short version (``tests/test_fuzz_files.py``).
"""

import argparse
import hashlib
import itertools
import json
import os
import pathlib
import select
import subprocess
import sys
import tempfile

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
#: seconds a child may take over one file before it counts as hung
TIMEOUT = 60.0
#: what each kind of file is read with (by the child)
KINDS = ("regression", "cp", "checkpoint", "fit-checkpoint", "tensor", "csr")
#: the kinds whose files carry no digest (large data: flips go to their metadata)
DATA_KINDS = ("tensor", "csr")
GOOD = ("same", "refused")


# ---------------------------------------------------------------------------- the files
def write_files(folder, kinds=KINDS):
    """One small file of each of ``kinds`` in ``folder``: {kind: path}."""
    import fastcep
    from fastcep.data_tools import make_cp_tensor, make_regression_simulation

    folder = pathlib.Path(folder)
    out = {}
    if "regression" in kinds:
        X, y, _ = make_regression_simulation("probit", "gaussian", n=200, d=3, seed=0)
        res = fastcep.fit(X + 3.0, y)
        res.update(X[:20] + 3.0, y[:20])  # (the online state: ``online/`` and its attributes)
        fastcep.save(res, folder / "regression.h5")
        out["regression"] = folder / "regression.h5"
    if {"cp", "checkpoint", "tensor"} & set(kinds):
        T, _ = make_cp_tensor((12, 10, 8), 2, 600, noise_sd=0.1, seed=0)
        fastcep.write_tensor(folder / "tensor.h5", T.coords, T.values, shape=T.shape)
        out["tensor"] = folder / "tensor.h5"
    if "cp" in kinds:
        res = fastcep.fit(T.coords, T.values, model="cp_gaussian", shape=T.shape, rank=2, max_iter=5)
        fastcep.save(res, folder / "cp.h5")
        out["cp"] = folder / "cp.h5"
    if "checkpoint" in kinds:
        kw = dict(model="cp_gaussian", rank=2, batch_size=100, max_batches=2)
        fastcep.stream(folder / "tensor.h5", checkpoint=folder / "checkpoint.h5", **kw)
        out["checkpoint"] = folder / "checkpoint.h5"
    if "fit-checkpoint" in kinds:
        from fastcep._loop import Trace
        from fastcep.io.checkpoint import write_fit_checkpoint

        rng = np.random.default_rng(0)
        arrays = {"mean": rng.normal(size=(30, 2)), "var": rng.uniform(1, 2, size=(30, 2))}
        trace = Trace.from_columns(3, elapsed=[0.1, 0.2, 0.3], change=[1.0, 0.5, 0.25])
        path = folder / "fit-checkpoint.h5"
        write_fit_checkpoint(path, arrays, {"sweeps": 3}, FIT_OPTIONS, trace, "ab" * 32)
        out["fit-checkpoint"] = folder / "fit-checkpoint.h5"
    if "csr" in kinds:
        import scipy.sparse as sp

        A = sp.random(300, 40, density=0.1, random_state=0, format="csr")
        fastcep.io.write_csr(folder / "csr.h5", A, np.arange(300) % 2, source="fuzz")
        out["csr"] = folder / "csr.h5"
    return {k: out[k] for k in kinds}


#: the settings of the cluster fit checkpoint ``write_files`` writes (what reading it compares)
FIT_OPTIONS = {"model": "probit", "rank": 2}


def _read(kind, path):
    """What the child reads a file of ``kind`` as (the public readers)."""
    import fastcep
    from fastcep.io import checkpoint, csr, tensor

    if kind in ("regression", "cp"):
        return fastcep.load(path)
    if kind == "checkpoint":
        return checkpoint.read_checkpoint(path, None)
    if kind == "fit-checkpoint":
        shapes = {"mean": (30, 2), "var": (30, 2)}
        return checkpoint.read_fit_checkpoint(path, FIT_OPTIONS, list(FIT_OPTIONS), "ab" * 32, shapes)
    if kind == "tensor":
        with tensor.TensorReader(path) as r:
            return r.read(), r.shape, r.binary
    if kind == "csr":
        with csr.CSRReader(path) as r:
            part = r.read()
            X = part.X  # (its arrays: a damaged width must not make the reader's numbers dense)
            return X.shape, X.indptr, X.indices, X.data, part.y, r.source
    raise ValueError(kind)


def fingerprint(obj):
    """SHA-256 of what ``obj`` holds: every array's dtype, shape and bytes, every other value's
    repr, through containers and the attributes of objects (bit for bit equal results have the
    same fingerprint)."""
    h = hashlib.sha256()

    def walk(x, depth):
        if depth > 8:
            return
        if isinstance(x, np.ndarray):
            h.update(f"a{x.dtype.str}{x.shape}".encode() + np.ascontiguousarray(x).tobytes())
        elif isinstance(x, dict):
            for k in sorted(x, key=repr):
                h.update(repr(k).encode())
                walk(x[k], depth + 1)
        elif isinstance(x, (list, tuple)):
            h.update(f"s{type(x).__name__}{len(x)}".encode())
            for v in x:
                walk(v, depth + 1)
        elif hasattr(x, "__dict__") and not isinstance(x, type) and type(x).__module__.startswith("fastcep"):
            h.update(type(x).__name__.encode())
            walk(vars(x), depth + 1)
        else:
            h.update(repr(x).encode())

    walk(obj, 0)
    return h.hexdigest()


def _serve(references):
    """The child: for each line on stdin, {"kind": ..., "path": ...}, read the file as its kind
    and answer one JSON line: its outcome against the reference file of that kind
    (``references``, a JSON object kind -> path)."""
    from fastcep.io.files import FileFormatError

    references, want = json.loads(references), {}
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        ask = json.loads(line)
        kind = ask["kind"]
        if kind not in want:
            want[kind] = fingerprint(_read(kind, references[kind]))
        try:
            got = fingerprint(_read(kind, ask["path"]))
            out = {"outcome": "same" if got == want[kind] else "changed"}
        except FileFormatError:
            out = {"outcome": "refused"}
        except Exception as exc:  # (anything else is a finding)
            out = {"outcome": "error", "detail": f"{type(exc).__name__}: {str(exc)[:200]}"}
        print(json.dumps(out), flush=True)


class Reader:
    """A child process that reads damaged copies of files (``outcome(kind, data)``), started
    again after a crash or a hang. ``references``: {kind: the undamaged file}."""

    def __init__(self, references, folder, timeout=TIMEOUT):
        self.references = {kind: os.fspath(path) for kind, path in references.items()}
        self.folder, self.timeout = os.fspath(folder), timeout
        self.proc, self._held = None, {}

    def _start(self):
        code = f"from bench.fuzz_files import _serve; _serve({json.dumps(self.references)!r})"
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, text=True, env=dict(os.environ, PYTHONWARNINGS="ignore"),
        )  # fmt: skip
        if self._answer(max(self.timeout, 120.0)) != {"ready": True}:
            raise RuntimeError(f"the reader did not start (rc {self.proc.poll()})")

    def _answer(self, timeout):
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if ready else None
        return json.loads(line) if line else None

    def outcome(self, kind, data):
        """(outcome, detail) of reading ``data``, the bytes of a damaged file of ``kind``."""
        if self.proc is None:
            self._start()
        path = self._write(kind, data)
        self.proc.stdin.write(json.dumps({"kind": kind, "path": path}) + "\n")
        self.proc.stdin.flush()
        answer = self._answer(self.timeout)
        if answer is not None:
            return answer["outcome"], answer.get("detail", "")
        if self.proc.poll() is None:
            self.proc.kill()
        rc = self._stop()
        if rc == -9:  # (killed here: it did not answer)
            return "hang", f"no answer in {self.timeout:.0f} s"
        return "crash", rc

    def _write(self, kind, data):
        """The path of the copy of ``kind``, made to hold ``data``: only the bytes that differ
        from what it holds are written when the lengths agree (a data file of megabytes, damaged
        in a few bytes)."""
        path = os.path.join(self.folder, f"damaged-{kind}.h5")
        held = self._held.get(kind)
        if held is not None and len(held) == len(data):
            diff = np.flatnonzero(np.frombuffer(held, np.uint8) != np.frombuffer(data, np.uint8))
            with open(path, "r+b") as fh:
                for run in np.split(diff, np.flatnonzero(np.diff(diff) > 1) + 1) if diff.size else []:
                    fh.seek(int(run[0]))
                    fh.write(data[run[0] : run[-1] + 1])
        else:
            with open(path, "wb") as fh:
                fh.write(data)
        self._held[kind] = data
        return path

    def _stop(self):
        """Close the child's pipes and wait for it; its return code."""
        proc, self.proc = self.proc, None
        for pipe in (proc.stdin, proc.stdout):
            try:
                pipe.close()
            except OSError:  # (a dead child's stdin: a broken pipe)
                pass
        return proc.wait()

    def close(self):
        if self.proc is not None:
            self._stop()


# ---------------------------------------------------------------------------- the damages
def apply(data, damage):
    """``data`` (bytes) with ``damage`` (a list of operations) applied."""
    out = bytearray(data)
    for op, *args in damage:
        if op == "flip":
            pos, bit = args
            out[pos % len(out)] ^= 1 << bit
        elif op == "byte":
            pos, value = args
            out[pos % len(out)] = value
        elif op == "truncate":
            del out[args[0] % len(out) :]
        elif op == "zero":
            lo, n = args
            lo %= len(out)
            out[lo : lo + n] = bytes(len(out[lo : lo + n]))
        elif op == "append":
            out += args[0]
        elif op == "swap":  # (two blocks, as long as they can be without overlapping)
            a, b, n = args
            a, b = sorted((a % len(out), b % len(out)))
            n = min(n, b - a, len(out) - b)
            out[a : a + n], out[b : b + n] = out[b : b + n], out[a : a + n]
        if not out:
            out = bytearray(b"\0")
    return bytes(out)


def random_damage(rng, size, positions=None):
    """One damage (a list of 1-3 operations) drawn at random for a file of ``size`` bytes; with
    ``positions``, at those positions only and in place (flips, bytes, zeroed ranges)."""
    ops = []
    kinds = (
        ("flip", "byte", "truncate", "zero", "append", "swap")
        if positions is None
        else ("flip", "byte", "zero")
    )
    for _ in range(int(rng.integers(1, 4))):
        op = kinds[int(rng.integers(len(kinds)))]
        pos = int(rng.integers(size)) if positions is None else int(positions[rng.integers(len(positions))])
        if op == "flip":
            ops.append((op, pos, int(rng.integers(8))))
        elif op == "byte":
            ops.append((op, pos, int(rng.integers(256))))
        elif op == "truncate":
            ops.append((op, pos))
        elif op == "zero":
            ops.append((op, pos, int(rng.integers(1, 4097))))
        elif op == "append":
            ops.append((op, bytes(rng.integers(0, 256, int(rng.integers(1, 600)), dtype=np.uint8))))
        else:
            ops.append((op, pos, int(rng.integers(size)), int(rng.integers(1, 2049))))
    return ops


def metadata_positions(path):
    """The byte positions of an HDF5 file outside its datasets' chunks (and contiguous data)."""
    import h5py

    size = os.path.getsize(path)
    used = np.zeros(size, dtype=bool)
    with h5py.File(path, "r") as f:
        dsets = []
        f.visititems(lambda _, obj: dsets.append(obj) if isinstance(obj, h5py.Dataset) else None)
        for d in dsets:
            if d.chunks is None:
                off = d.id.get_offset()
                if off is not None:
                    used[off : off + d.id.get_storage_size()] = True
                continue
            for i in range(d.id.get_num_chunks()):
                info = d.id.get_chunk_info(i)
                used[info.byte_offset : info.byte_offset + info.size] = True
    return np.flatnonzero(~used)


def spread_flips(positions, n, rng):
    """``n`` single-bit flips at positions spread evenly over ``positions`` (each drawn within
    its stretch), the bit at random."""
    edges = np.linspace(0, len(positions), n + 1).astype(np.int64)
    picks = [positions[rng.integers(lo, max(hi, lo + 1))] for lo, hi in itertools.pairwise(edges)]
    return [[("flip", int(p), int(rng.integers(8)))] for p in picks]


def run(reader, kind, data, damages, keep=5):
    """Counts of the outcomes of ``damages`` applied to ``data`` (a file of ``kind``), with the
    first ``keep`` damages of each bad outcome."""
    outcomes = ("same", "refused", "changed", "error", "crash", "hang")
    counts = {"tried": 0, "unchanged": 0, **dict.fromkeys(outcomes, 0)}
    bad = {}
    for damage in damages:
        damaged = apply(data, damage)
        if damaged == data:  # (zeroed zeros, a byte set to itself: no damage, not read)
            counts["unchanged"] += 1
            continue
        outcome, detail = reader.outcome(kind, damaged)
        counts["tried"] += 1
        counts[outcome] += 1
        if outcome not in GOOD and len(bad.setdefault(outcome, [])) < keep:
            shown = [["append", len(op[1])] if op[0] == "append" else list(op) for op in damage]
            bad[outcome].append({"damage": shown, "detail": detail})
    return counts, bad


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m bench.fuzz_files", description=__doc__.splitlines()[0])
    p.add_argument("--flips", type=int, default=20_000)
    p.add_argument("--damages", type=int, default=2_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS)
    p.add_argument("--timeout", type=float, default=TIMEOUT)
    p.add_argument(
        "--file", nargs=2, action="append", metavar=("KIND", "PATH"), default=[],
        help="damage this file (of one of the kinds, written by another fastcep, say) instead of a new one",
    )  # fmt: skip
    args = p.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        given = {kind: pathlib.Path(path).resolve() for kind, path in args.file}
        files = given or write_files(tmp, args.kinds)
        for kind, path in files.items():
            data = path.read_bytes()
            positions = metadata_positions(path) if kind in DATA_KINDS else np.arange(len(data))
            damages = spread_flips(positions, min(args.flips, len(positions) * 8), rng)
            where = positions if kind in DATA_KINDS else None
            damages += [random_damage(rng, len(data), where) for _ in range(args.damages)]
            reader = Reader({kind: path}, tmp, args.timeout)
            try:
                counts, bad = run(reader, kind, data, damages)
            finally:
                reader.close()
            print(json.dumps({"kind": kind, "bytes": len(data), "flipped_bytes": len(positions), **counts,
                              "bad": bad}), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
