"""Text tensors (issue 20): what a line may hold, the errors that name file, line and field, and
the block parser against the line-by-line reference."""

import numpy as np
import pytest

import fastcep.io.text as text_mod
from fastcep.io import iter_text_rows, read_tensor, text_to_tensor, write_tensor

INT64_MAX = np.iinfo(np.int64).max


def convert(tmp_path, body, dst="t.h5", **kw):
    """Write ``body`` to t.txt, convert it to ``dst``; returns (coords, values, shape)."""
    src = tmp_path / "t.txt"
    src.write_bytes(body.encode() if isinstance(body, str) else body)
    text_to_tensor(src, tmp_path / dst, **kw)
    return read_tensor(tmp_path / dst)


def refused(tmp_path, body, match, **kw):
    """The conversion fails with a one-line ValueError matching ``match``; nothing is written,
    and the line-by-line reader (``iter_text_rows``) gives the same message."""
    with pytest.raises(ValueError, match=match) as exc:
        convert(tmp_path, body, dst="bad.h5", **kw)
    assert "\n" not in str(exc.value)
    assert not (tmp_path / "bad.h5").exists()
    if "shape" not in kw and "binary" not in kw:
        same = {k: v for k, v in kw.items() if k in ("index_base", "delimiter", "skip_header")}
        with pytest.raises(ValueError) as ref:
            list(iter_text_rows(tmp_path / "t.txt", **same))
        assert str(ref.value) == str(exc.value)
    return str(exc.value)


def test_decimal_commas_are_refused(tmp_path):
    # tab- or space-separated: the value "1,5" is a decimal comma, not two fields
    refused(tmp_path, "1\t1\t1\t1,5\n", r"t.txt:1: malformed line .*value field 4 '1,5' has a decimal comma")
    refused(tmp_path, "1 1 1 0.5\n1 2 1 1,5\n", r"t.txt:2: .*'1,5' has a decimal comma")
    # comma-separated: every line has as many fields as the first data line
    refused(tmp_path, "# c\n1,1,1,1,5\n1,2,1,2\n", r"t.txt:3: expected 5 fields, got 4 .*line 2 has 5")


@pytest.mark.parametrize(
    "line, field",
    [
        ("1,1,1,1_0", "value field 4 '1_0'"),
        ("1_0,1,1,0.5", "index field 1 '1_0'"),
        ("1,1,1,\uff15", "value field 4 '\uff15'"),  # full-width digits
        ("1,\uff12,1,0.5", "index field 2 '\uff12'"),
        ("1,1,1,\u0665", "value field 4"),  # Arabic-Indic digit
        ("+1,1,1,0.5", "index field 1 '\\+1'"),
        ("1,1,1,0x10", "value field 4 '0x10'"),
    ],
)
def test_only_ascii_digits(tmp_path, line, field):
    refused(tmp_path, f"1,1,1,0.5\n{line}\n", rf"t.txt:2: malformed line .*{field}")


def test_indices_are_exact_64_bit_integers(tmp_path):
    big = 2**53 + 1
    c, _, shape = convert(tmp_path, f"{big},1,1,0.5\n1,{INT64_MAX},1,1\n")
    assert c[:, 0].tolist() == [big - 1, 0] and c[1, 1] == INT64_MAX - 1
    assert shape == (big, INT64_MAX, 1)
    c, _, _ = convert(tmp_path, f"{big},0,0,0.5\n0,0,0,1\n", index_base=0)
    assert c[0, 0] == big
    refused(tmp_path, f"1,1,1,2\n1,{2**63},1,0.5\n", rf"t.txt:2: .*index field 2 '{2**63}' is too large")
    refused(tmp_path, f"{INT64_MAX},0,0,1\n", "t.txt:1: .*is too large", index_base=0)
    refused(
        tmp_path, "1,1,1,2\n1.5,1,1,2\n", r"t.txt:2: malformed line .*index field 1 '1.5' is not an integer"
    )
    refused(
        tmp_path, "1,1,1,2\n1,1,1e3,2\n", r"t.txt:2: malformed line .*index field 3 '1e3' is not an integer"
    )


def test_header_line(tmp_path):
    refused(tmp_path, "i,j,k,value\n1,1,1,0.5\n", r"t.txt:1: .*looks like a header: use skip_header=True")
    refused(tmp_path, "user item rating\n", r"t.txt:1: .*looks like a header")
    refused(tmp_path, "1,1,x,0.5\n", r"t.txt:1: malformed line .*index field 3 'x'")  # (not a header)
    body = "# from somewhere\n\ni,j,k,value\n1,2,1,0.5\n2,1,1,1.5\n"
    c, v, shape = convert(tmp_path, body, skip_header=True)
    assert c.tolist() == [[0, 1, 0], [1, 0, 0]] and v.tolist() == [0.5, 1.5] and shape == (2, 2, 1)
    rows = list(iter_text_rows(tmp_path / "t.txt", skip_header=True))
    assert rows == [(4, [1, 2, 1], 0.5), (5, [2, 1, 1], 1.5)]
    refused(tmp_path, "i,j,k,v\nrow,col,x,y\n1,1,1,1\n", r"t.txt:2: .*second header", skip_header=True)
    with pytest.raises(TypeError, match="'skip_header' parameter"):
        text_to_tensor(tmp_path / "t.txt", tmp_path / "x.h5", skip_header="yes")


def test_index_base_mistakes(tmp_path):
    one_based = "1,1,1,0.5\n3,2,1,1\n"
    with pytest.warns(UserWarning, match=r"mode\(s\) 1, 2, 3 .*may be 1-based \(try index_base=1\)"):
        _, _, shape = convert(tmp_path, one_based, index_base=0)
    assert shape == (4, 3, 2)
    with pytest.warns(UserWarning, match=r"no index 0 in mode\(s\) 3 "):
        convert(tmp_path, "0,1,1,0.5\n1,0,2,1\n", index_base=0)
    convert(tmp_path, one_based, index_base=0, shape=(4, 3, 2))  # (a shape given: no warning)
    refused(
        tmp_path,
        "1,1,1,0.5\n2,0,1,1\n",
        r"t.txt:2: index below .*index 0 in a 1-based file: try index_base=0",
    )


def test_non_utf8_text_names_file_and_line(tmp_path):
    refused(tmp_path, b"1,1,1,0.5\n2,2,1,\xe9\n", r"t.txt:2: not UTF-8 text \(byte 0xe9 at column 7\)")
    refused(tmp_path, b"# caf\xe9\n1,1,1,0.5\n", r"t.txt:1: not UTF-8 text")
    # in a later block, which the block parser reads
    body = b"1,1,1,0.5\n" * 1000 + b"1,1,1,0.\xff\n"
    refused(tmp_path, body, "t.txt:1001: not UTF-8", block_lines=64)
    c, _, _ = convert(tmp_path, "# caf\u00e9 \u2014 UTF-8 comments are fine\n1,1,1,0.5\n", block_lines=1)
    assert c.tolist() == [[0, 0, 0]]


def test_long_lines_are_cut_in_messages(tmp_path):
    """A 2 MB line is quoted in about QUOTE_CHARS characters."""
    room = len(str(tmp_path / "t.txt")) + 2 * 80 + 120  # (QUOTE_CHARS is 80)
    long = "1,1,1," + "9" * 2_000_000 + "x"
    msg = refused(
        tmp_path, f"1,1,1,0.5\n{long}\n", r"t.txt:2: malformed line '1,1,1,999.*'\.\.\.: value field 4"
    )
    assert len(msg) < room
    body = "1,1,1,0.5\n" + "1," * 1_000_000 + "0.5\n"
    msg = refused(tmp_path, body, "t.txt:2: expected 4 fields, got 1000001")
    assert len(msg) < room
    msg = refused(tmp_path, "1," * 1_000_000 + "0.5\n", "t.txt:1: 1000001 fields in .*at most 64 indices")
    assert len(msg) < room


def test_shape_must_match_the_lines(tmp_path):
    body = "1,1,1,0.5\n2,2,2,1\n"
    refused(
        tmp_path,
        body,
        r"t.txt:1: shape \(3, 3\) has 2 modes but the file's lines have 3 indices",
        shape=(3, 3),
    )
    refused(tmp_path, body, "has 4 modes but the file's lines have 3 indices", shape=(3, 3, 3, 3))
    with pytest.raises(ValueError, match="coords have 3 columns, the tensor has 2 modes"):
        write_tensor(tmp_path / "w.h5", [[0, 0, 0]], [1.0], shape=(3, 3))


@pytest.mark.parametrize(
    "shape", [(8.5, 3, 3), (8.0, 3, 3), (2, True), (3, 0, 3), (3,), "33", np.array([2.0, 3.0])]
)
def test_shapes_must_be_integers(tmp_path, shape):
    (tmp_path / "t.txt").write_text("1,1,1,0.5\n")
    with pytest.raises(
        ValueError, match="'shape' parameter of text_to_tensor must be a sequence of >= 2 positive"
    ):
        text_to_tensor(tmp_path / "t.txt", tmp_path / "t.h5", shape=shape)
    with pytest.raises(ValueError, match="'shape' parameter of write_tensor must be"):
        write_tensor(tmp_path / "w.h5", [[0, 0, 0]], [1.0], shape=shape)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.txt"]


def test_numpy_integer_shapes_are_fine(tmp_path):
    assert write_tensor(tmp_path / "w.h5", [[0, 1, 2]], [1.0], shape=np.array([1, 2, 3])) == (1, 2, 3)
    shape = np.array([1, 2, 3], dtype=np.uint8)
    (tmp_path / "t.txt").write_text("1,2,3,0.5\n")
    assert text_to_tensor(tmp_path / "t.txt", tmp_path / "t.h5", shape=shape) == (1, 2, 3)


def _random_text(rng, n, K, sep, newline):
    """A valid text tensor with comments, blank lines and odd spacing, and its entries."""
    coords = rng.integers(1, 50, size=(n, K))
    coords[rng.integers(0, n), 0] = 2**53 + 1  # (an index a float cannot hold)
    values = rng.normal(size=n) * 10.0 ** rng.integers(-300, 300, size=n)
    forms = ("{!r}", "{:.3e}", "{:.2f}", "{:+.1E}", "{:.0f}.")
    lines = []
    for c, v in zip(coords.tolist(), values.tolist(), strict=True):
        fields = [str(i).zfill(int(rng.integers(1, 4))) for i in c]
        lines.append(sep.join([*fields, forms[int(rng.integers(len(forms)))].format(v)]))
        if rng.random() < 0.02:
            lines.append(str(rng.choice(["", "  ", "# a comment", "  # another, 1,2,3"])))
    values = np.array([float(line.split(sep.strip() or None)[-1]) for line in lines if _is_data(line)])
    return newline.join(lines) + newline, coords - 1, values


def _is_data(line):
    return bool(line.strip()) and not line.strip().startswith("#")


@pytest.mark.parametrize("sep", [",", ", ", "\t", " ", "  \t"])
@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_block_parser_matches_the_line_parser(tmp_path, rng, monkeypatch, sep, newline):
    """Valid files: the block parser gives the reference's entries, and reads every block
    itself (only the first data line goes through the line parser)."""
    body, coords, values = _random_text(rng, 3000, 3, sep, newline)
    src = tmp_path / "t.txt"
    src.write_bytes(body.encode())
    calls = []
    parse_lines = text_mod._parse_lines

    def spy(lines, start, fmt):
        calls.append(len(lines))
        return parse_lines(lines, start, fmt)

    delimiter = "\t" if sep.strip(" ") == "\t" else None
    rows = list(iter_text_rows(src, delimiter=delimiter))
    monkeypatch.setattr(text_mod, "_parse_lines", spy)
    text_to_tensor(src, tmp_path / "t.h5", delimiter=delimiter, block_lines=500)
    assert calls == [1]
    c, v, shape = read_tensor(tmp_path / "t.h5")
    np.testing.assert_array_equal(c, coords)
    np.testing.assert_array_equal(v, values)  # (bitwise: both are correctly rounded)
    np.testing.assert_array_equal(c + 1, [r[1] for r in rows])
    assert shape == tuple(int(m) + 1 for m in coords.max(0))


CORRUPTIONS = [
    lambda f: [*f[:-1], "nan"],
    lambda f: [*f[:-1], "-inf"],
    lambda f: [*f[:-1], "1e400"],
    lambda f: [*f[:-1], "1,5"],
    lambda f: [*f[:-1], "1.2.3"],
    lambda f: [*f[:-1], ""],
    lambda f: ["0", *f[1:]],
    lambda f: ["-3", *f[1:]],
    lambda f: [f[0], str(2**64), *f[2:]],
    lambda f: [f[0], "7.0", *f[2:]],
    lambda f: [f[0], "1_000", *f[2:]],
    lambda f: f[:-1],
    lambda f: [*f, "1"],
    lambda f: [*f[:-1], f[-1] + "\r" + f[-1]],
    lambda f: [*f[:-1], f[-1] + "\u00a0"],
]


@pytest.mark.parametrize("corrupt", range(len(CORRUPTIONS)))
@pytest.mark.parametrize("sep", [",", "\t", " "])
def test_block_parser_names_the_same_bad_line(tmp_path, rng, corrupt, sep):
    """One bad line deep in a file: the block parser's message is the line parser's, with the
    line number of that line."""
    body, _, _ = _random_text(rng, 2000, 3, sep, "\n")
    lines = body.split("\n")
    data = [i for i, line in enumerate(lines) if _is_data(line)]
    bad = int(rng.choice(data[700:]))
    lines[bad] = sep.join(CORRUPTIONS[corrupt](lines[bad].split(sep)))
    delimiter = None if sep != "\t" else "\t"
    msg = refused(tmp_path, "\n".join(lines), rf"^.*t\.txt:{bad + 1}: ", delimiter=delimiter, block_lines=256)
    assert msg.count("t.txt") == 1


def test_binary_and_shape_checks_name_the_line(tmp_path):
    body = "1,1,1,1\n" * 600 + "2,2,2,0.5\n"
    refused(
        tmp_path, body, r"t.txt:601: binary tensor: value 0.5 is not 0 or 1", binary=True, block_lines=100
    )
    body = "1,1,1,1\n" * 600 + "2,3,2,0.5\n"
    refused(
        tmp_path,
        body,
        r"t.txt:601: index \[2, 3, 2\] \(1-based\) is beyond shape \(2, 2, 2\)",
        shape=(2, 2, 2),
    )


@pytest.mark.parametrize("delimiter", ["", ";;", "1", ".", "e", "#", "\n", 5])
def test_bad_delimiters(tmp_path, delimiter):
    (tmp_path / "t.txt").write_text("1,1,1,0.5\n")
    with pytest.raises(ValueError, match="'delimiter' parameter of text_to_tensor"):
        text_to_tensor(tmp_path / "t.txt", tmp_path / "t.h5", delimiter=delimiter)


def test_other_delimiters(tmp_path):
    c, v, _ = convert(tmp_path, "1;2;3;0.5\n 2 ; 1 ; 1 ; -1e-3 \r\n", delimiter=";")
    assert c.tolist() == [[0, 1, 2], [1, 0, 0]] and v.tolist() == [0.5, -1e-3]
    c, _, _ = convert(tmp_path, "1   2\t 3  0.5\n", delimiter=" ")
    assert c.tolist() == [[0, 1, 2]]
    refused(tmp_path, "1\t\t2\t3\t0.5\n", r"t.txt:1: malformed line .*index field 2 ''", delimiter="\t")


def test_read_text_tensor_indices_are_exact(tmp_path):
    from fastcep.data_tools import read_text_tensor

    (tmp_path / "t.txt").write_text(f"{2**53 + 1},1,1,0.5\n")
    assert read_text_tensor(tmp_path / "t.txt").coords.tolist() == [[2**53, 0, 0]]
