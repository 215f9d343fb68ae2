"""Tables of named numeric columns: the data of ``fastcep glm fit`` and ``fastcep glm evaluate``.

Two layouts are read:

- a CSV file: a header row of column names, then one row of numbers per observation (comma
  separated unless told otherwise; UTF-8, an optional byte-order mark, CRLF or LF; gzip-compressed
  or not; a pipe or ``/dev/stdin`` too);
- an HDF5 file: one 1-D numeric dataset per column in the file's root group, all of the same
  length, the dataset's name the column's; the column order is the root attribute ``columns``
  (a list of names) if present, else the names in alphabetical order (h5py's). Other root
  objects (groups, datasets of other ranks) are ignored.

``read_table(path, columns)`` returns the requested columns as float64 arrays. Errors name the
file and, for CSV, the line. fastcep's own HDF5 files (tensors, models) are not tables.
"""

import csv
import os
from typing import NamedTuple

import h5py
import numpy as np

from .files import FileFormatError
from .sources import head, is_hdf5_head, open_input, open_text_input, refuse_stream, stream_words


class Table(NamedTuple):
    """Named float64 columns of one length."""

    names: tuple  #: every column of the file, in its order
    columns: dict  #: {name: (n,) float64 array} of the columns that were read
    n: int  #: rows


def _bad(path, why):
    return FileFormatError(f"{os.fspath(path)!r} is not a readable data table: {why}.")


def _missing(path, wanted, names):
    missing = [c for c in wanted if c not in names]
    if missing:
        raise _bad(path, f"no column {missing[0]!r}; its columns are {', '.join(map(repr, names))}")


def _number(path, line, name, text):
    try:
        return float(text)
    except ValueError:
        what = "an empty cell" if not text.strip() else f"{text!r}"
        raise _bad(path, f"line {line}, column {name!r}: {what} is not a number") from None


def _read_csv(path, columns, delimiter):
    with open_text_input(path) as fh:
        reader = csv.reader(fh, delimiter=delimiter)
        rows = csv_rows(path, reader, lambda line, why: _bad(path, f"line {line}: {why}"))
        header = next(rows, None)
        if header is None:
            raise _bad(path, "the file is empty (a CSV table starts with a header row of column names)")
        names = tuple(name.strip() for name in header)
        if len(set(names)) != len(names):
            dup = next(n for n in names if names.count(n) > 1)
            raise _bad(path, f"the header names column {dup!r} twice")
        wanted = names if columns is None else tuple(columns)
        _missing(path, wanted, names)
        index = [names.index(c) for c in wanted]
        cells = [[] for _ in wanted]
        lines = []
        for row in rows:
            if not row or (len(row) == 1 and not row[0].strip()):
                continue  # blank line
            if len(row) != len(names):
                raise _bad(path, f"line {reader.line_num} has {len(row)} fields, the header {len(names)}")
            lines.append(reader.line_num)
            for cell, j in zip(cells, index, strict=True):
                cell.append(row[j])
    out = {}
    for name, cell in zip(wanted, cells, strict=True):
        try:
            out[name] = np.asarray(cell, dtype=np.float64).reshape(len(cell))
        except ValueError:
            out[name] = np.array(
                [_number(path, line, name, text) for line, text in zip(lines, cell, strict=True)]
            )
        bad = np.flatnonzero(~np.isfinite(out[name]))
        if bad.size:
            i = bad[0]
            raise _bad(
                path,
                f"line {lines[i]}, column {name!r}: {cell[i].strip()!r} is not a finite number "
                f"({bad.size} such cell{'s' if bad.size > 1 else ''} in the column)",
            )
    return Table(names, out, len(lines))


def csv_rows(path, reader, bad):
    """The rows of a ``csv.reader`` over ``open_text_input(path)``; its errors (a field over the
    csv module's limit, a NUL byte, an unclosed quote, bytes that are not UTF-8) as ``bad(line,
    why)``, an exception naming the line."""
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            why = str(exc)
            if "field larger than field limit" in why:
                why = (
                    f"a field is longer than {csv.field_size_limit():,} characters, which no "
                    "number is (a broken quote, or not a table?)"
                )
            raise bad(reader.line_num, why) from None
        except UnicodeDecodeError:
            line, why = _not_utf8(path)
            raise bad(line if line is not None else reader.line_num + 1, why) from None
        yield row


def _not_utf8(path):
    """(line, why) of the first bytes of ``path`` that are not UTF-8 (the file read again; a pipe,
    which cannot be, gives (None, why))."""
    if stream_words(path) is not None:
        return None, "not UTF-8 text"
    with open_input(path) as fh:
        for number, raw in enumerate(fh, start=1):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                return number, f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at column {exc.start + 1})"
    return None, "not UTF-8 text"


def _h5_names(f):
    if "columns" in f.attrs:
        return tuple(str(c.decode() if isinstance(c, bytes) else c) for c in np.ravel(f.attrs["columns"]))
    return tuple(k for k, v in f.items() if isinstance(v, h5py.Dataset) and v.ndim == 1)


def _read_h5(path, columns):
    with h5py.File(path, "r") as f:
        fmt = f.attrs.get("format")
        if isinstance(fmt, str) and fmt.startswith("fastcep-"):
            raise _bad(path, f"it is a fastcep file of format {fmt!r}, not a table of columns")
        names = _h5_names(f)
        wanted = names if columns is None else tuple(columns)
        _missing(path, wanted, names)
        out = {}
        for name in wanted:
            obj = f.get(name)
            if not isinstance(obj, h5py.Dataset) or obj.ndim != 1 or obj.dtype.kind not in "biuf":
                raise _bad(path, f"column {name!r} is not a 1-D numeric dataset in the root group")
            out[name] = np.asarray(obj[()], dtype=np.float64)
            bad = np.flatnonzero(~np.isfinite(out[name]))
            if bad.size:
                raise _bad(
                    path,
                    f"column {name!r}, row {bad[0]} (counting from 0): {float(out[name][bad[0]])!r} is not a "
                    f"finite number ({bad.size} such value{'s' if bad.size > 1 else ''} in the column)",
                )
    lengths = {len(v) for v in out.values()}
    if len(lengths) > 1:
        raise _bad(path, f"its columns have different lengths ({sorted(lengths)})")
    return Table(names, out, lengths.pop() if lengths else 0)


def read_table(path, columns=None, delimiter=","):
    """Read columns of a CSV file or HDF5 table (the layouts in the module's docstring).

    Parameters
    ----------
    path : str or PathLike
        HDF5 if the file has HDF5's signature, else CSV.
    columns : sequence of str or None
        The columns to read (None: all of them).
    delimiter : str
        CSV only: the field separator.

    Returns
    -------
    Table

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    FileFormatError
        A missing column (the message lists the file's), a cell that is not a number (its line),
        a row of the wrong length, no header, columns of different lengths.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"no such data file {path!r}")
    if os.path.isdir(path):
        raise IsADirectoryError(f"the data file {path!r} is a folder")
    if stream_words(path) is not None:  # (a pipe: its first bytes are kept for the CSV reader)
        if is_hdf5_head(head(path)):
            refuse_stream(path, "an HDF5 table")
        hdf5 = False
    else:
        hdf5 = h5py.is_hdf5(path)
    if hdf5:
        table = _read_h5(path, columns)
    else:
        table = _read_csv(path, columns, delimiter)
    if table.n == 0:
        raise _bad(path, "it has no rows")
    return table
