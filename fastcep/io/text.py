"""Text tensors (``i,j,k,value`` a line) and their conversion to tensor files.

A text tensor is UTF-8 text with one entry a line: K >= 2 indices (ASCII digits only) and a
value (ASCII digits, a sign, '.', an exponent), separated by a delimiter. Blank lines and lines
starting with '#' are skipped; with ``skip_header`` the first other line is skipped, unless it
is an entry like the first data line's (then the file has no header: refused). The first data
line fixes the delimiter (``delimiter=None``: commas if it has two or more, otherwise
runs of spaces and tabs) and the number of fields, which every later line must repeat.
gzip-compressed text and a pipe are read as any file (``sources.open_input``).

Two parsers share these rules. ``_parse_lines`` reads line by line (``_parse_line``) and says
exactly what is wrong with the first bad line; it is the reference, and ``iter_text_rows`` uses
it alone. ``_parse_block`` reads a block of lines at once (one regular expression checks the
block's text, numpy's ``loadtxt`` converts it, whole-array tests check the numbers) and hands any
block it cannot vouch for to ``_parse_lines``, so that both give the same entries and the same
messages (``tests/test_text_tensor.py`` compares them).
"""

import io
import itertools
import os
import re
import warnings

import numpy as np

from .._validation import param_error
from .files import check_output
from .sources import open_input
from .tensor import INT64_MAX, TENSOR_CHUNK_ROWS, TensorWriter, check_shape

#: a quoted line or field in a message is cut to this many characters
QUOTE_CHARS = 80
#: lines a block of ``text_to_tensor`` (its parameter ``block_lines``)
TEXT_BLOCK_LINES = 1 << 18
#: the most indices a line may have (a longer first line is not a tensor's)
MAX_TEXT_MODES = 64

# (str patterns; [0-9] is ASCII only, unlike \d)
_INDEX = re.compile(r"[0-9]+")
_VALUE = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_NON_FINITE = re.compile(r"[+-]?(?:nan|inf|infinity)", re.IGNORECASE)
_SPACES = re.compile(r"[ \t]+")
# a blank or comment line in a block (bytes)
_NON_DATA = re.compile(rb"(?m)^[ \t\r]*+(?:#[^\n]*+)?\n")
# characters a delimiter cannot be: they belong to numbers, comments or line ends
_NOT_DELIMITERS = set("0123456789+-.eE#\r\n")


class _BadLine(ValueError):
    """What is wrong with one line (the caller adds the file and the line number)."""


def _quote(text, limit=QUOTE_CHARS):
    """``repr(text)``, cut to about ``limit`` characters with '...'."""
    return repr(text) if len(text) <= limit else repr(text[: limit - 3]) + "..."


def _strip(raw):
    """A line's text without its line end and surrounding spaces and tabs (UTF-8 checked)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _BadLine(f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at column {exc.start + 1})") from None
    return text.strip(" \t\r\n")


def _split(line, sep):
    """The fields of a stripped data line: ``sep`` " " means runs of spaces and tabs."""
    if "\r" in line:
        raise _BadLine(f"a carriage return inside the line {_quote(line)} (lines end with LF or CRLF)")
    if sep == " ":
        return _SPACES.split(line)
    return [f.strip(" \t") for f in line.split(sep)]


def _looks_numeric(field):
    try:
        float(field)
    except ValueError:
        return False
    return True


class _Format:
    """What the first data line fixed (delimiter, number of indices) and every line's checks.

    ``sep``: "," or another character, "\\t", or " " (runs of spaces and tabs); ``n_idx``: the
    number of indices; ``first``: the line number of the first data line. ``data`` and ``mixed``
    match a block of data lines (bytes), ``mixed`` also with blank and comment lines among them.
    """

    def __init__(self, src, sep, n_idx, first, index_base, shape, binary):
        self.src, self.sep, self.n_idx, self.first = src, sep, n_idx, first
        self.index_base, self.shape, self.binary = index_base, shape, binary
        # the largest index of each mode as written in the file
        top = INT64_MAX - 1 if shape is None else np.asarray(shape, dtype=np.int64) - 1
        self.high = np.broadcast_to(np.asarray(top, dtype=np.int64) + index_base, (n_idx,))
        if sep == " ":
            s = rb"[ \t]++"
        elif sep == "\t":
            s = rb"[ ]*+\t[ ]*+"
        else:
            s = rb"[ \t]*+" + re.escape(sep.encode("ascii")) + rb"[ \t]*+"
        value = rb"[+-]?+(?:[0-9]++(?:\.[0-9]*+)?+|\.[0-9]++)(?:[eE][+-]?+[0-9]++)?+"  # (_VALUE)
        line = rb"[ \t]*+[0-9]++(?:%s[0-9]++){%d}%s%s[ \t\r]*+\n" % (s, n_idx - 1, s, value)
        self.data = re.compile(rb"(?:" + line + rb")*+")
        self.mixed = re.compile(rb"(?:" + line + rb"|[ \t\r]*+(?:#[^\n]*+)?\n)*+")
        self.loadtxt = {
            "delimiter": None if sep == " " else sep,
            "dtype": np.dtype([("c", np.int64, (n_idx,)), ("v", np.float64)]),
            "comments": None,
            "ndmin": 1,
        }

    def error(self, lineno, why):
        return ValueError(f"{self.src}:{lineno}: {why}")


def _first_format(src, raw, lineno, delimiter, index_base, shape, binary, skip_header):
    """The format fixed by the first data line ``raw`` (bytes), or the error it deserves."""
    line = _strip(raw)
    sep = delimiter if delimiter is not None else ("," if line.count(",") >= 2 else " ")
    fields = _split(line, sep)
    if not any(_looks_numeric(f) for f in fields):
        if skip_header:
            raise _BadLine(f"line {_quote(line)} is not numeric (a second header line?)")
        raise _BadLine(f"line {_quote(line)} looks like a header: use skip_header=True")
    if len(fields) < 3:
        raise _BadLine(f"expected indices and a value (>= 3 fields), got {_quote(line)}")
    n_idx = len(fields) - 1
    if n_idx > MAX_TEXT_MODES:
        raise _BadLine(
            f"{len(fields)} fields in {_quote(line)}: a text tensor has at most {MAX_TEXT_MODES} indices"
        )
    if shape is not None and len(shape) != n_idx:
        raise _BadLine(
            f"shape {shape} has {len(shape)} modes but the file's lines have {n_idx} indices ({_quote(line)})"
        )
    return _Format(src, sep, n_idx, lineno, index_base, shape, binary)


def _check_header(raw, fmt):
    """Refuse a line skipped as a header that is an entry like the first data line's (numbers, as
    many fields): a file without a header would lose its first entry."""
    try:
        fields = _split(_strip(raw), fmt.sep)
    except _BadLine:  # (not UTF-8, a carriage return: not an entry either)
        return
    if len(fields) == fmt.n_idx + 1 and all(_looks_numeric(f) for f in fields):
        raise _BadLine(
            f"skip_header=True, but line {_quote(_strip(raw))} is an entry like line {fmt.first}'s, not a "
            "header, and would be lost: leave out skip_header=True"
        )


def _parse_line(raw, fmt):
    """The indices (as written) and value of one line (bytes), None for a blank or comment line;
    raises _BadLine saying what is wrong."""
    line = _strip(raw)
    if not line or line.startswith("#"):
        return None
    fields = _split(line, fmt.sep)
    q = _quote(line)
    if len(fields) != fmt.n_idx + 1:
        hint = "; a decimal comma?" if fmt.sep == "," else ""
        raise _BadLine(
            f"expected {fmt.n_idx + 1} fields, got {len(fields)} in {q} (line {fmt.first} has "
            f"{fmt.n_idx + 1}{hint})"
        )
    base = fmt.index_base
    idx = []
    for k, f in enumerate(fields[:-1], start=1):
        if not _INDEX.fullmatch(f):
            if f.startswith("-") and _INDEX.fullmatch(f[1:]):
                raise _BadLine(f"index below the index base {base} in {q}")
            raise _BadLine(
                f"malformed line {q}: index field {k} {_quote(f, 40)} is not an integer (ASCII digits only)"
            )
        i = int(f)
        if i < base:
            raise _BadLine(
                f"index below the index base {base} in {q} (index 0 in a 1-based file: try index_base=0)"
            )
        if i - base > INT64_MAX - 1:
            raise _BadLine(
                f"malformed line {q}: index field {k} {_quote(f, 40)} is too large (a 64-bit index "
                f"is at most {INT64_MAX - 1 + base})"
            )
        idx.append(i)
    if fmt.shape is not None and any(i - base >= d for i, d in zip(idx, fmt.shape, strict=True)):
        raise _BadLine(f"index {idx} ({base}-based) is beyond shape {fmt.shape} in {q}")
    f = fields[-1]
    if _NON_FINITE.fullmatch(f):
        raise _BadLine(f"value is not finite in {q}")
    if not _VALUE.fullmatch(f):
        if "," in f and _VALUE.fullmatch(f.replace(",", ".", 1)):
            why = f"has a decimal comma (write {f.replace(',', '.', 1)})"
        else:
            why = "is not a number (ASCII digits, a sign, '.' and an exponent)"
        raise _BadLine(f"malformed line {q}: value field {fmt.n_idx + 1} {_quote(f, 40)} {why}")
    val = float(f)
    if not np.isfinite(val):
        raise _BadLine(f"value is not finite in {q}")
    if fmt.binary and val != 0.0 and val != 1.0:
        raise _BadLine(f"binary tensor: value {val!r} is not 0 or 1 in {q}")
    return idx, val


def _parse_lines(lines, start, fmt):
    """Entries of lines (bytes) numbered from ``start``, one by one: (line numbers, 0-based
    coords (m, K) int64, values (m,) float64); the first bad line raises ValueError."""
    linenos, rows, vals = [], [], []
    for lineno, raw in enumerate(lines, start=start):
        try:
            entry = _parse_line(raw, fmt)
        except _BadLine as exc:
            raise fmt.error(lineno, exc) from None
        if entry is not None:
            linenos.append(lineno)
            rows.append(entry[0])
            vals.append(entry[1])
    coords = np.array(rows, dtype=np.int64).reshape(len(rows), fmt.n_idx) - fmt.index_base
    return linenos, coords, np.array(vals, dtype=np.float64)


def _parse_block(lines, start, fmt):
    """``_parse_lines`` at array speed: (None, coords, values). Any block whose text or numbers
    are not plainly right goes to ``_parse_lines``, which names the first bad line."""
    block = b"".join(lines)
    if not block.endswith(b"\n"):
        block += b"\n"
    if not block.isascii():  # (UTF-8 comments, or a bad line)
        return _parse_lines(lines, start, fmt)
    if not fmt.data.fullmatch(block):
        if not fmt.mixed.fullmatch(block):
            return _parse_lines(lines, start, fmt)
        block = _NON_DATA.sub(b"", block)
        if not block:
            return None, np.empty((0, fmt.n_idx), np.int64), np.empty(0)
    try:
        arr = np.loadtxt(io.StringIO(block.decode("ascii")), **fmt.loadtxt)
    except ValueError:  # (an index beyond int64)
        return _parse_lines(lines, start, fmt)
    coords, values = arr["c"], arr["v"]
    bad = (coords < fmt.index_base).any() or (coords > fmt.high).any() or not np.isfinite(values).all()
    if bad or (fmt.binary and ((values != 0.0) & (values != 1.0)).any()):
        return _parse_lines(lines, start, fmt)
    return None, coords - fmt.index_base, np.array(values)


def _check_options(func, index_base, delimiter, shape, skip_header):
    if isinstance(index_base, bool) or index_base not in (0, 1):
        raise param_error("index_base", func, "0 or 1", index_base)
    ok = delimiter is None or (isinstance(delimiter, str) and len(delimiter) == 1 and delimiter.isascii())
    if not ok or delimiter in _NOT_DELIMITERS:
        what = "None (commas, else spaces and tabs) or one ASCII character that is not part of a number"
        raise param_error("delimiter", func, what, delimiter)
    if not isinstance(skip_header, (bool, np.bool_)):
        raise param_error("skip_header", func, "True or False", skip_header, TypeError)
    return None if shape is None else check_shape(shape, func)


def _text_blocks(src, index_base, delimiter, shape, binary, skip_header, block_lines, parse):
    """Yield (line numbers or None, 0-based coords, values) block by block; ``parse`` is
    ``_parse_block`` or ``_parse_lines``."""
    fmt = None
    header = bool(skip_header)
    skipped = None  # (the header's line number and bytes, checked against the first data line)
    with open_input(src) as fh:
        start = 1
        while lines := list(itertools.islice(fh, block_lines)):
            k = 0
            while fmt is None and k < len(lines):  # up to the first data line, one by one
                lineno, raw = start + k, lines[k]
                k += 1
                try:
                    line = _strip(raw)
                    if not line or line.startswith("#"):
                        continue
                    if header:
                        header, skipped = False, (lineno, raw)
                        continue
                    fmt = _first_format(src, raw, lineno, delimiter, index_base, shape, binary, skip_header)
                except _BadLine as exc:
                    raise ValueError(f"{src}:{lineno}: {exc}") from None
                if skipped is not None:
                    try:
                        _check_header(skipped[1], fmt)
                    except _BadLine as exc:
                        raise ValueError(f"{src}:{skipped[0]}: {exc}") from None
                yield _parse_lines([raw], lineno, fmt)
            if fmt is not None and k < len(lines):
                yield parse(lines[k:], start + k, fmt)
            start += len(lines)


def iter_text_rows(src, index_base=1, delimiter=None, skip_header=False):
    """Parse a text tensor line by line: yields (line number, indices as written, value).

    Parameters
    ----------
    src : str or path-like
        UTF-8 text, one entry a line (see ``text_to_tensor``).
    index_base : {0, 1}
        Base of the indices in the file (default 1).
    delimiter : str or None
        One character; None: commas if the first data line has two or more, otherwise runs of
        spaces and tabs (as does " ").
    skip_header : bool
        Skip the first line that is neither blank nor a comment (refused if it is an entry like
        the first data line's, as many numbers: a file without a header).

    Raises
    ------
    ValueError
        On the first malformed line, naming ``src`` and its line number: a number of fields
        other than the first data line's, an index that is not ASCII digits, below
        ``index_base`` or beyond int64, a value that is not a finite decimal number, text that
        is not UTF-8, or a first line that looks like a header.
    """
    src = os.fspath(src)
    _check_options("iter_text_rows", index_base, delimiter, None, skip_header)
    blocks = _text_blocks(src, index_base, delimiter, None, False, skip_header, 1 << 12, _parse_lines)
    for linenos, coords, values in blocks:
        yield from zip(linenos, (coords + index_base).tolist(), values.tolist(), strict=True)


def text_to_tensor(
    src,
    dst,
    index_base=1,
    delimiter=None,
    shape=None,
    binary=False,
    skip_header=False,
    chunk_rows=TENSOR_CHUNK_ROWS,
    block_lines=TEXT_BLOCK_LINES,
):
    """Convert a text tensor (``i,j,k,value`` a line, any delimiter, CRLF or LF) to an HDF5 file.

    Parameters
    ----------
    src : str or path-like
        UTF-8 text, one entry a line: K >= 2 indices (ASCII digits) and a value (ASCII digits,
        a sign, '.', an exponent); blank lines and lines starting with '#' are skipped.
    dst : str or path-like
        The tensor file to write (it appears only when complete).
    index_base : {0, 1}
        Base of the indices in the file (default 1); the tensor file is 0-based.
    delimiter : str or None
        One character; None: commas if the first data line has two or more, otherwise runs of
        spaces and tabs (as does " "). Every line must have as many fields as the first.
    shape : sequence of int or None
        K positive integers; None: one more than the largest 0-based index of each mode (with
        ``index_base=0``, a mode without index 0 warns that the file may be 1-based).
    binary : bool
        Values must be 0 or 1.
    skip_header : bool
        Skip the first line that is neither blank nor a comment (refused if it is an entry like
        the first data line's; without it, a first line with no number is refused as a header).
    chunk_rows : int
        Rows per HDF5 chunk.
    block_lines : int
        Lines parsed at once (memory: about 100 bytes a line).

    Returns
    -------
    tuple of int
        The tensor's shape.

    Raises
    ------
    ValueError
        On the first malformed line, naming ``src`` and its line number (see
        ``iter_text_rows``), an index beyond ``shape``, a non-binary value with ``binary``, or
        no entries at all; ``dst`` is then left as it was.
    """
    src = os.fspath(src)
    shape = _check_options("text_to_tensor", index_base, delimiter, shape, skip_header)
    check_output(dst, [src], "output", "text_to_tensor")  # (before the work: never over its input)
    binary = bool(binary)
    low = None
    with TensorWriter(dst, shape, binary=binary, chunk_rows=chunk_rows) as w:
        blocks = _text_blocks(
            src, index_base, delimiter, shape, binary, skip_header, int(block_lines), _parse_block
        )
        for _, coords, values in blocks:
            if len(values):
                w.append(coords, values)
                low = coords.min(0) if low is None else np.minimum(low, coords.min(0))
        if low is None:
            raise ValueError(f"{src}: no entries (only blank lines, comments or a header)")
    if shape is None and index_base == 0 and (low > 0).any():
        modes = ", ".join(str(m + 1) for m in np.nonzero(low > 0)[0])
        warnings.warn(
            f"{src}: no index 0 in mode(s) {modes} of a file read with index_base=0: it may be "
            f"1-based (try index_base=1); the shape inferred is {w.shape}",
            UserWarning,
            stacklevel=2,
        )
    return w.shape
