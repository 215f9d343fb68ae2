"""Regression data for ``glm fit`` and ``glm evaluate``: a table's columns (``table_data``) or
labelled sparse rows, svmlight text or a sparse-row HDF5 file (``data_kind``, ``rows_data``)."""

import numpy as np

from ..io.formats import CSR_FORMAT
from ._common import UserError
from ._files import read_table, with_fix

#: the kinds of file that hold labelled sparse rows (``fastcep.io.svmlight``, ``fastcep.io.csr``)
ROWS_KINDS = ("svmlight", CSR_FORMAT)


#: the kinds of file read as a table (``fastcep.io.table``: CSV text, an HDF5 table); other text
#: is read as CSV too, whose reader says what is wrong with it
TABLE_KINDS = ("table", "hdf5", "numbers", "text")


def data_kind(path):
    """What regression data ``path`` holds: "rows" (``ROWS_KINDS``) or "table" (``TABLE_KINDS``);
    any other file (missing, empty, damaged, a model, ...) is a UserError saying what it is."""
    from ..io.kinds import KIND_WORDS, checked_kind
    from ..io.sources import refuse_stream

    kind = checked_kind(path)  # (HDF5 never parses a damaged file)
    if kind in ROWS_KINDS:
        return "rows"
    if kind in TABLE_KINDS:
        return "table"
    if kind == "missing":
        raise UserError(f"no such data file {path!r}")
    if kind == "hdf5-stream":
        refuse_stream(path, "an HDF5 table or sparse-row file")
    if kind in ("damaged", "damaged-hdf5", "unreadable"):  # (damaged: a seal or heap that fails its check)
        raise UserError(f"{path!r} is {KIND_WORDS['damaged-hdf5' if kind == 'damaged' else kind]}")
    words = {"empty": "empty", "folder": "a folder"}.get(kind) or KIND_WORDS.get(kind, kind)
    raise with_fix(f"{path!r} is {words}, not regression data", path, "table")


def refuse_target(args):
    """--target names a table's column: refused for sparse rows, which carry their label."""
    if getattr(args, "target", None) is not None:
        raise UserError(
            f"--target names a table's column; {args.data!r} holds sparse rows, whose label is the first "
            "field of each row: leave out --target"
        )


def table_data(path, target, features, delimiter, binary=True):
    """``(features, X, y)`` from a data table: the named feature columns (default: every column
    but the target) and the target (``binary``: checked as labels 0/1 or -1/1; else the fit checks
    it for its likelihood)."""
    if features is not None and len(set(features)) != len(features):
        raise UserError("--features names a column twice")
    if features is not None and target in features:
        raise UserError(f"--features lists the target column {target!r}")
    table = read_table(path, None if features is None else [target, *features], delimiter)
    if target not in table.columns:
        columns = ", ".join(map(repr, table.names))
        raise with_fix(f"{path!r} has no column {target!r}; its columns are {columns}", path, "table")
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


def rows_data(args, binary, width=None):
    """``(None, X, y)`` of a file of labelled sparse rows (svmlight or sparse-row HDF5): X CSR of
    ``width`` columns (a model's; None: the file's or --n-features), y 0/1 for a ``binary``
    likelihood (from 0/1 or -1/1; an error names the line or row of another label)."""

    from ..io.csr import CSRReader
    from ..io.kinds import checked_kind
    from ..io.svmlight import binary_labels, read_svmlight, widened

    if getattr(args, "features", None):
        raise UserError(
            "--features names a table's columns; sparse rows have none (their columns are numbers)"
        )
    n_features = width if width is not None else getattr(args, "width", None)
    if checked_kind(args.data) == "svmlight":
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
