"""Text tensors (``i,j,k,value`` a line) and their conversion to tensor files."""

import os
import re

import numpy as np

from .tensor import TENSOR_CHUNK_ROWS, TensorWriter


def iter_text_rows(src, index_base=1, delimiter=None):
    """Parse a text tensor line by line: yields (line number, indices as given, value).

    ``delimiter=None`` accepts commas, tabs and spaces. Blank lines and lines starting with '#'
    are skipped. A malformed line (field count, non-integer index, non-number or non-finite
    value, index below ``index_base``) raises ValueError naming ``src`` and its line number.
    """
    src = os.fspath(src)
    if index_base not in (0, 1):
        raise ValueError(f"index_base must be 0 or 1, got {index_base!r}.")
    splitter = re.compile(r"[,\s]+") if delimiter is None else None
    ncol = None
    with open(src, encoding="utf-8", newline=None) as fh:
        for lineno, line in enumerate(fh, start=1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = (
                splitter.split(line) if splitter is not None else [p.strip() for p in line.split(delimiter)]
            )
            if ncol is None:
                ncol = len(parts)
                if ncol < 3:
                    raise ValueError(
                        f"{src}:{lineno}: expected indices and a value (>= 3 fields), got {line!r}."
                    )
            if len(parts) != ncol:
                raise ValueError(f"{src}:{lineno}: expected {ncol} fields, got {len(parts)} in {line!r}.")
            try:
                idx = [int(p) for p in parts[:-1]]
                val = float(parts[-1])
            except ValueError:
                raise ValueError(
                    f"{src}:{lineno}: malformed line {line!r} (integer indices and a number expected)."
                ) from None
            if min(idx) < index_base:
                raise ValueError(f"{src}:{lineno}: index below the index base {index_base} in {line!r}.")
            if not np.isfinite(val):
                raise ValueError(f"{src}:{lineno}: value is not finite in {line!r}.")
            yield lineno, idx, val


def text_to_tensor(
    src,
    dst,
    index_base=1,
    delimiter=None,
    shape=None,
    binary=False,
    chunk_rows=TENSOR_CHUNK_ROWS,
    block_lines=1 << 18,
):
    """Convert a text tensor (``i,j,k,value`` a line, any delimiter, CRLF or LF) to an HDF5 file.

    Lines are parsed by ``iter_text_rows``; a malformed line raises ValueError naming its line
    number, and ``dst`` is not written. Returns the tensor's shape.
    """
    src = os.fspath(src)
    with TensorWriter(dst, shape, binary=binary, chunk_rows=chunk_rows) as w:
        rows, linenos = [], []
        for lineno, idx, val in iter_text_rows(src, index_base, delimiter):
            rows.append(idx + [val])
            linenos.append(lineno)
            if len(rows) >= block_lines:
                _append_text_block(w, rows, linenos, index_base, src)
                rows, linenos = [], []
        if rows:
            _append_text_block(w, rows, linenos, index_base, src)
    return w.shape


def _append_text_block(w, rows, linenos, index_base, src):
    arr = np.asarray(rows, dtype=np.float64)
    coords = arr[:, :-1].astype(np.int64) - index_base
    try:
        w.append(coords, arr[:, -1], first_row=w.n)
    except ValueError as exc:
        # translate "row r" into the line number of the file
        m = re.search(r"at row (\d+)", str(exc))
        if m:
            r = int(m.group(1)) - w.n
            raise ValueError(f"{src}:{linenos[r]}: {exc}") from None
        raise
