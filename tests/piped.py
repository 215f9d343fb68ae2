"""Command lines whose input comes through a pipe or a FIFO that a writer thread feeds, each under
an alarm, so that a reader that blocks is reported rather than waited for. Run in a subprocess:
``python -c "import piped; piped.main()" SPEC.json`` (from the checkout's root, ``tests`` on the
path) prints one JSON result per case: ``{"code": exit status or "hung", "out": ..., "err": ...,
"seconds": ...}``.

A case is ``{"argv": [...], "data": file whose bytes are written, "how": "pipe" | "stdin" |
"fifo"}``; "@" in ``argv`` stands for the pipe's path (``/proc/self/fd/N``; ``/dev/stdin`` when
the pipe is made standard input) or the FIFO's.
"""

import contextlib
import errno
import io
import json
import os
import signal
import sys
import threading
import time

#: seconds a case may take
ALARM = 30


class Hung(Exception):
    pass


def _write_all(fd, data):
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    except OSError:  # (the reader went away: EPIPE)
        pass
    finally:
        os.close(fd)


def _write_fifo(path, data, stop):
    while True:  # (open without blocking, so that a reader that never comes does not hold the thread)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError as exc:
            if exc.errno != errno.ENXIO or stop.is_set():
                return
            time.sleep(0.005)
    os.set_blocking(fd, True)
    _write_all(fd, data)


def run_case(case, folder, k):
    from fastcep.cli import main

    with open(case["data"], "rb") as fh:
        data = fh.read()
    read_end, stdin, stop = None, None, threading.Event()
    if case["how"] in ("pipe", "stdin"):
        read_end, write_end = os.pipe()
        src = f"/proc/self/fd/{read_end}"
        if case["how"] == "stdin":  # (the pipe as this process's standard input)
            stdin = os.dup(0)
            os.dup2(read_end, 0)
            os.close(read_end)
            read_end, src = 0, "/dev/stdin"
        writer = threading.Thread(target=_write_all, args=(write_end, data), daemon=True)
    else:
        src = os.path.join(folder, f"fifo{k}")
        os.mkfifo(src)
        writer = threading.Thread(target=_write_fifo, args=(src, data, stop), daemon=True)
    writer.start()
    out, err = io.StringIO(), io.StringIO()
    t0 = time.perf_counter()
    signal.alarm(ALARM)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main([src if a == "@" else a for a in case["argv"]])
    except Hung:
        code = "hung"
    finally:
        signal.alarm(0)
    stop.set()  # (a writer still waiting for a reader gives up)
    if read_end is not None:
        os.close(read_end)  # (a writer still blocked on a full pipe gets EPIPE)
    if stdin is not None:
        os.dup2(stdin, 0)
        os.close(stdin)
    writer.join(5)
    secs = time.perf_counter() - t0
    return {"code": code, "out": out.getvalue(), "err": err.getvalue(), "seconds": secs}


def main():
    def alarm(signum, frame):
        raise Hung

    signal.signal(signal.SIGALRM, alarm)
    with open(sys.argv[1]) as fh:
        spec = json.load(fh)
    results = [run_case(case, spec["folder"], k) for k, case in enumerate(spec["cases"])]
    print(json.dumps(results), file=sys.__stdout__)
