"""svmlight / libsvm text: sparse rows with a label, the format of RCV1 and of public click logs.

One row a line: ``label index:value index:value ... [# comment]``, fields separated by spaces or
tabs. The label is a number; indices are integers (column ``index - index_base``, default base 0:
a 1-based file keeps its column numbers and leaves column 0 empty, which costs nothing), values
are numbers. Blank lines and lines holding only a comment are skipped, and a row may hold no
feature (a lone label); ``qid:`` fields (ranking data) are refused. Within a row, indices may
come in any order and repeat: they are sorted and a repeated column's values are summed, as
scipy does, and a warning says how many rows had one. Explicit zeros are dropped.
gzip-compressed text, a UTF-8 byte-order mark and a pipe are read as any file
(``sources.open_input``).

``iter_svmlight`` reads a file in blocks of rows (memory bounded by a block), ``read_svmlight``
all of it. Every error names the file, the line and what to do. Indices are read as Python's
``int`` reads them and labels and values as its ``float`` does (numpy's own parse where a block's
fields are plainly decimal, which gives the same numbers), so a value is the double nearest its
text.
"""

import os
import re
import warnings
from itertools import islice
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from .._validation import check_int
from .files import FileFormatError
from .sources import open_input

#: rows parsed at once
SVMLIGHT_BLOCK_ROWS = 1 << 16
#: the largest index a file may hold (beyond it a float64 no longer holds every integer)
MAX_INDEX = 2**53
#: a block's fields as the fast path takes them (``_fast``): ``index:value`` with an index of ASCII
#: digits and a decimal number, inf or nan as its value, between ASCII spaces
_DECIMAL = (
    rb"[+-]?+(?:[0-9]++(?:\.[0-9]*+)?+|\.[0-9]++)(?:[eE][+-]?+[0-9]++)?+|(?i:[+-]?+(?:inf(?:inity)?+|nan))"
)
_FIELDS = re.compile(rb"(?:\s*+[+-]?+[0-9]++:(?:" + _DECIMAL + rb")(?=\s|\Z))*+\s*+")


class SparseRows(NamedTuple):
    """A block of labelled sparse rows."""

    first: int  #: 0-based row number of the block's first row
    X: object  #: scipy.sparse.csr_array (m, width) float64, sorted indices, no duplicates
    y: np.ndarray  #: (m,) float64 labels
    lines: np.ndarray | None  #: (m,) int64 1-based line numbers of the rows (text files), or None


def bad_line(path, line, why, fix=""):
    """The one error form of a text file's line."""
    return FileFormatError(f"{os.fspath(path)!r}, line {line}: {why}{'; ' + fix if fix else ''}.")


def binary_labels(part, path, func):
    """A block's labels as 0/1 (float), from 0/1 or -1/1; an error names the first row or line
    holding another value."""
    y = part.y
    bad = np.flatnonzero((y != 0.0) & (y != 1.0) & (y != -1.0))
    if bad.size:
        k = int(bad[0])
        why = f"the label {y[k]:g} is not a binary label (0/1 or -1/1)"
        if part.lines is not None:
            raise bad_line(path, int(part.lines[k]), why)
        raise ValueError(f"{func}: {os.fspath(path)!r}, row {part.first + k}: {why}.")
    return (y > 0.0).astype(np.float64)


def _row(path, line, text, index_base):
    """``(label, indices, values)`` of one line's text (its comment cut off), by Python's own
    conversions (the slow path); raises naming what is wrong."""
    body = text.split()
    label = body[0].decode("utf-8", "replace")
    try:
        y = float(body[0])
    except ValueError:
        raise bad_line(
            path, line, f"the label {label!r} is not a number", "a line is 'label index:value'"
        ) from None
    indices, values = [], []
    for field in body[1:]:
        word = field.decode("utf-8", "replace")
        parts = word.split(":")
        if parts[0] == "qid":
            raise bad_line(path, line, f"{word!r} is a query id (ranking data)", "remove the qid: fields")
        if len(parts) != 2 or not parts[0] or not parts[1]:
            what = "a missing value" if len(parts) == 2 and not parts[1] else "not index:value"
            raise bad_line(path, line, f"the field {word!r} is {what}", "a feature is written index:value")
        index_text, value_text = field.split(b":")
        try:
            index = int(index_text)
        except ValueError:
            raise bad_line(path, line, f"the index {parts[0]!r} is not an integer") from None
        try:
            value = float(value_text)
        except ValueError:
            raise bad_line(
                path, line, f"the value {parts[1]!r} of index {parts[0]} is not a number"
            ) from None
        if index < index_base:
            low = "negative" if index < 0 else f"below the index base {index_base}"
            fix = "indices are 0-based here; a 1-based file needs index_base=1" if index_base == 0 else ""
            raise bad_line(path, line, f"the index {parts[0]} is {low}", fix or "indices count from 1")
        if index >= MAX_INDEX:
            raise bad_line(path, line, f"the index {parts[0]} is beyond 2**53")
        if not np.isfinite(value):
            raise bad_line(path, line, f"the value {parts[1]!r} of index {parts[0]} is not finite")
        indices.append(index)
        values.append(value)
    if not np.isfinite(y):
        raise bad_line(path, line, f"the label {label!r} is not finite")
    return y, indices, values


def _rows(path, lines, texts, index_base):
    """``(labels, columns, values, counts)`` of a block, line by line (``_row``)."""
    labels, cols, values, counts = [], [], [], []
    for line, text in zip(lines, texts, strict=True):
        y, i, v = _row(path, line, text, index_base)
        labels.append(y)
        cols += i
        values += v
        counts.append(len(i))
    cols = np.array(cols, dtype=np.int64) - index_base
    return (
        np.array(labels, dtype=np.float64),
        cols,
        np.array(values, dtype=np.float64),
        np.array(counts, np.int64),
    )


def _fast(path, lines, texts, labels_text, features, index_base):
    """``_rows`` at array speed for a block whose every field is plainly ``index:value`` (ASCII
    digits, a decimal number or inf or nan; ``_FIELDS``), else None. A field that is out of range
    or not finite is found again by ``_row``, which names it."""
    m = len(texts)
    counts = np.fromiter((f.count(b":") for f in features), dtype=np.int64, count=m)
    joined = b" ".join(features)
    if any(b":" in t for t in labels_text) or not _FIELDS.fullmatch(joined):
        return None  # (so each field holds one colon, and ``counts`` counts the fields)
    try:
        labels = np.array([float(t) for t in labels_text], dtype=np.float64)
        numbers = np.fromstring(joined.replace(b":", b" "), sep=" ") if joined.strip() else np.empty(0)
    except ValueError:
        return None
    if numbers.size != 2 * int(counts.sum()):
        return None
    index, value = numbers[0::2], numbers[1::2]
    row = np.repeat(np.arange(m), counts)
    bad = np.flatnonzero((index < index_base) | (index >= MAX_INDEX) | ~np.isfinite(value))
    bad_labels = np.flatnonzero(~np.isfinite(labels))
    if bad.size or bad_labels.size:
        k = min(int(row[bad[0]]) if bad.size else m, int(bad_labels[0]) if bad_labels.size else m)
        _row(path, lines[k], texts[k], index_base)  # (raises)
    return labels, (index - index_base).astype(np.int64), value, counts


def _parse(path, block, first_line, first_row, index_base, width):
    """A block of (line number, bytes) as ``SparseRows`` (``width``: the columns, None: the
    block's largest index + 1); raises naming the first bad line."""
    lines, texts = [], []
    for number, raw in block:
        text = raw.split(b"#", 1)[0] if b"#" in raw else raw
        if text.strip():
            lines.append(number)
            texts.append(text)
    m = len(texts)
    labels_text, features = [], []
    for text in texts:
        head = text.split(None, 1)
        labels_text.append(head[0])
        features.append(head[1] if len(head) > 1 else b"")
    parsed = _fast(path, lines, texts, labels_text, features, index_base)
    labels, cols, value, counts = parsed if parsed is not None else _rows(path, lines, texts, index_base)
    row = np.repeat(np.arange(m), counts)
    if width is not None and cols.size and cols.max() >= width:
        k = int(row[np.argmax(cols >= width)])
        index = int(cols[np.argmax(cols >= width)]) + index_base
        span = f"indices {index_base}..{width - 1 + index_base}"
        why = f"index {index} is beyond the {width} columns asked for ({span})"
        raise bad_line(path, lines[k], why, "a model's rows must fit its width")
    indptr = np.concatenate([[0], np.cumsum(counts)])
    shape = (m, width if width is not None else (int(cols.max()) + 1 if cols.size else 0))
    X = sp.csr_array((value, cols, indptr), shape=shape)
    before = np.diff(X.indptr)
    with np.errstate(over="ignore"):  # (a sum beyond float64 is refused below)
        X.sum_duplicates()  # (sorts the indices too)
    repeats = np.flatnonzero(np.diff(X.indptr) != before)
    over = np.flatnonzero(~np.isfinite(X.data))
    if over.size:
        k = int(np.searchsorted(X.indptr, over[0], side="right") - 1)
        index = int(X.indices[over[0]]) + index_base
        why = f"the values of index {index}, which is repeated, sum to {float(X.data[over[0]])!r}"
        raise bad_line(path, lines[k], why, "a repeated column's values are summed")
    X.eliminate_zeros()
    if repeats.size:
        warnings.warn(
            f"{os.fspath(path)!r}: {repeats.size} row{'s' if repeats.size > 1 else ''} hold a column "
            f"twice (first: line {lines[repeats[0]]}); their values are summed, as scipy does",
            UserWarning,
            stacklevel=4,
        )
    return SparseRows(first_row, X, labels, np.asarray(lines, dtype=np.int64))


def iter_svmlight(path, rows=SVMLIGHT_BLOCK_ROWS, n_features=None, index_base=0):
    """Read an svmlight / libsvm file in blocks of rows.

    Parameters
    ----------
    path : str or PathLike
    rows : int
        Rows (non-blank lines) per block; memory is bounded by a block.
    n_features : int, optional
        The width of every block; an index beyond it is an error naming its line. None: each
        block is as wide as its largest index + 1 (``read_svmlight`` widens them to the file's).
    index_base : {0, 1}
        What the file's first column is called.

    Yields
    ------
    SparseRows
    """
    func = "iter_svmlight"
    rows = check_int(rows, "rows", func, low=1)
    if n_features is not None:
        n_features = check_int(n_features, "n_features", func, low=1)
    if index_base not in (0, 1):
        raise ValueError(f"The 'index_base' parameter of {func} must be 0 or 1. Got {index_base!r} instead.")
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{func}: no such file {path!r}.")
    first_row = 0
    with open_input(path) as fh:
        numbered = enumerate(fh, start=1)
        while True:
            block = list(islice(numbered, rows))
            if not block:
                break
            part = _parse(path, block, block[0][0], first_row, index_base, n_features)
            if part.y.size:
                first_row += part.y.size
                yield part


def read_svmlight(path, n_features=None, index_base=0):
    """A whole svmlight / libsvm file as ``SparseRows`` (``iter_svmlight``'s blocks joined, as
    wide as ``n_features`` or the file's largest index + 1)."""
    parts = list(iter_svmlight(path, n_features=n_features, index_base=index_base))
    if not parts:
        raise FileFormatError(f"{os.fspath(path)!r} holds no rows (an svmlight line is 'label index:value').")
    width = n_features if n_features is not None else max(p.X.shape[1] for p in parts)
    X = sp.vstack([widened(p.X, width) for p in parts], format="csr")
    y = np.concatenate([p.y for p in parts])
    return SparseRows(0, X, y, np.concatenate([p.lines for p in parts]))


def widened(X, width):
    """CSR rows X as ``width`` columns wide (no index of X at or beyond ``width``)."""
    return sp.csr_array((X.data, X.indices, X.indptr), shape=(X.shape[0], width))
