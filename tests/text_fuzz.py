"""Fuzzing the text readers (issue 56, build point 7): hypothesis strategies for svmlight files and
CSV tables, slow reference parsers written here from the formats' rules, and the checks that hold
a reader to them. ``tests/test_fuzz_text.py`` runs a short session; ``python -m bench.fuzz_text``
a long one, in subprocesses.

The rules the references follow (``fastcep.io.svmlight``'s and ``fastcep.io.table``'s):

- svmlight: a UTF-8 byte-order mark at the start is left out; a line is cut at its first '#'
  and skipped if nothing but ASCII spaces is left; its words (split at ASCII spaces) are a label
  (Python's ``float``, finite) and fields ``index:value`` (one colon, both sides given; the index
  Python's ``int``, at least the index base and below 2**53, not ``qid``; the value Python's
  ``float``, finite); a repeated column's values are summed (finite), zeros are dropped; at
  least one row.
- CSV: a header row of names (stripped, distinct), then rows of as many fields; a row of one
  blank field is skipped; a cell is Python's ``float`` of its text, finite; at least one row.

A check returns what it saw ("ok", or the error class's name) and fails with AssertionError on
anything else: an accepted file the reference refuses, a refused file the reference accepts,
other numbers, an exception that is not the library's, a command-line exit other than 0 or 2, an
error message of more than one line.
"""

import csv
import io
import itertools
import math
import os
import warnings

import numpy as np
from hypothesis import strategies as st

from fastcep.cli import main
from fastcep.io.files import FileFormatError

BOM = b"\xef\xbb\xbf"
MAX_INDEX = 2**53

# ------------------------------------------------------------------------------ svmlight
_NUMBER_WORDS = [b"0", b"1", b"-1", b"+1", b"2", b"1.5", b"1e0", b"-0", b".5", b"5.", b"1_0", b"0x1"]
_JUNK_WORDS = [
    b"",
    b"nan",
    b"inf",
    b"-inf",
    b"1e400",
    b"x",
    b"1,5",
    b"1:2",
    b"qid:1",
    b"#",
    b"\xff",
    b"1\x00",
]
_SPACES = [b" ", b"\t", b"  ", b" \t", b"\x0b", b"\x0c"]


def _float_word(x):
    return repr(x).encode()


def _junk(draw, clean):
    """Whether a part of an unclean row is junk (one part in four)."""
    return not clean and draw(st.integers(0, 3)) == 0


@st.composite
def _label(draw, clean):
    clean = not _junk(draw, clean)
    words = st.sampled_from(_NUMBER_WORDS[:10] if clean else _NUMBER_WORDS + _JUNK_WORDS)
    floats = st.floats(allow_nan=not clean, allow_infinity=not clean).map(_float_word)
    return draw(
        st.one_of(words, floats) if not clean else st.one_of(words, floats.filter(lambda w: w != b"-0.0"))
    )


@st.composite
def _index(draw, clean):
    clean = not _junk(draw, clean)
    small = st.integers(0, 40)
    if clean:
        return str(draw(small)).encode()
    big = st.sampled_from([2**31 - 1, 2**31, 2**53 - 1, 2**53, 2**53 + 1, 2**63, 2**64 + 5, 10**30])
    number = draw(st.one_of(small, st.integers(-3, -1), big))
    form = draw(st.sampled_from(["{}", "{}", "{}", "+{}", "0{}", "{}.0", "{}e0", "{}_0", " {}"]))
    return form.format(number).encode()


@st.composite
def _value(draw, clean):
    clean = not _junk(draw, clean)
    floats = st.floats(allow_nan=not clean, allow_infinity=not clean, allow_subnormal=True)
    fmt = draw(st.sampled_from(["%r", "%g", "%.17g", "%.3e"]))
    text = st.one_of(floats.map(lambda x: (fmt % x).encode()), st.sampled_from(_NUMBER_WORDS[:10]))
    if clean:
        return draw(text)
    return draw(st.one_of(text, st.sampled_from(_NUMBER_WORDS + _JUNK_WORDS), st.binary(max_size=4)))


@st.composite
def _field(draw, clean):
    if not clean and draw(st.integers(0, 9)) == 0:
        return draw(st.sampled_from([b"qid:3", b"a:b:c", b":", b"3:", b":4", b"abc", b"3::4", b"3:4:5"]))
    return draw(_index(clean)) + b":" + draw(_value(clean))


@st.composite
def svmlight_row(draw, clean=False):
    """One svmlight line (without its newline): a label and fields, or a blank or comment line."""
    clean = clean or draw(st.booleans())  # (an unclean file's rows: half of them clean)
    if draw(st.integers(0, 9)) == 0:
        return draw(st.sampled_from([b"", b"   ", b"# only a comment", b"\t# note: 1:2"]))
    sep = st.sampled_from(_SPACES[:4] if clean else _SPACES)
    parts = [draw(_label(clean))]
    for field in draw(st.lists(_field(clean), max_size=6)):
        parts += [draw(sep), field]
    line = b"".join(parts)
    if draw(st.booleans()):
        line += draw(st.sampled_from([b" # a comment", b"#x:1 y:2", b" #", b"  ", b"\r"]))
    return line


@st.composite
def svmlight_files(draw, clean=None):
    """The bytes of an svmlight file: rows of either kind (``clean``: well-formed rows only; None:
    drawn), an optional byte-order mark, LF or CRLF, junk bytes put in somewhere."""
    clean = draw(st.booleans()) if clean is None else clean
    rows = draw(st.lists(svmlight_row(clean), min_size=1, max_size=8))
    end = draw(st.sampled_from([b"\n", b"\r\n"]))
    data = end.join(rows) + draw(st.sampled_from([end, b""]))
    if draw(st.booleans()):
        data = BOM + data
    if not clean and draw(st.integers(0, 4)) == 0:
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.binary(min_size=1, max_size=6)) + data[at:]
    return data


class Refused(Exception):
    """What the reference parser refuses (with the line)."""


def _py_float(word):
    try:
        x = float(word)
    except ValueError:
        raise Refused(f"not a number: {word!r}") from None
    if not math.isfinite(x):
        raise Refused(f"not finite: {word!r}")
    return x


def slow_svmlight(data, index_base=0):
    """``(rows, labels)`` of svmlight bytes by the rules above: rows a list of {column: [values in
    the file's order]}; raises Refused."""
    if data.startswith(BOM):
        data = data[len(BOM) :]
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    rows, labels = [], []
    for number, line in enumerate(lines, start=1):
        words = line.split(b"#", 1)[0].split()
        if not words:
            continue
        try:
            if b":" in words[0]:
                raise Refused("a label with a colon")
            label = words[0]
            row = {}
            for word in words[1:]:
                parts = word.split(b":")
                if len(parts) != 2 or not parts[0] or not parts[1] or parts[0] == b"qid":
                    raise Refused(f"not index:value: {word!r}")
                try:
                    index = int(parts[0])
                except ValueError:
                    raise Refused(f"not an integer index: {parts[0]!r}") from None
                value = _py_float(parts[1])
                if index < index_base or index >= MAX_INDEX:
                    raise Refused(f"index out of range: {index}")
                row.setdefault(index - index_base, []).append(value)
            labels.append(_py_float(label))
        except Refused as exc:
            raise Refused(f"line {number}: {exc}") from None
        for values in row.values():
            if not math.isfinite(sum(values)):
                raise Refused(f"line {number}: a repeated column's values sum to a non-finite number")
        rows.append(row)
    if not rows:
        raise Refused("no rows")
    return rows, labels


def _sums(values):
    """Every sum of ``values`` in some order (scipy sums a repeated column's values in its own)."""
    if len(values) > 4:
        return {math.fsum(values)}
    return {sum(p) for p in itertools.permutations(values)}


def _same_rows(X, y, rows, labels):
    assert X.shape[0] == len(rows) and np.array_equal(y, labels), (y, labels)
    X = X.tocsr()
    for i, row in enumerate(rows):
        lo, hi = X.indptr[i], X.indptr[i + 1]
        got = dict(zip(X.indices[lo:hi].tolist(), X.data[lo:hi].tolist(), strict=True))
        want = {c: v for c, v in row.items()}
        assert set(got) <= set(want), (i, got, want)
        for c, values in want.items():
            if c in got:
                assert got[c] in _sums(values), (i, c, got[c], values)
            else:
                assert 0.0 in _sums(values), (i, c, values)  # (a zero, or a sum that is zero, is dropped)


def _one_line_exit(capsys_text, code):
    assert code in (0, 2), code
    if code == 2:
        assert len(capsys_text.strip().splitlines()) == 1, capsys_text


def _run_cli(argv):
    """``main(argv)``: (exit status, stdout, stderr)."""
    import contextlib

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


def check_svmlight(data, folder):
    """Hold ``read_svmlight``, ``file_kind`` and ``fastcep convert`` of ``data`` to the reference
    (and to scikit-learn's reader where both accept the file and it has no repeated or unsorted
    index); returns "ok" or the name of the error class."""
    from fastcep.io import file_kind, read_csr, read_svmlight

    path = os.path.join(folder, "f.svm")
    with open(path, "wb") as fh:
        fh.write(data)
    try:
        want = slow_svmlight(data)
    except Refused:
        want = None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # (a repeated column)
            got = read_svmlight(path)
    except FileFormatError as exc:
        assert want is None, f"refused what the reference reads: {exc}"
        assert "\n" not in str(exc)
        seen = "FileFormatError"
    else:
        assert want is not None, "read what the reference refuses"
        _same_rows(got.X, got.y, *want)
        _against_sklearn(path, got, want)
        seen = "ok"
    kind = file_kind(path)
    assert isinstance(kind, str)
    dst = os.path.join(folder, "f.h5")
    code, _, err = _run_cli(["convert", path, dst, "--force"])
    _one_line_exit(err, code)
    if code == 0 and kind == "svmlight":
        assert seen == "ok", err
        rows = read_csr(dst)
        _same_rows(rows.X, rows.y, *want)
    return seen


def _against_sklearn(path, got, want):
    rows, labels = want
    if not rows or any(len(v) > 1 for row in rows for v in row.values()):
        return
    with open(path, "rb") as fh:
        data = fh.read()
    if data.startswith(BOM) or b"qid" in data:
        return
    from sklearn.datasets import load_svmlight_file

    try:
        X, y = load_svmlight_file(path, zero_based=True, n_features=max(got.X.shape[1], 1))
    except (ValueError, OverflowError):  # (it refuses unsorted indices, which the rules sort, and 2**31)
        return
    assert np.array_equal(y, got.y)
    assert (X[:, : got.X.shape[1]] != got.X).nnz == 0


# ------------------------------------------------------------------------------ CSV
_CELL_WORDS = [
    "0",
    "1",
    "-2.5",
    "1e3",
    " 7 ",
    "1_0",
    "+.5",
    "0x1",
    "",
    "nan",
    "inf",
    "1e400",
    "1,5",
    "a",
    "１",
]
#: a cell that stands for a field of 140,000 nines (longer than the csv module's limit), written
#: out only in the file (a short repr for hypothesis's reports)
HUGE = "<huge>"


@st.composite
def _cell(draw, clean):
    if clean:
        floats = st.floats(allow_nan=False, allow_infinity=False).map(repr)
        return draw(st.one_of(floats, st.sampled_from(_CELL_WORDS[:8])))
    junk = st.text(st.characters(blacklist_categories=("Cs",)), max_size=6)
    return draw(st.one_of(st.floats().map(repr), st.sampled_from([*_CELL_WORDS, HUGE]), junk))


def _render(field, delimiter, quote_all):
    field = "9" * 140_000 if field == HUGE else field
    if quote_all or any(c in field for c in (delimiter, '"', "\n", "\r")) or field != field.strip():
        return '"' + field.replace('"', '""') + '"'
    return field


class Table(tuple):
    """A drawn CSV table: (header, rows, the delimiter the file uses, the one the reader is told,
    quote every field, line end, a byte-order mark, junk bytes and where, as (offset, bytes))."""

    @property
    def header(self):
        return self[0]

    @property
    def rows(self):
        return self[1]

    def data(self):
        header, rows, delimiter, _, quote_all, end, bom, junk = self
        lines = (delimiter.join(_render(f, delimiter, quote_all) for f in row) for row in [header, *rows])
        data = (BOM if bom else b"") + (end.join(lines) + end).encode()
        if junk is not None:
            at = junk[0] % (len(data) + 1)
            data = data[:at] + junk[1] + data[at:]
        return data


@st.composite
def csv_tables(draw, clean=None):
    """A CSV table (``Table``): names and cells, quoted where they must be (or always), an optional
    byte-order mark, LF or CRLF; unclean: junk cells, a huge field, NUL or non-UTF-8 bytes or a
    stray quote put in, a wrong delimiter."""
    clean = draw(st.booleans()) if clean is None else clean
    n = draw(st.integers(1, 4))
    chars = st.characters(min_codepoint=33, max_codepoint=0x2FF, blacklist_characters='",;|\t')
    header = draw(
        st.lists(st.text(chars, min_size=1, max_size=4), min_size=n, max_size=n, unique_by=str.strip)
    )
    rows = draw(st.lists(st.lists(_cell(clean), min_size=n, max_size=n), max_size=5))
    delimiter = draw(st.sampled_from([",", ";", "\t", "|"]))
    told, junk = delimiter, None
    if not clean:
        spoil = draw(st.integers(0, 5))
        if spoil == 0:
            junk = (
                draw(st.integers(0, 10**6)),
                draw(st.sampled_from([b"\x00", b"\xff", b"\xc3", b'"', b"\r"])),
            )
        elif spoil == 1:
            told = draw(st.sampled_from([",", ";", "\t", "|"]))
    quote_all, end, bom = draw(st.booleans()), draw(st.sampled_from(["\n", "\r\n"])), draw(st.booleans())
    return Table((header, rows, delimiter, told, quote_all, end, bom, junk))


def slow_table(header, rows):
    """``{name: [floats]}`` of a table by the rules above (the cells as written); raises Refused."""
    names = [h.strip() for h in header]
    if len(set(names)) != len(names):
        raise Refused("a name twice")
    rows = [["9" * 140_000 if c == HUGE else c for c in row] for row in rows]
    kept = [row for row in rows if not (len(row) == 1 and not row[0].strip())]
    if not kept:
        raise Refused("no rows")
    return {name: [_py_float(row[j]) for row in kept] for j, name in enumerate(names)}


def check_csv(table, folder):
    """Hold ``read_table`` (and ``fastcep convert --target --hash`` of the table) to the reference
    where the file is what the strategy meant (else: the library's error or a result, nothing
    else); returns "ok" or the name of the error class."""
    from fastcep.io import read_csr, read_table

    header, rows, delimiter, told = table[:4]
    data = table.data()
    path = os.path.join(folder, "t.csv")
    with open(path, "wb") as fh:
        fh.write(data)
    meant = told == delimiter and _as_rendered(data, delimiter, header, rows)
    try:
        want = slow_table(header, rows) if meant else None
    except Refused:
        want = None
    try:
        got = read_table(path, None, told)
    except FileFormatError as exc:
        assert not (meant and want is not None), f"refused what the reference reads: {exc}"
        assert "\n" not in str(exc)
        seen = "FileFormatError"
    else:
        if meant:
            assert want is not None, "read what the reference refuses"
            assert list(got.names) == [h.strip() for h in header]
            for name, values in want.items():
                assert np.array_equal(got.columns[name], values), (name, got.columns[name], values)
        seen = "ok"
    # the hashed conversion: the first column the label, the second (if any) hashed
    names = [h.strip() for h in header]
    argv = [
        "convert",
        path,
        os.path.join(folder, "h.h5"),
        "--force",
        "--target",
        names[0],
        "--hash-bits",
        "6",
    ]
    argv += ["--delimiter", told] + (["--hash", names[1]] if len(names) > 1 else [])
    if names[0].startswith("-") or (len(names) > 1 and names[1].startswith("-")):
        return seen  # (argparse would take the name for an option)
    code, _, err = _run_cli(argv)
    _one_line_exit(err, code)
    if code == 0 and meant and want is not None:
        got = read_csr(os.path.join(folder, "h.h5"))
        assert np.array_equal(got.y, want[names[0]])
    return seen


def _as_rendered(data, delimiter, header, rows):
    """Whether Python's csv module reads ``data`` back as the header and rows (not so once junk
    bytes were put in)."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return False
    try:
        back = list(csv.reader(io.StringIO(text, newline=""), delimiter=delimiter))
    except csv.Error:
        return False
    rows = [["9" * 140_000 if c == HUGE else c for c in row] for row in rows]
    return back == [header, *rows] and "\x00" not in text
