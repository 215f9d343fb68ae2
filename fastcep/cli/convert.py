"""``fastcep convert SRC DST``: a text tensor (``i,j,k,value`` a line) to an HDF5 tensor file;
svmlight text, or a CSV table whose categorical columns are hashed (``--target COL --hash COL
...``), to a sparse-row HDF5 file (``fastcep.io.csr``)."""

import sys
import time
import warnings

from ..io.formats import CSR_FORMAT, TENSOR_FORMAT
from ..io.kinds import KIND_WORDS
from ._common import UserError, out
from ._files import check_output

#: text_to_tensor's parameters, as convert's messages name them
CONVERT_FLAGS = (
    ("skip_header=True", "--skip-header"),
    ("index_base=0", "--index-base 0"),
    ("index_base=1", "--index-base 1"),
)


def _shape_arg(text):
    if text is None:
        return None
    parts = text.replace("x", ",").split(",")
    digits = [p.strip() for p in parts]
    if len(parts) < 2 or not all(d.isascii() and d.isdigit() and int(d) > 0 for d in digits):
        raise UserError(f"--shape must be two or more positive integers like 200,100,200; got {text!r}")
    return tuple(int(d) for d in digits)


def _convert_words(text):
    for param, flag in CONVERT_FLAGS:
        text = text.replace(param, flag)
    return text


def _convert_rows(args, kind):
    """``convert`` of svmlight text or a hashed CSV table to a sparse-row file."""
    from ..io.csr import svmlight_to_csr
    from ..io.hashed import hash_csv_to_csr

    check_output(args.dst, "dst", [args.src], CSR_FORMAT, args.force)
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
    out(args, payload, f"wrote {args.dst}: {n} rows, {d} columns, {nnz} nonzeros ({secs:.1f} s)")
    return 0


def cmd_convert(args):
    from ..io import TensorReader, text_to_tensor
    from ..io.kinds import file_kind

    kind = file_kind(args.src)
    if kind == "svmlight" or (kind == "table" and (args.target or args.hash)):
        return _convert_rows(args, kind)
    if args.target or args.hash or args.width:
        raise UserError(
            f"--target, --hash and --width convert svmlight text or a CSV table to sparse rows; "
            f"{args.src!r} is {KIND_WORDS.get(kind, kind)}"
        )
    args.index_base = 1 if args.index_base is None else args.index_base
    check_output(args.dst, "dst", [args.src], TENSOR_FORMAT, args.force)
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
    out(
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
