"""The ``fastcep`` command line (also ``python -m fastcep``; ``fastcep --version``).

``fastcep demo``: fit Bayesian probit and logistic regression with CEP-1, CEP-2 and EP on the
paper's simulated data and on a UCI set, and print a comparison table.
``fastcep convert SRC.txt DST.h5``: a text tensor (``i,j,k,value`` a line) to an HDF5 tensor file;
svmlight text, or a CSV table whose categorical columns are hashed (``--target COL --hash COL
...``), to a sparse-row HDF5 file (``fastcep.io.csr``).
``fastcep info FILE``: what an HDF5 tensor, model or checkpoint file holds.
``fastcep fit TENSOR.h5 -o MODEL.h5``: batch CEP on an HDF5 tensor, writes a model file.
``fastcep stream TENSOR.h5 -o MODEL.h5``: ADF-CEP with checkpoints and ``--resume``.
``fastcep evaluate MODEL.h5 TEST.h5``: RMSE and test log-likelihood (continuous; counts also the
RMSE on the log scale), or AUC, test log-likelihood, Brier score, calibration error, mean P and
positive rate (binary).
``fastcep glm fit DATA --target COL -o MODEL.h5``: Bayesian regression (``--model``: probit,
logistic, gaussian, poisson, negbin, student_t) on a CSV file or HDF5 table (``fastcep.io.table``),
writes a regression model file (``fastcep.io.glm_model``); ``fastcep glm evaluate MODEL.h5 DATA``:
its test metrics (binary: as ``evaluate``; values: RMSE, test log-likelihood, mean deviance, and
for counts the RMSE on the log scale). Both also take labelled sparse rows: svmlight text or a
sparse-row HDF5 file. ``fastcep glm stream ROWS -o MODEL.h5``: one online pass over such a file
(batches read ahead, rows/s in the progress line, ``--checkpoint`` and ``--resume``).

``--json`` prints machine-readable output, ``--quiet`` silences progress and notes, ``--plot
FILE.png`` draws the fit's convergence (``fit``, ``stream``, ``glm fit``) or the predictions
(``evaluate``, ``glm evaluate``; needs matplotlib). User errors (bad arguments, missing, corrupt
or mismatched files, bad values) exit with status 2 and a one-line message that names the fix
where there is one (a text tensor given as a tensor file: ``fastcep convert`` it).
"""

import argparse
import contextlib
import json
import os
import shlex
import sys
import time
import warnings

import numpy as np

from . import __version__
from . import _options as O
from ._loop import ConvergenceWarning, end_status
from .io.formats import CHECKPOINT_FORMAT, CSR_FORMAT, GLM_MODEL_FORMAT, MODEL_FORMAT, TENSOR_FORMAT
from .likelihoods import resolve as resolve_likelihood


class UserError(Exception):
    """An error caused by the user's input: reported in one line, exit status 2."""


#: the demo's methods, in the order of its table
DEMO_METHODS = ("cep1", "cep2", "ep")
#: seconds to wait for the Dask scheduler of --scheduler
SCHEDULER_TIMEOUT = 30


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


def _convert_rows(args, kind):
    """``convert`` of svmlight text or a hashed CSV table to a sparse-row file."""
    from .io.csr import svmlight_to_csr
    from .io.hashed import hash_csv_to_csr

    _check_output(args.dst, "dst", [args.src], CSR_FORMAT, args.force)
    t0 = time.perf_counter()
    if kind == "svmlight":
        if args.target or args.hash:
            raise UserError(
                "--target and --hash are for a CSV table; an svmlight file's label is its first field"
            )
        base = 0 if args.index_base is None else args.index_base
        n, d, nnz = svmlight_to_csr(args.src, args.dst, args.width, base)
    else:
        if not args.target:
            raise UserError(
                f"{args.src!r} is a table: give --target COL (the label) and --hash COL ... to hash"
            )
        delim = {"comma": ",", "tab": "\t", "auto": ","}.get(args.delimiter, args.delimiter)
        width = args.width or (1 << args.hash_bits)
        n, d, nnz = hash_csv_to_csr(args.src, args.dst, args.target, args.hash or [], width, delim)
    secs = time.perf_counter() - t0
    payload = {
        "file": args.dst,
        "format": CSR_FORMAT,
        "rows": n,
        "n_features": d,
        "nnz": nnz,
        "seconds": secs,
    }
    _out(args, payload, f"wrote {args.dst}: {n} rows, {d} columns, {nnz} nonzeros ({secs:.1f} s)")
    return 0


def cmd_convert(args):
    from .io import TensorReader, text_to_tensor
    from .io.kinds import file_kind

    kind = file_kind(args.src)
    if kind == "svmlight" or (kind == "table" and (args.target or args.hash)):
        return _convert_rows(args, kind)
    if args.target or args.hash or args.width:
        raise UserError(
            f"--target, --hash and --width convert svmlight text or a CSV table to sparse rows; "
            f"{args.src!r} is {_KIND_WORDS.get(kind, kind)}"
        )
    args.index_base = 1 if args.index_base is None else args.index_base
    _check_output(args.dst, "dst", [args.src], TENSOR_FORMAT, args.force)
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


# ----------------------------------------------------------------- files of the wrong kind
#: the fastcep format of each kind of file a verb asks for
_FORMAT = {"tensor": TENSOR_FORMAT, "model": MODEL_FORMAT, "glm-model": GLM_MODEL_FORMAT}
#: where each kind of file comes from (the fix when a file is nothing a verb can use)
_COMES_FROM = {
    "tensor": "a tensor file comes from `fastcep convert` (a text tensor) or fastcep.write_tensor",
    "model": "a CP model file comes from `fastcep fit` or `fastcep stream`",
    "glm-model": "a regression model file comes from `fastcep glm fit`",
    "table": "regression data is a CSV file with a header row of column names, or an HDF5 file of "
    "one 1-D dataset per column",
    None: "`fastcep info` describes fastcep's tensor, sparse-row, model and checkpoint files",
}


def _fix(path, wanted):
    """What ``path`` is and what to do with it, where a ``wanted`` file ("tensor", "model",
    "glm-model", "table" or None: any fastcep file) was asked for; None if nothing to add."""
    from .io import file_kind

    kind = file_kind(path)
    if kind in ("missing", "folder", _FORMAT.get(wanted)) or (
        kind in ("table", "hdf5") and wanted == "table"
    ):
        return None
    p = shlex.quote(path)
    if kind == TENSOR_FORMAT:
        return f"it is a tensor file: decompose it with `fastcep fit {p} -o MODEL.h5 --model MODEL --rank R`"
    if kind == MODEL_FORMAT:
        return f"it is a CP model file: evaluate it with `fastcep evaluate {p} TEST.h5`"
    if kind == GLM_MODEL_FORMAT:
        return f"it is a regression model file: evaluate it with `fastcep glm evaluate {p} DATA`"
    if kind == CHECKPOINT_FORMAT:
        return (
            f"it is a stream checkpoint: continue its stream with `fastcep stream TENSOR.h5 -o MODEL.h5 "
            f"--checkpoint {p} --resume` and the stream's options"
        )
    if kind in (CSR_FORMAT, "svmlight"):
        return (
            f"it holds labelled sparse rows: regression data for `fastcep glm fit {p} -o MODEL.h5` or "
            f"`fastcep glm stream {p} -o MODEL.h5`"
        )
    if kind == "numbers" and wanted == "table":
        return "its first line holds numbers, not column names: add a header row"
    if kind == "numbers":
        dst = shlex.quote(os.path.splitext(path)[0] + ".h5")
        return f"it looks like a text tensor: convert it with `fastcep convert {p} {dst}`"
    if kind == "table":
        return (
            f"it is text with a header row: regression data for `fastcep glm fit {p} --target COL -o "
            "MODEL.h5`, or a text tensor to convert with `fastcep convert`"
        )
    return _COMES_FROM[wanted]


def _with_fix(exc, path, wanted):
    """``exc``, an error about ``path``, as a one-line UserError ending with the fix (``_fix``)."""
    msg = str(exc).splitlines()[0].rstrip(".") if str(exc) else type(exc).__name__
    fix = _fix(path, wanted)
    return UserError(f"{msg}; {fix}" if fix else msg)


def _read_tensor(path, max_entries=None):
    """``(coords, values, shape)`` of a tensor file; over ``max_entries`` entries: UserError."""
    from .io import FileFormatError, TensorReader

    try:
        with TensorReader(path) as r:
            if max_entries is not None and r.n > max_entries:
                raise UserError(
                    f"{path!r} has {r.n} entries; 'fit' holds them in memory (limit --max-entries "
                    f"{max_entries}); use 'fastcep stream' for out-of-core decomposition"
                )
            coords, values = r.read()
            return coords, values, tuple(r.shape)
    except FileFormatError as exc:
        raise _with_fix(exc, path, "tensor") from None


def _check_tensor(path):
    """Open a tensor file and check its metadata (the stream reads it itself)."""
    from .io import FileFormatError, TensorReader

    try:
        with TensorReader(path):
            pass
    except FileFormatError as exc:
        raise _with_fix(exc, path, "tensor") from None


def _load_cp_model(path):
    from .io import FileFormatError, load_model

    try:
        return load_model(path)
    except FileFormatError as exc:
        raise _with_fix(exc, path, "model") from None


def _load_glm_model(path):
    from .io import FileFormatError, load_glm_model

    try:
        return load_glm_model(path)
    except FileFormatError as exc:
        raise _with_fix(exc, path, "glm-model") from None


def _read_table(path, columns, delimiter):
    from .io import FileFormatError, read_table

    try:
        return read_table(path, columns, delimiter)
    except FileFormatError as exc:
        raise _with_fix(exc, path, "table") from None


#: what ``io.file_kind`` calls a file, in words (the refusal of an output that exists)
_KIND_WORDS = {
    "numbers": "text of numbers (a text tensor?)",
    "table": "a text table (CSV data?)",
    "text": "text",
    "binary": "a binary file",
    "hdf5": "an HDF5 file that is not fastcep's",
    "unreadable": "a file that cannot be read",
    TENSOR_FORMAT: "a fastcep tensor",
    MODEL_FORMAT: "a fastcep CP model",
    GLM_MODEL_FORMAT: "a fastcep regression model",
    CHECKPOINT_FORMAT: "a fastcep stream checkpoint",
    CSR_FORMAT: "fastcep sparse rows",
    "svmlight": "svmlight text (sparse rows)",
    "png": "a PNG image",
}
_PNG = b"\x89PNG\r\n\x1a\n"


def _existing_kind(path):
    """``io.file_kind`` of ``path``, with "png" for a PNG image."""
    from .io import file_kind

    kind = file_kind(path)
    if kind == "binary":
        with open(path, "rb") as fh:
            if fh.read(len(_PNG)) == _PNG:
                return "png"
    return kind


def _check_output(path, flag, inputs=(), kind=None, force=False):
    """Before any work: refuse an output path (of option ``flag``) that is one of the run's
    inputs, however named, or whose folder does not exist or cannot be written
    (``io.files.check_output``). And one that exists and is not a file of ``kind`` (a fastcep
    format, or "png"), which the run would replace, unless ``force`` (``--force``); an empty file
    holds nothing to lose."""
    from .io.files import check_output

    check_output(path, inputs, f"output ({flag})")
    if kind is None or force or path is None:
        return
    found = _existing_kind(path)
    if found in ("missing", "empty", kind):
        return
    raise UserError(
        f"the output ({flag}) {path!r} exists and holds {_KIND_WORDS.get(found, found)}, not "
        f"{_KIND_WORDS[kind]}; this run would replace it. Give --force to replace it, or choose "
        "another path."
    )


# ---------------------------------------------------------------------------------- plots
def _check_plot(args, inputs=()):
    """With --plot: matplotlib importable and the image's folder there, before any work."""
    if getattr(args, "plot", None) is None:
        return
    _check_output(args.plot, "--plot", inputs, "png", args.force)
    try:
        from .plot import agg_figure

        agg_figure()
    except ImportError as exc:
        raise UserError(f"--plot needs matplotlib: {exc}") from None


def _save_plot(args, draw, figsize):
    """Draw with ``draw(fig)`` on a figure of the non-interactive Agg canvas and write it to
    --plot; returns the path (None without --plot)."""
    if getattr(args, "plot", None) is None:
        return None
    from .plot import agg_figure

    fig = agg_figure(figsize)
    draw(fig)
    fig.savefig(args.plot, dpi=100)
    return args.plot


def _draw_convergence(res):
    from . import plot

    def draw(fig):
        plot.convergence(res, ax=fig.subplots(1, 2))

    return draw


def _draw_binary(y, p, probabilities, both_classes):
    """Calibration (probabilities only) and ROC (both classes only) side by side."""
    from . import plot

    def draw(fig):
        panels = int(probabilities) + int(both_classes)
        if panels == 0:
            ax = fig.subplots()
            ax.text(0.5, 0.5, "one class only: no ROC curve", ha="center", va="center")
            ax.set_axis_off()
            return
        grid = fig.add_gridspec(2, panels, height_ratios=(3, 1))
        if probabilities:
            curve = fig.add_subplot(grid[0, 0])
            plot.calibration(y, p, ax=(curve, fig.add_subplot(grid[1, 0], sharex=curve)))
        if both_classes:
            plot.roc(y, p, ax=fig.add_subplot(grid[:, panels - 1]))

    return draw


def _draw_continuous(y, yhat):
    from . import plot

    def draw(fig):
        plot.predicted_vs_observed(y, yhat, ax=fig.subplots())

    return draw


# -------------------------------------------------------------------------------- metrics
def _binary_metrics(y, p, log_likelihood, probabilities=True):
    """The binary test metrics of predictions ``p`` against 0/1 labels ``y``: AUC (None with one
    class), and for probabilities the test log-likelihood, Brier score, expected calibration
    error (10 equal-width bins) and mean P; the positive rate always."""
    from .metrics import auc, brier, expected_calibration_error

    both = bool(0 < y.sum() < len(y))
    out = {"auc": auc(y, p) if both else None}
    if probabilities:
        out.update(
            test_log_likelihood=log_likelihood(),
            brier=brier(y, p),
            ece=expected_calibration_error(y, p, n_bins=10),
            mean_p=float(np.mean(p)),
        )
    out["positive_rate"] = float(np.mean(y))
    return out


def _binary_text(m, n, note=""):
    auc = "AUC undefined (one class only)" if m["auc"] is None else f"AUC {m['auc']:.4f}"
    lines = [f"{auc} on {n} entries{note}"]
    if "brier" in m:
        lines += [
            f"test log-likelihood {m['test_log_likelihood']:.4f} (mean log predictive probability)",
            f"Brier score {m['brier']:.4f}, calibration error {m['ece']:.4f} (ECE, 10 equal-width bins)",
            f"mean P {m['mean_p']:.4f} against a positive rate of {m['positive_rate']:.4f}",
        ]
    else:
        lines.append(f"positive rate {m['positive_rate']:.4f}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------- verbs
def cmd_info(args):
    import h5py

    from .io import TensorReader

    if not os.path.exists(args.file):
        raise UserError(f"no such file {args.file!r}")
    try:
        with h5py.File(args.file, "r") as f:
            fmt = f.attrs.get("format")
    except OSError as exc:
        raise _with_fix(f"{args.file!r} is not an HDF5 file ({exc})", args.file, None) from None
    if fmt == TENSOR_FORMAT:
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
    elif fmt == MODEL_FORMAT:
        res = _load_cp_model(args.file)
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
    elif fmt == GLM_MODEL_FORMAT:
        m = _load_glm_model(args.file)
        res = m.result
        info = {
            "file": args.file,
            "format": fmt,
            "model": res.model,
            "method": res.method,
            "target": m.target,
            "features": None if m.features is None else list(m.features),
            "n_features": res.posterior.mean.size,
            "intercept": res.intercept is not None,
            "iterations": res.n_iter,
            "converged": res.converged,
            "stop_reason": res.stop_reason,
            "rows_absorbed": res.options.get("rows_absorbed", 0),
        }
        online = f", then {info['rows_absorbed']:,} rows absorbed online" if info["rows_absorbed"] else ""
        text = (
            f"{args.file}: {res.model} regression ({res.method}) of {m.target or 'a target'} on "
            f"{res.posterior.mean.size} feature{'s' if res.posterior.mean.size != 1 else ''}"
            f"{'' if m.features is not None else ' (unnamed columns)'}"
            f"{' and an intercept' if res.intercept is not None else ''}, "
            f"{res.n_iter} iterations ({res.stop_reason}){online}"
        )
    elif fmt == CSR_FORMAT:
        from .io.csr import CSRReader

        with CSRReader(args.file) as r:
            info = {
                "file": args.file, "format": fmt, "rows": r.n, "n_features": r.n_features, "nnz": r.nnz,
                "source": r.source,
            }  # fmt: skip
        text = (
            f"{args.file}: sparse rows, {r.n} rows x {r.n_features} columns, {r.nnz} nonzeros "
            f"({r.nnz / r.n:.1f} a row){f', from {r.source}' if r.source else ''}"
        )
    elif fmt == CHECKPOINT_FORMAT:
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
        raise UserError(
            f"{args.file!r} is not a fastcep file (format attribute {fmt!r}); {_COMES_FROM[None]}"
        )
    _out(args, info, text)
    return 0


def _options(args, names):
    return {n: getattr(args, n) for n in names if getattr(args, n, None) is not None}


def _report_fit(args, res, summary, text):
    """Draw the fit's convergence to --plot if asked, and print what was written."""
    plotted = _save_plot(args, _draw_convergence(res), (10.0, 4.0))
    if plotted is not None:
        summary["plot"] = plotted
        text += f"\nwrote {plotted}: convergence"
    _out(args, summary, text)
    return 0


def _save_and_report(args, res, secs, unit):
    """Write the fitted model to --output (and --plot) and print what was written (text or JSON)."""
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
    text = (
        f"wrote {args.output}: {res.model} rank {res.rank}, {res.n_iter} {unit} ({res.stop_reason}), "
        f"{secs:.1f} s"
    )
    return _report_fit(args, res, summary, text)


def cmd_fit(args):
    from .api import fit

    _check_output(args.output, "-o", [args.tensor], MODEL_FORMAT, args.force)
    _check_plot(args, [args.tensor, args.output])
    coords, values, shape = _read_tensor(args.tensor, args.max_entries)
    names = ("damping", "max_iter", "tol", "covariance", "schedule", "seed", "prior_var", "prior_mean")
    more = ("a0", "b0", "probit_curvature", "init", "noise_warmup", "expect_under", "prior", "likelihood")
    opts = _options(args, (*names, *more))
    t0 = time.perf_counter()
    with _scheduler(args) as client:
        if client is not None:  # (an option of the methods that run on a cluster only)
            opts["client"] = client
        res = fit(
            coords, values, model=args.model, method=args.method, shape=shape, rank=args.rank,
            n_threads=args.threads, progress=not args.quiet, **opts,
        )  # fmt: skip
    return _save_and_report(args, res, time.perf_counter() - t0, "iterations")


def cmd_stream(args):
    from .api import stream

    _check_output(args.output, "-o", [args.tensor, args.checkpoint], MODEL_FORMAT, args.force)
    if args.checkpoint is not None and not args.resume:  # (with --resume it is read)
        _check_output(args.checkpoint, "--checkpoint", [args.tensor], CHECKPOINT_FORMAT, args.force)
    _check_plot(args, [args.tensor, args.output, args.checkpoint])
    _check_tensor(args.tensor)
    names = ("damping", "max_iter", "tol", "covariance", "prior_var", "checkpoint_every", "prior_mean")
    more = ("a0", "b0", "probit_curvature", "expect_under", "prior", "likelihood", "passes")
    opts = _options(args, (*names, *more))
    t0 = time.perf_counter()
    with _scheduler(args) as client:
        if client is not None:  # (an option of cluster streams only)
            opts["client"] = client
        elif "passes" in opts:
            raise UserError("--passes are the passes of a cluster stream; give --scheduler too.")
        res = stream(
            args.tensor, model=args.model, rank=args.rank, method=args.method, batch_size=args.batch_size,
            shuffle=args.shuffle, seed=args.seed, checkpoint=args.checkpoint, resume=args.resume,
            n_threads=args.threads, progress=not args.quiet,
            **opts,
        )  # fmt: skip
    return _save_and_report(args, res, time.perf_counter() - t0, "batches")


def cmd_evaluate(args):
    from .io import file_kind

    if file_kind(args.model) == TENSOR_FORMAT and file_kind(args.tensor) == MODEL_FORMAT:
        raise UserError(
            f"the model file comes first: `fastcep evaluate {shlex.quote(args.tensor)} "
            f"{shlex.quote(args.model)}`"
        )
    _check_plot(args, [args.model, args.tensor])
    res = _load_cp_model(args.model)
    coords, values, shape = _read_tensor(args.tensor)
    if shape != tuple(res.shape):
        raise UserError(f"the test tensor has shape {shape}, the model {res.shape}")
    payload = {"model_file": args.model, "tensor": args.tensor, "entries": len(values)}
    if not res.likelihood.binary:  # (cp_gaussian, and a generic model of real values or counts)
        pred = res.predict(coords)
        payload["rmse"] = res.rmse(coords, values)
        payload["test_log_likelihood"] = None if res.point_estimate else res.log_likelihood(coords, values)
        payload["mean_prediction"], payload["mean_value"] = float(np.mean(pred)), float(np.mean(values))
        ll = payload["test_log_likelihood"]
        kind = type(res.likelihood).__name__  # (what the values are scored under)
        text = "\n".join(
            [
                f"RMSE {payload['rmse']:.4f} on {len(values)} entries",
                *_log1p_rmse(payload, res.likelihood, lambda: res.rmse(coords, values, scale="log1p")),
                "test log-likelihood "
                + ("n/a (a point estimate)" if ll is None else f"{ll:.4f} ({kind} predictive)"),
                f"mean prediction {payload['mean_prediction']:.4g} against a mean value of "
                f"{payload['mean_value']:.4g}",
            ]
        )
        draw, figsize = _draw_continuous(values, pred), (6.0, 6.0)
    else:
        y = np.asarray(values) > 0
        p = res.predict(coords)
        probabilities = not res.point_estimate  # (CP-WOPT's predictions are scores)
        m = _binary_metrics(y, p, lambda: res.log_likelihood(coords, values), probabilities)
        payload.update(m)
        note = "" if probabilities else " (a point estimate: its predictions are scores, not probabilities)"
        text = _binary_text(m, len(values), note)
        draw, figsize = _draw_binary(y, p, probabilities, m["auc"] is not None), (10.0, 5.0)
    plotted = _save_plot(args, draw, figsize)
    if plotted is not None:
        payload["plot"] = plotted
        text += f"\nwrote {plotted}"
    _out(args, payload, text)
    return 0


#: the options of ``fastcep glm fit`` from the option table (family "regression")
GLM_OPTIONS = (
    "prior_var", "fit_intercept", "intercept_var", "center", "damping", "max_iter", "tol", "schedule",
    "stopping", "n_nodes", "n_samples", "threshold", "n_features", "seed",
)  # fmt: skip


def _glm_data(path, target, features, delimiter, binary=True):
    """``(features, X, y)`` from a data table: the named feature columns (default: every column
    but the target) and the target (``binary``: checked as labels 0/1 or -1/1; else the fit checks
    it for its likelihood)."""
    if features is not None and len(set(features)) != len(features):
        raise UserError("--features names a column twice")
    if features is not None and target in features:
        raise UserError(f"--features lists the target column {target!r}")
    table = _read_table(path, None if features is None else [target, *features], delimiter)
    if target not in table.columns:
        columns = ", ".join(map(repr, table.names))
        raise _with_fix(f"{path!r} has no column {target!r}; its columns are {columns}", path, "table")
    if features is None:
        features = [name for name in table.names if name != target]
    if not features:
        raise UserError(f"{path!r} has no column besides the target {target!r}: nothing to regress on")
    X = np.column_stack([table.columns[name] for name in features])
    y = table.columns[target]
    labels = set(np.unique(y).tolist())
    if binary and not (labels <= {0.0, 1.0} or labels <= {-1.0, 1.0}):
        rows = np.nonzero(~np.isin(y, (-1.0, 0.0, 1.0)))[0]
        first = f"data row {rows[0] + 1} holds {float(y[rows[0]]):g}" if rows.size else "it mixes 0 and -1"
        raise UserError(f"the target column {target!r} must hold binary labels 0/1 or -1/1; {first}")
    return tuple(features), X, y


#: the kinds of file that hold labelled sparse rows (``fastcep.io.svmlight``, ``fastcep.io.csr``)
ROWS_KINDS = ("svmlight", CSR_FORMAT)


def _is_rows(path):
    from .io.kinds import file_kind

    return file_kind(path) in ROWS_KINDS


def _glm_rows(args, binary, width=None):
    """``(None, X, y)`` of a file of labelled sparse rows (svmlight or sparse-row HDF5): X CSR of
    ``width`` columns (a model's; None: the file's or --n-features), y 0/1 for a ``binary``
    likelihood (from 0/1 or -1/1; an error names the line or row of another label)."""

    from .glm.stream import binary_labels
    from .io.csr import CSRReader
    from .io.kinds import file_kind
    from .io.svmlight import read_svmlight, widened

    if getattr(args, "features", None):
        raise UserError(
            "--features names a table's columns; sparse rows have none (their columns are numbers)"
        )
    n_features = width if width is not None else getattr(args, "width", None)
    if file_kind(args.data) == "svmlight":
        part = read_svmlight(args.data, n_features, args.index_base)
    else:
        with CSRReader(args.data) as r:
            part = r.read()
        if n_features is not None and r.n_features > n_features:
            beyond = np.flatnonzero(part.X.indices >= n_features)
            if beyond.size:
                row = int(np.searchsorted(part.X.indptr, beyond[0], side="right") - 1)
                raise UserError(
                    f"{args.data!r}, row {row}: column {int(part.X.indices[beyond[0]])} is beyond the "
                    f"model's {n_features} columns"
                )
        if n_features is not None:
            part = part._replace(X=widened(part.X, n_features))
    y = binary_labels(part, args.data, f"glm {args.glm_command}") if binary else part.y
    return None, part.X, y


def scheduler_arg(parser, how):
    """``--scheduler ADDRESS``: the verb's fit on that Dask cluster (``_scheduler``)."""
    parser.add_argument(
        "--scheduler", metavar="ADDRESS", default=None,
        help=f"fit on the Dask cluster of this scheduler (tcp://host:8786; the dask extra): {how}, the "
        "result is the fit in one process (default: none, this process)",
    )  # fmt: skip


@contextlib.contextmanager
def _scheduler(args):
    """A Dask client of ``--scheduler ADDRESS`` (closed after the fit), or None without it."""
    if getattr(args, "scheduler", None) is None:
        yield None
        return
    from .cluster import require

    distributed = require(f"fastcep {args.verb} --scheduler")
    try:
        client = distributed.Client(args.scheduler, timeout=SCHEDULER_TIMEOUT)
    except OSError as exc:
        raise UserError(
            f"no Dask scheduler answered at {args.scheduler!r} within {SCHEDULER_TIMEOUT} s: {exc}"
        ) from exc
    with client:
        yield client


def cmd_glm_fit(args):
    from .api import fit
    from .io import save_glm_model

    _check_output(args.output, "-o", [args.data], GLM_MODEL_FORMAT, args.force)
    _check_plot(args, [args.data, args.output])
    binary = resolve_likelihood(args.model).binary
    if _is_rows(args.data):
        features, X, y = _glm_rows(args, binary)
        args.target = args.target or "label"
    elif args.target is None:
        raise UserError(f"{args.data!r} is a table: give --target COL, the column to regress")
    else:
        features, X, y = _glm_data(args.data, args.target, args.features, args.delimiter, binary)
    t0 = time.perf_counter()
    with _scheduler(args) as client:
        res = fit(
            X, y, model=args.model, method=args.method, n_threads=args.threads, progress=not args.quiet,
            client=client, **_options(args, GLM_OPTIONS),
        )  # fmt: skip
    secs = time.perf_counter() - t0
    save_glm_model(res, args.output, features, args.target)
    summary = {
        "model_file": args.output,
        "model": res.model,
        "method": res.method,
        "target": args.target,
        "features": None if features is None else list(features),
        "n_features": X.shape[1],
        "rows": len(y),
        "intercept": res.intercept is not None,
        "iterations": res.n_iter,
        "converged": res.converged,
        "stop_reason": res.stop_reason,
        "seconds": secs,
    }
    text = (
        f"wrote {args.output}: {res.model}/{res.method} on {len(y)} rows, {X.shape[1]} feature"
        f"{'s' if X.shape[1] != 1 else ''}"
        f"{' and an intercept' if res.intercept is not None else ''}, {res.n_iter} iterations "
        f"({res.stop_reason}), {secs:.1f} s"
    )
    return _report_fit(args, res, summary, text)


def cmd_glm_evaluate(args):
    _check_plot(args, [args.model, args.data])
    model = _load_glm_model(args.model)
    target = args.target or model.target
    if not target and not _is_rows(args.data):
        raise UserError(f"{args.model!r} names no target column: give --target COL")
    res = model.result
    binary = res.likelihood.binary
    if _is_rows(args.data):
        _, X, labels = _glm_rows(args, binary, res.posterior.mean.size)
    elif model.features is None:
        raise UserError(
            f"{args.model!r} was fitted on sparse rows (its columns have no names): evaluate it on svmlight "
            "text or a sparse-row HDF5 file"
        )
    else:
        _, X, labels = _glm_data(args.data, target, list(model.features), args.delimiter, binary)
    if not binary:
        return _glm_evaluate_values(args, res, X, labels, target)
    p = res.predict_proba(X)
    y = labels > 0
    m = _binary_metrics(y, p, lambda: res.log_likelihood(X, y))
    payload = {"model_file": args.model, "data": args.data, "target": target, "rows": len(y), **m}
    text = _binary_text(m, len(y)).replace(" entries", " rows", 1)
    plotted = _save_plot(args, _draw_binary(y, p, True, m["auc"] is not None), (10.0, 5.0))
    if plotted is not None:
        payload["plot"] = plotted
        text += f"\nwrote {plotted}"
    _out(args, payload, text)
    return 0


def cmd_glm_stream(args):
    from .glm.stream import stream_file
    from .io import save_glm_model

    _check_output(args.output, "-o", [args.data], GLM_MODEL_FORMAT, args.force)
    if args.checkpoint is not None:
        inputs = [args.data, args.output]
        _check_output(args.checkpoint, "--checkpoint", inputs, GLM_MODEL_FORMAT, args.force)
    init = None if args.init is None else _load_glm_model(args.init).result
    opts = dict(forget=args.forget, max_iter=args.max_iter, tol=args.tol, prior_var=args.prior_var)
    if args.passes is not None and args.scheduler is None:
        raise UserError("--passes are the passes of a cluster stream; give --scheduler too.")
    with _scheduler(args) as client:
        if client is not None:
            opts.update(client=client, passes=3 if args.passes is None else args.passes)
        res = stream_file(
            args.data, args.model, args.method, batch_rows=args.batch_rows, intercept_var=args.intercept_var,
            fit_intercept=args.fit_intercept, n_features=args.width, index_base=args.index_base, init=init,
            checkpoint=args.checkpoint, checkpoint_every=args.checkpoint_every, resume=args.resume,
            progress=not args.quiet, n_threads=args.threads, **opts,
        )  # fmt: skip
    save_glm_model(res, args.output, target="label")
    info = res.options["stream"]
    payload = {
        "model_file": args.output, "model": res.model, "method": res.method, "rows": info["rows"],
        "n_features": res.posterior.mean.size, "batches_at_max_iter": info["stopped_at_max_iter"],
        "seconds": info["seconds"], "rows_per_second": info["rows"] / max(info["seconds"], 1e-9),
    }  # fmt: skip
    text = (
        f"wrote {args.output}: {res.model}/{res.method} streamed over {info['rows']:,} rows, "
        f"{payload['n_features']} columns, {payload['rows_per_second']:,.0f} rows/s"
    )
    _out(args, payload, text)
    return 0


def _log1p_rmse(payload, likelihood, rmse):
    """The lines of the RMSE on the log scale (of E[log(1 + y)] against log(1 + y), ``rmse()``)
    for a count likelihood, added to ``payload`` as "rmse_log1p"; none for the others."""
    if not likelihood.counts:
        return []
    payload["rmse_log1p"] = rmse()
    return [f"RMSE on the log scale {payload['rmse_log1p']:.4f} (E[log(1 + y)] against log(1 + y))"]


def _glm_evaluate_values(args, res, X, y, target):
    """``glm evaluate`` of a likelihood of values (real or counts): RMSE, test log-likelihood and
    mean deviance of the predictive."""
    payload = {
        "model_file": args.model, "data": args.data, "target": target, "rows": len(y),
        "likelihood": repr(res.likelihood), "rmse": res.rmse(X, y),
        "test_log_likelihood": res.log_likelihood(X, y), "mean_deviance": res.deviance(X, y),
    }  # fmt: skip
    text = "\n".join(
        [
            f"RMSE {payload['rmse']:.4f} on {len(y)} rows ({payload['likelihood']})",
            *_log1p_rmse(payload, res.likelihood, lambda: res.rmse(X, y, scale="log1p")),
            f"test log-likelihood {payload['test_log_likelihood']:.4f} (the posterior predictive)",
            f"mean deviance {payload['mean_deviance']:.4f}",
        ]
    )
    plotted = _save_plot(args, _draw_continuous(y, res.predict(X)), (6.0, 6.0))
    if plotted is not None:
        payload["plot"] = plotted
        text += f"\nwrote {plotted}"
    _out(args, payload, text)
    return 0


def _float_or_auto(text):
    """A float, or the word 'auto' (``--damping`` of ``glm fit``)."""
    if text == "auto":
        return text
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a float in (0, 1] or 'auto', not {text!r}") from None


def _cp_likelihood_names():
    """The likelihood names ``--likelihood`` takes (with ``--model cp``: a built-in, its defaults)."""
    from .tensor.likelihoods import names

    return names()


def _force_arg(q):
    q.add_argument(
        "--force", action="store_true",
        help="replace an output file that exists and is not of the kind this verb writes (a data "
        "file, say); without it such a file is refused",
    )  # fmt: skip


def build_parser():
    p = argparse.ArgumentParser(prog="fastcep", description="Conditional expectation propagation.")
    p.add_argument("--version", action="version", version=f"fastcep {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("demo", help="CEP-1, CEP-2 and EP on simulated and UCI data: a comparison table")
    d.add_argument("--uci", default="ionos", help="UCI set for the second part (default: %(default)s)")
    d.add_argument("--uci-dir", default=None, help="folder of the UCI files (default: PyPI packages)")
    d.add_argument("--json", action="store_true", help="print the table as JSON")
    d.add_argument("--quiet", action="store_true", help="no notes on stderr")
    d.set_defaults(func=cmd_demo)

    c = sub.add_parser(
        "convert",
        help="text tensor (i,j,k,value a line) -> HDF5 tensor file; svmlight text or a CSV table "
        "(--target, --hash) -> sparse-row HDF5 file",
    )
    c.add_argument("src", help="text tensor, svmlight text or CSV table")
    c.add_argument("dst", help="HDF5 file to write")
    c.add_argument(
        "--index-base", type=int, choices=(0, 1), default=None,
        help="of the text file (default: 1 for a tensor; 0 for svmlight, whose column k is index k)",
    )  # fmt: skip
    c.add_argument(
        "--width", type=int, default=None, help="sparse rows: the columns (default: from the data)"
    )
    c.add_argument(
        "--target", default=None, help="a CSV table's label column, for sparse rows (default: none)"
    )
    c.add_argument(
        "--hash", nargs="+", metavar="COL", default=None,
        help="a CSV table's categorical columns, hashed (FeatureHasher; the rest: numbers; default: none)",
    )  # fmt: skip
    c.add_argument("--hash-bits", type=int, default=20, help="hashed width 2**BITS (default %(default)s)")
    c.add_argument("--delimiter", default="auto", help="comma, tab, space, auto (default) or a character")
    c.add_argument("--shape", default=None, help="tensor shape, e.g. 200,100,200 (default: from the data)")
    c.add_argument("--binary", action="store_true", help="values must be 0 or 1")
    c.add_argument(
        "--skip-header", action="store_true", help="skip the first line that is not blank or a comment"
    )
    c.add_argument("--json", action="store_true", help="print the result as JSON")
    _force_arg(c)
    c.set_defaults(func=cmd_convert)

    i = sub.add_parser("info", help="describe an HDF5 tensor, model or checkpoint file")
    i.add_argument("file", help="a fastcep HDF5 file")
    i.add_argument("--json", action="store_true", help="print the description as JSON")
    i.set_defaults(func=cmd_info)

    def option(q, name, family, **kw):
        """An option of ``fastcep.fit`` (family "cp" or "regression") or ``fastcep.stream`` as a
        flag: its choices and help from the option table (``fastcep._options``); None (not
        given): the default."""
        if O.choices(name, family) is not None:
            kw.setdefault("choices", O.choices(name, family))
        kw.setdefault("default", None)
        q.add_argument("--" + name.replace("_", "-"), help=O.cli_help(name, family), **kw)

    def json_and_plot(q, what, drawing):
        """--json (print ``what`` as JSON) and --plot FILE.png (draw ``drawing`` to that image)."""
        q.add_argument("--json", action="store_true", help=f"print {what} as JSON")
        q.add_argument(
            "--plot", metavar="FILE.png", default=None,
            help=f"draw {drawing} to this image (needs matplotlib; default: none)",
        )  # fmt: skip
        _force_arg(q)

    def common(q, family, what):
        q.add_argument("-o", "--output", required=True, help=f"{what} file to write (HDF5; required)")
        q.add_argument("--threads", type=int, default=None, help=O.cli_help("n_threads", family))
        q.add_argument("--quiet", action="store_true", help="no progress on stderr")
        json_and_plot(q, "the result", "the convergence (change per iteration and against time)")

    def model_args(q, family):
        q.add_argument("tensor", help="HDF5 tensor file (see 'fastcep convert')")
        common(q, family, "model")
        option(q, "model", family, required=True)
        option(q, "likelihood", family, choices=_cp_likelihood_names())
        option(q, "rank", family, type=int)
        for name in ("damping", "tol", "prior_var", "a0", "b0", "prior_mean"):
            option(q, name, family, type=float)
        option(q, "max_iter", family, type=int)
        for name in ("covariance", "probit_curvature", "expect_under", "prior"):
            option(q, name, family)
        option(q, "seed", family, type=int, default=O.defaults(family, "cep1")["seed"])

    f = sub.add_parser("fit", help="batch CEP on an HDF5 tensor; writes a model file")
    model_args(f, "cp")
    option(f, "method", "cp", default=O.defaults("cp", "cep1")["method"])
    option(f, "schedule", "cp")
    option(f, "init", "cp")
    option(f, "noise_warmup", "cp", type=int)
    f.add_argument(
        "--max-entries", type=int, default=50_000_000,
        help="refuse larger tensors (use stream; default %(default)s)",
    )  # fmt: skip
    scheduler_arg(f, "the entries and their messages are split among its workers")
    f.set_defaults(func=cmd_fit, verb="fit")

    s = sub.add_parser("stream", help="streaming ADF-CEP on an HDF5 tensor, with checkpoints")
    model_args(s, "stream")
    option(s, "method", "stream", default=O.defaults("stream", "cep1")["method"])
    option(s, "batch_size", "stream", type=int, default=O.defaults("stream", "cep1")["batch_size"])
    option(s, "shuffle", "stream", action="store_true", default=False)
    option(s, "checkpoint", "stream", type=str)
    option(s, "checkpoint_every", "stream", type=int)
    option(s, "resume", "stream", action="store_true", default=False)
    option(s, "passes", "stream", type=int)
    scheduler_arg(s, "the entries are cut into one shard per worker, read there, combined as EP over shards")
    s.set_defaults(func=cmd_stream, verb="stream")

    e = sub.add_parser("evaluate", help="test metrics of a model file on an HDF5 test tensor")
    e.add_argument("model", help="CP model file (from 'fastcep fit' or 'fastcep stream')")
    e.add_argument("tensor", help="HDF5 test tensor file of the model's shape")
    json_and_plot(e, "the metrics", "calibration and ROC (binary) or predicted against observed (continuous)")
    e.set_defaults(func=cmd_evaluate)

    g = sub.add_parser("glm", help="Bayesian regression of binary, real or count targets on a data table")
    gsub = g.add_subparsers(dest="glm_command", required=True)

    def data_args(q):
        q.add_argument("--delimiter", default=",", help="field separator of a CSV file (default %(default)r)")
        q.add_argument(
            "--index-base", type=int, choices=(0, 1), default=0,
            help="svmlight text: what its first column is called (default 0: column k is index k)",
        )  # fmt: skip

    def width_arg(q):
        q.add_argument(
            "--width", type=int, default=None,
            help="svmlight text: the columns (default: its largest index + 1)",
        )  # fmt: skip

    gf = gsub.add_parser("fit", help="fit a regression model; writes a regression model file")
    gf.add_argument(
        "data",
        help="CSV file with a header row, HDF5 file of one 1-D dataset per column in its root, svmlight "
        "text or a sparse-row HDF5 file (fastcep convert)",
    )
    gf.add_argument(
        "--target", default=None,
        help="the target column of a table: binary labels 0/1 or -1/1, or values the --model takes "
        "(default: none, which only sparse rows take: they carry their label)",
    )  # fmt: skip
    gf.add_argument(
        "--features", nargs="+", metavar="COL", default=None,
        help="the feature columns (default: every column but the target)",
    )  # fmt: skip
    common(gf, "regression", "regression model")
    # (a Custom likelihood is code: not a command-line choice)
    names = [m for m in O.choices("model", "regression") if m != "custom"]
    option(gf, "model", "regression", default=O.defaults("regression", "cep1")["model"], choices=names)
    option(gf, "method", "regression", default=O.defaults("regression", "cep1")["method"])
    option(gf, "damping", "regression", type=_float_or_auto)
    option(gf, "fit_intercept", "regression", action=argparse.BooleanOptionalAction)
    option(gf, "center", "regression", action=argparse.BooleanOptionalAction)
    for name in ("prior_var", "intercept_var", "tol", "threshold"):
        option(gf, name, "regression", type=float)
    for name in ("max_iter", "n_nodes", "n_samples", "n_features"):
        option(gf, name, "regression", type=int)
    option(gf, "schedule", "regression")
    option(gf, "stopping", "regression")
    option(gf, "seed", "regression", type=int, default=O.defaults("regression", "cep1")["seed"])
    scheduler_arg(gf, "the rows are split among its workers")
    data_args(gf)
    width_arg(gf)
    gf.set_defaults(func=cmd_glm_fit, verb="glm fit")

    ge = gsub.add_parser("evaluate", help="test metrics of a regression model file on data")
    ge.add_argument("model", help="regression model file (from 'fastcep glm fit')")
    ge.add_argument(
        "data",
        help="CSV file or HDF5 table holding the model's feature columns and the target, or sparse rows "
        "(svmlight text, a sparse-row HDF5 file) of the model's width",
    )
    ge.add_argument("--target", default=None, help="the target column (default: the model's target)")
    json_and_plot(ge, "the metrics", "calibration and ROC")
    data_args(ge)
    ge.set_defaults(func=cmd_glm_evaluate, verb="glm evaluate")

    gs = gsub.add_parser(
        "stream",
        help="one online pass over sparse rows (svmlight, sparse-row HDF5); writes a regression model",
    )
    gs.add_argument("data", help="svmlight text or a sparse-row HDF5 file (fastcep convert)")
    gs.add_argument("-o", "--output", required=True, help="regression model file to write (HDF5; required)")
    gs.add_argument("--model", default="probit", choices=names, help="the likelihood (default %(default)s)")
    stream_methods = ("cep1", "cep2", "ep")
    gs.add_argument(
        "--method", default="cep1", choices=stream_methods, help="the method (default %(default)s)"
    )
    gs.add_argument("--batch-rows", type=int, default=10_000, help="rows a batch (default %(default)s)")
    gs.add_argument("--forget", type=float, default=0.0, help="forgetting per row, in [0, 1) (default 0.0)")
    gs.add_argument("--max-iter", type=int, default=None, help="sweeps of a batch at most (default: 200)")
    gs.add_argument("--tol", type=float, default=1e-5, help="a batch's stop rule (default %(default)s)")
    gs.add_argument("--prior-var", type=float, default=1.0, help="the weights' prior variance (default 1.0)")
    gs.add_argument("--intercept-var", type=float, default=100.0, help="the intercept's (default 100.0)")
    gs.add_argument(
        "--fit-intercept", action=argparse.BooleanOptionalAction, default=True,
        help="fit an intercept (default: True)",
    )  # fmt: skip
    gs.add_argument(
        "--init", metavar="MODEL.h5", help="start from this regression model (default: the prior)"
    )
    gs.add_argument(
        "--checkpoint", help="write the model here every --checkpoint-every batches (default: none)"
    )
    gs.add_argument(
        "--checkpoint-every", type=int, default=100, help="batches a checkpoint (default %(default)s)"
    )
    gs.add_argument("--resume", action="store_true", help="go on from --checkpoint if it exists")
    gs.add_argument(
        "--passes", type=int, default=None, help="with --scheduler: the passes over the shards (default 3)"
    )
    scheduler_arg(
        gs, "a sparse-row file's rows are cut into one shard per worker, combined as EP over shards"
    )
    gs.add_argument("--threads", type=int, default=None, help=O.cli_help("n_threads", "regression"))
    gs.add_argument("--quiet", action="store_true", help="no progress on stderr")
    gs.add_argument("--json", action="store_true", help="print the result as JSON")
    _force_arg(gs)
    data_args(gs)
    width_arg(gs)
    gs.set_defaults(func=cmd_glm_stream, verb="glm stream")
    return p


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)  # argparse exits with status 2 on bad arguments
    verb = getattr(args, "verb", None) or args.command
    try:
        return args.func(args)
    except (
        UserError,
        ValueError,
        TypeError,
        OSError,
        FloatingPointError,
        MemoryError,
        NotImplementedError,
    ) as exc:
        end_status()  # (a progress line left open: the message starts a line of its own)
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"fastcep {verb}: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        end_status()
        print(f"fastcep {verb}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
