"""The ``fastcep`` command line.

``fastcep demo``: fit Bayesian probit and logistic regression with CEP-1, CEP-2 and EP on the
paper's simulated data and on a UCI set, and print a comparison table.
``fastcep convert SRC.txt DST.h5``: a text tensor (``i,j,k,value`` a line) to an HDF5 tensor file.
``fastcep info FILE``: what an HDF5 tensor, model or checkpoint file holds.
``fastcep fit TENSOR.h5 -o MODEL.h5``: batch CEP on an HDF5 tensor, writes a model file.
``fastcep stream TENSOR.h5 -o MODEL.h5``: ADF-CEP with checkpoints and ``--resume``.
``fastcep evaluate MODEL.h5 TEST.h5``: RMSE (continuous) or AUC (binary) of a model on a tensor.

``--json`` prints machine-readable output, ``--quiet`` silences progress and notes. User errors
(bad arguments, missing or corrupt files, bad values) exit with status 2 and a one-line message.
"""

import argparse
import json
import sys
import time
import warnings

import numpy as np

from . import _options as O
from ._loop import ConvergenceWarning


class UserError(Exception):
    """An error caused by the user's input: reported in one line, exit status 2."""


#: the demo's methods, in the order of its table
DEMO_METHODS = ("cep1", "cep2", "ep")


def _warm_up(fit, quiet):
    """Compile the demo's kernels on a tiny problem first, so that the table's seconds are the
    fits' own (the first call of a Numba kernel in a process compiles it)."""
    if not quiet:
        print("(compiling the kernels on a tiny problem first; the seconds exclude it)", file=sys.stderr)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 3))
    y = (X[:, 0] > 0).astype(float)
    with warnings.catch_warnings():  # (two iterations on purpose)
        warnings.simplefilter("ignore", ConvergenceWarning)
        for model in ("probit", "logistic"):
            for method in DEMO_METHODS:
                fit(X, y, model=model, method=method, max_iter=2)


def _compare(data, model, Xtr, ytr, Xte, yte, fit):
    for method in DEMO_METHODS:
        t0 = time.perf_counter()
        res = fit(Xtr, ytr, model=model, method=method)
        secs = time.perf_counter() - t0
        yield {
            "data": data,
            "model": model,
            "method": method,
            "iterations": res.n_iter,
            "converged": res.converged,
            "seconds": secs,
            "test_log_likelihood": res.log_likelihood(Xte, yte),
            "test_auc": res.auc(Xte, yte),
        }


def cmd_demo(args):
    from . import fit
    from .data_tools import load_uci, make_regression_simulation, uci_splits

    rows = []
    out = sys.stdout
    _warm_up(fit, args.quiet)
    if not args.json:
        print(
            f"{'data':<28}{'model':<10}{'method':<7}{'iters':>6}{'seconds':>9}"
            f"{'test LL':>10}{'test AUC':>10}",
            file=out,
        )

    def emit(row):
        rows.append(row)
        if not args.json:
            print(
                f"{row['data']:<28}{row['model']:<10}{row['method']:<7}{row['iterations']:>6}"
                f"{row['seconds']:>9.3f}{row['test_log_likelihood']:>10.4f}{row['test_auc']:>10.4f}",
                file=out,
                flush=True,
            )

    for model in ("probit", "logistic"):
        X, y, _ = make_regression_simulation(model, "gaussian", n=10_000, d=4, seed=0)
        label = "simulation (n=10000, d=4)"
        for row in _compare(label, model, X[:5000], y[:5000], X[5000:], y[5000:], fit):
            emit(row)
    try:
        ds = load_uci(args.uci, args.uci_dir)
    except (ImportError, FileNotFoundError) as exc:
        if not args.quiet:
            print(f"(UCI part skipped: {exc})", file=sys.stderr)
    else:
        tr, te = uci_splits(len(ds.y), 1, seed=0)[0]
        label = f"{ds.name} (n={len(ds.y)}, d={ds.X.shape[1]})"
        for model in ("probit", "logistic"):
            for row in _compare(label, model, ds.X[tr], ds.y[tr], ds.X[te], ds.y[te], fit):
                emit(row)
    if args.json:
        json.dump(rows, out, indent=1)
        out.write("\n")
    return 0


def _out(args, payload, text):
    if args.json:
        json.dump(payload, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        print(text)


def _shape_arg(text):
    if text is None:
        return None
    parts = text.replace("x", ",").split(",")
    digits = [p.strip() for p in parts]
    if len(parts) < 2 or not all(d.isascii() and d.isdigit() and int(d) > 0 for d in digits):
        raise UserError(f"--shape must be two or more positive integers like 200,100,200; got {text!r}")
    return tuple(int(d) for d in digits)


#: text_to_tensor's parameters, as convert's messages name them
CONVERT_FLAGS = (
    ("skip_header=True", "--skip-header"),
    ("index_base=0", "--index-base 0"),
    ("index_base=1", "--index-base 1"),
)


def _convert_words(text):
    for param, flag in CONVERT_FLAGS:
        text = text.replace(param, flag)
    return text


def cmd_convert(args):
    from .io import TensorReader, text_to_tensor

    _check_output(args, args.dst, args.src)
    delim = {"comma": ",", "tab": "\t", "space": " ", "auto": None}.get(args.delimiter, args.delimiter)
    if delim is not None and len(delim) != 1:
        raise UserError(f"--delimiter must be comma, tab, space, auto or one character; got {delim!r}")
    shape = _shape_arg(args.shape)
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UserWarning)
        try:
            shape = text_to_tensor(
                args.src, args.dst, index_base=args.index_base, delimiter=delim, shape=shape,
                binary=args.binary, skip_header=args.skip_header,
            )  # fmt: skip
        except ValueError as exc:
            raise UserError(_convert_words(str(exc))) from None
    for w in caught:
        print(f"fastcep convert: warning: {_convert_words(str(w.message))}", file=sys.stderr)
    with TensorReader(args.dst) as r:
        n = r.n
    secs = time.perf_counter() - t0
    inferred = args.shape is None
    how = " (inferred from the largest index of each mode)" if inferred else ""
    _out(
        args,
        {
            "file": args.dst,
            "shape": list(shape),
            "shape_inferred": inferred,
            "entries": n,
            "binary": args.binary,
            "seconds": secs,
        },
        f"wrote {args.dst}: {n} entries, shape {'x'.join(map(str, shape))}{how} ({secs:.1f} s)",
    )
    return 0


def cmd_info(args):
    import h5py

    from .io import TensorReader, load_model

    try:
        with h5py.File(args.file, "r") as f:
            fmt = f.attrs.get("format")
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise UserError(f"{args.file!r} is not an HDF5 file ({exc})") from None
    if fmt == "fastcep-tensor":
        with TensorReader(args.file) as r:
            info = {
                "file": args.file,
                "format": fmt,
                "shape": list(r.shape),
                "entries": r.n,
                "binary": r.binary,
                "chunk_rows": r.chunk_rows,
                "density": r.n / float(np.prod([float(d) for d in r.shape])),
            }
        text = (
            f"{args.file}: tensor, shape {'x'.join(map(str, info['shape']))}, {info['entries']} entries "
            f"({'binary' if info['binary'] else 'real'} values, density {info['density']:.3g}), "
            f"chunks of {info['chunk_rows']} rows"
        )
    elif fmt == "fastcep-cp-model":
        res = load_model(args.file)
        info = {
            "file": args.file,
            "format": fmt,
            "model": res.model,
            "method": res.method,
            "rank": res.rank,
            "shape": list(res.shape),
            "covariance": res.covariance,
            "iterations": res.n_iter,
            "converged": res.converged,
            "stop_reason": res.stop_reason,
        }
        text = (
            f"{args.file}: {res.model} model, rank {res.rank}, shape {'x'.join(map(str, res.shape))}, "
            f"{res.covariance} covariances, {res.n_iter} iterations ({res.stop_reason})"
        )
    elif fmt == "fastcep-stream-checkpoint":
        from .io import read_checkpoint

        state, _ = read_checkpoint(args.file, None)
        info = {
            "file": args.file,
            "format": fmt,
            "batches_done": state.batches_done,
            "rows_done": state.rows_done,
        }
        text = (
            f"{args.file}: stream checkpoint after {state.batches_done} batches ({state.rows_done} entries)"
        )
    else:
        raise UserError(f"{args.file!r} is not a fastcep file (format attribute {fmt!r})")
    _out(args, info, text)
    return 0


def _check_output(args, path, *inputs):
    """Before the work: refuse an output that is one of the inputs (the same file, however
    named) or that cannot be written (``io.files.check_output``)."""
    from .io.files import check_output

    check_output(path, inputs, "output")


def _options(args, names):
    return {n: getattr(args, n) for n in names if getattr(args, n, None) is not None}


def _save_and_report(args, res, secs, unit):
    """Write the fitted model to --output and print what was written (text or JSON)."""
    from .io import save_model

    save_model(res, args.output)
    summary = {
        "model_file": args.output,
        "model": res.model,
        "rank": res.rank,
        "iterations": res.n_iter,
        "converged": res.converged,
        "stop_reason": res.stop_reason,
        "seconds": secs,
    }
    _out(
        args,
        summary,
        f"wrote {args.output}: {res.model} rank {res.rank}, {res.n_iter} {unit} ({res.stop_reason}), "
        f"{secs:.1f} s",
    )
    return 0


def cmd_fit(args):
    from .api import fit
    from .io import TensorReader

    _check_output(args, args.output, args.tensor)
    with TensorReader(args.tensor) as r:
        if r.n > args.max_entries:
            raise UserError(
                f"{args.tensor!r} has {r.n} entries; 'fit' holds them in memory (limit --max-entries "
                f"{args.max_entries}); use 'fastcep stream' for out-of-core decomposition"
            )
        coords, values = r.read()
        shape = r.shape
    names = ("damping", "max_iter", "tol", "covariance", "schedule", "seed", "prior_var", "prior_mean")
    opts = _options(args, (*names, "a0", "b0", "probit_curvature", "init", "noise_warmup", "expect_under"))
    t0 = time.perf_counter()
    last = [0.0]

    def progress(info):
        if not args.quiet and time.perf_counter() - last[0] > 0.5:
            last[0] = time.perf_counter()
            print(f"\r[fit] iteration {info.iteration}, change {info.change:.2e}", end="", file=sys.stderr)

    res = fit(
        coords, values, model=args.model, method=args.method, shape=shape, rank=args.rank,
        n_threads=args.threads, callback=progress, **opts,
    )  # fmt: skip
    if not args.quiet:
        print(file=sys.stderr)
    return _save_and_report(args, res, time.perf_counter() - t0, "iterations")


def cmd_stream(args):
    from .streaming import stream

    _check_output(args, args.output, args.tensor, args.checkpoint)
    names = ("damping", "max_iter", "tol", "covariance", "prior_var", "checkpoint_every", "prior_mean")
    opts = _options(args, (*names, "a0", "b0", "probit_curvature", "expect_under"))
    t0 = time.perf_counter()
    res = stream(
        args.tensor, model=args.model, rank=args.rank, method=args.method, batch_size=args.batch_size,
        shuffle=args.shuffle, seed=args.seed, checkpoint=args.checkpoint, resume=args.resume,
        n_threads=args.threads, progress=not args.quiet,
        **opts,
    )  # fmt: skip
    return _save_and_report(args, res, time.perf_counter() - t0, "batches")


def cmd_evaluate(args):
    from .io import TensorReader, load_model

    res = load_model(args.model)
    with TensorReader(args.tensor) as r:
        if tuple(r.shape) != tuple(res.shape):
            raise UserError(f"the test tensor has shape {r.shape}, the model {res.shape}")
        coords, values = r.read()
    if res.model == "cp_gaussian":
        metric, value = "rmse", res.rmse(coords, values)
    else:
        metric, value = "auc", res.auc(coords, values)
    _out(
        args,
        {"model_file": args.model, "tensor": args.tensor, "entries": len(values), metric: value},
        f"{metric.upper()} {value:.4f} on {len(values)} entries",
    )
    return 0


def build_parser():
    p = argparse.ArgumentParser(prog="fastcep", description="Conditional expectation propagation.")
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("demo", help="CEP-1, CEP-2 and EP on simulated and UCI data: a comparison table")
    d.add_argument("--uci", default="ionos", help="UCI set for the second part (default: ionos)")
    d.add_argument("--uci-dir", default=None, help="folder of the UCI files (default: PyPI packages)")
    d.add_argument("--json", action="store_true", help="print the table as JSON")
    d.add_argument("--quiet", action="store_true", help="no notes on stderr")
    d.set_defaults(func=cmd_demo)

    c = sub.add_parser("convert", help="text tensor (i,j,k,value a line) -> HDF5 tensor file")
    c.add_argument("src")
    c.add_argument("dst")
    c.add_argument("--index-base", type=int, choices=(0, 1), default=1, help="of the text file (default 1)")
    c.add_argument("--delimiter", default="auto", help="comma, tab, space, auto (default) or a character")
    c.add_argument("--shape", default=None, help="tensor shape, e.g. 200,100,200 (default: from the data)")
    c.add_argument("--binary", action="store_true", help="values must be 0 or 1")
    c.add_argument(
        "--skip-header", action="store_true", help="skip the first line that is not blank or a comment"
    )
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=cmd_convert)

    i = sub.add_parser("info", help="describe an HDF5 tensor, model or checkpoint file")
    i.add_argument("file")
    i.add_argument("--json", action="store_true")
    i.set_defaults(func=cmd_info)

    def option(q, name, family, **kw):
        """An option of ``fastcep.fit`` (family "cp") or ``fastcep.stream`` as a flag: its choices
        and help from the option table (``fastcep._options``); None (not given): the default."""
        if O.choices(name, family) is not None:
            kw["choices"] = O.choices(name, family)
        kw.setdefault("default", None)
        q.add_argument("--" + name.replace("_", "-"), help=O.cli_help(name, family), **kw)

    def model_args(q, family):
        q.add_argument("tensor", help="HDF5 tensor file (see 'fastcep convert')")
        q.add_argument("-o", "--output", required=True, help="model file to write (HDF5)")
        option(q, "model", family, required=True)
        option(q, "rank", family, type=int, required=True)
        for name in ("damping", "tol", "prior_var", "a0", "b0", "prior_mean"):
            option(q, name, family, type=float)
        option(q, "max_iter", family, type=int)
        for name in ("covariance", "probit_curvature", "expect_under"):
            option(q, name, family)
        option(q, "seed", family, type=int, default=O.defaults(family, "cep1")["seed"])
        q.add_argument("--threads", type=int, default=None, help=O.cli_help("n_threads", family))
        q.add_argument("--quiet", action="store_true", help="no progress on stderr")
        q.add_argument("--json", action="store_true")

    f = sub.add_parser("fit", help="batch CEP on an HDF5 tensor; writes a model file")
    model_args(f, "cp")
    option(f, "method", "cp", default=O.defaults("cp", "cep1")["method"])
    option(f, "schedule", "cp")
    option(f, "init", "cp")
    option(f, "noise_warmup", "cp", type=int)
    f.add_argument("--max-entries", type=int, default=50_000_000, help="refuse larger tensors (use stream)")
    f.set_defaults(func=cmd_fit)

    s = sub.add_parser("stream", help="streaming ADF-CEP on an HDF5 tensor, with checkpoints")
    model_args(s, "stream")
    option(s, "method", "stream", default=O.defaults("stream", "cep1")["method"])
    option(s, "batch_size", "stream", type=int, default=O.defaults("stream", "cep1")["batch_size"])
    option(s, "shuffle", "stream", action="store_true", default=False)
    option(s, "checkpoint", "stream", type=str)
    option(s, "checkpoint_every", "stream", type=int)
    option(s, "resume", "stream", action="store_true", default=False)
    s.set_defaults(func=cmd_stream)

    e = sub.add_parser("evaluate", help="RMSE or AUC of a model file on an HDF5 test tensor")
    e.add_argument("model")
    e.add_argument("tensor")
    e.add_argument("--json", action="store_true")
    e.set_defaults(func=cmd_evaluate)
    return p


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)  # argparse exits with status 2 on bad arguments
    try:
        return args.func(args)
    except (UserError, ValueError, TypeError, OSError, FloatingPointError, MemoryError) as exc:
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"fastcep {args.command}: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"fastcep {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
