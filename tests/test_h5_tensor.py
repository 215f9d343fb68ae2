"""HDF5 tensor files: writer, reader, text conversion, and the errors on bad files."""

import h5py
import numpy as np
import pytest

from fastcep.io import (
    FileFormatError,
    TensorReader,
    TensorWriter,
    read_tensor,
    text_to_tensor,
    write_tensor,
)


@pytest.fixture
def small(rng):
    coords = np.stack([rng.integers(0, d, 1000) for d in (7, 5, 9)], axis=1)
    values = rng.normal(size=1000)
    return coords, values


def test_round_trip_and_chunk_aligned_blocks(tmp_path, small):
    coords, values = small
    path = tmp_path / "t.h5"
    shape = write_tensor(path, coords, values, shape=(7, 5, 9), chunk_rows=128)
    assert shape == (7, 5, 9)
    with TensorReader(path) as r:
        assert (r.shape, r.n, r.n_modes, r.chunk_rows, r.binary) == ((7, 5, 9), 1000, 3, 128, False)
        blocks = list(r.blocks(rows=200))  # rounded up to whole chunks: 256
        assert [b[0] for b in blocks] == [0, 256, 512, 768]
        np.testing.assert_array_equal(np.concatenate([b[1] for b in blocks]), coords)
        np.testing.assert_array_equal(np.concatenate([b[2] for b in blocks]), values)
        assert list(r.blocks(rows=256, start=512))[0][0] == 512
    c, v, s = read_tensor(path)
    np.testing.assert_array_equal(c, coords)
    assert c.dtype == np.int64 and s == (7, 5, 9)
    with h5py.File(path) as f:
        assert f.attrs["format"] == "fastcep-tensor" and f.attrs["index_base"] == 0
        assert f["coords"].chunks == (128, 3)


def test_writer_appends_and_infers_shape(tmp_path, small):
    coords, values = small
    path = tmp_path / "t.h5"
    with TensorWriter(path, shape=None, chunk_rows=64) as w:
        w.append(coords[:300], values[:300])
        w.append(coords[300:], values[300:])
    assert w.shape == tuple(int(m) + 1 for m in coords.max(0))
    np.testing.assert_array_equal(read_tensor(path)[1], values)


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda c, v: (c + np.array([0, 0, 9]), v), r"beyond shape \(7, 5, 9\)"),
        (lambda c, v: (c - 1, v), "negative index"),
        (lambda c, v: (c, np.where(np.arange(len(v)) == 17, np.nan, v)), "non-finite value at row 17"),
    ],
)
def test_writer_refuses_bad_blocks_and_leaves_nothing(tmp_path, small, mutate, match):
    coords, values = mutate(*small)
    path = tmp_path / "t.h5"
    with pytest.raises(ValueError, match=match):
        write_tensor(path, coords, values, shape=(7, 5, 9))
    assert list(tmp_path.iterdir()) == []


def test_binary_writer_refuses_other_values(tmp_path, small):
    coords, _ = small
    values = np.zeros(1000)
    values[5] = 2.0
    with pytest.raises(ValueError, match="value 2.0 at row 5 is not 0 or 1"):
        write_tensor(tmp_path / "b.h5", coords, values, binary=True)


def test_failed_write_keeps_the_previous_file(tmp_path, small):
    coords, values = small
    path = tmp_path / "t.h5"
    write_tensor(path, coords, values)
    before = path.read_bytes()
    with pytest.raises(RuntimeError), TensorWriter(path, (7, 5, 9)) as w:
        w.append(coords[:10], values[:10])
        raise RuntimeError("interrupted")
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["t.h5"]


def test_reader_refuses_bad_files(tmp_path, small):
    coords, values = small
    with pytest.raises(FileNotFoundError):
        TensorReader(tmp_path / "missing.h5")
    junk = tmp_path / "junk.h5"
    junk.write_bytes(b"\x00" * 100)
    with pytest.raises(FileFormatError, match="cannot be opened as HDF5"):
        TensorReader(junk)
    good = tmp_path / "good.h5"
    write_tensor(good, coords, values, shape=(7, 5, 9))
    data = good.read_bytes()
    trunc = tmp_path / "trunc.h5"
    trunc.write_bytes(data[: len(data) // 3])
    with pytest.raises(FileFormatError):
        with TensorReader(trunc) as r:
            r.read()
    for attr, value, match in [
        ("format_version", 7, "format version 7"),
        ("format", "something", "format attribute"),
        ("n", 5, "attribute n = 5"),
        ("index_base", 1, "index_base is 1"),
        ("shape", np.array([7, 5]), "coords of shape"),
    ]:
        bad = tmp_path / f"bad-{attr}.h5"
        bad.write_bytes(data)
        with h5py.File(bad, "a") as f:
            f.attrs[attr] = value
        with pytest.raises(FileFormatError, match=match):
            TensorReader(bad)
    # indices beyond the shape written by another tool are caught when the block is read
    beyond = tmp_path / "beyond.h5"
    beyond.write_bytes(data)
    with h5py.File(beyond, "a") as f:
        f["coords"][10] = [7, 0, 0]
        f["values"][20] = np.nan
    with TensorReader(beyond) as r, pytest.raises(FileFormatError, match="row 10 is outside shape"):
        r.read()
    with h5py.File(beyond, "a") as f:
        f["coords"][10] = [0, 0, 0]
    with TensorReader(beyond) as r, pytest.raises(FileFormatError, match="non-finite value at row 20"):
        r.read()
    empty = tmp_path / "empty.h5"
    with pytest.raises(ValueError, match="no entries"):
        with TensorWriter(empty, (2, 2)):
            pass
    assert not empty.exists()


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
@pytest.mark.parametrize("delimiter", [",", "\t", " "])
def test_text_conversion(tmp_path, small, newline, delimiter):
    coords, values = small
    src = tmp_path / "t.txt"
    lines = [
        delimiter.join([*(str(i + 1) for i in c), repr(float(v))])
        for c, v in zip(coords, values, strict=True)
    ]
    src.write_bytes((newline.join(["# a comment", *lines, ""])).encode())
    dst = tmp_path / "t.h5"
    shape = text_to_tensor(src, dst, index_base=1, shape=(7, 5, 9), block_lines=300)
    assert shape == (7, 5, 9)
    c, v, _ = read_tensor(dst)
    np.testing.assert_array_equal(c, coords)
    np.testing.assert_array_equal(v, values)
    src0 = tmp_path / "t0.txt"
    src0.write_text("\n".join(f"{a},{b},{c},{d}" for (a, b, c), d in zip(coords, values, strict=True)))
    text_to_tensor(src0, tmp_path / "t0.h5", index_base=0)
    np.testing.assert_array_equal(read_tensor(tmp_path / "t0.h5")[0], coords)


@pytest.mark.parametrize(
    "body, match",
    [
        ("1,1,1,0.5\n1,2,x,0.5\n", r"t.txt:2: malformed line"),
        ("1,1,1,0.5\n1,2,0.5\n", r"t.txt:2: expected 4 fields, got 3"),
        ("1,1,1,0.5\n\n2,2,2,nan\n", r"t.txt:3: value is not finite"),
        ("1,1,1,0.5\n0,2,2,1\n", r"t.txt:2: index below the index base 1"),
        ("1,1,1,0.5\n3,2,2,1\n", r"t.txt:2: .*beyond shape \(2, 2, 2\)"),
    ],
)
def test_text_conversion_names_the_bad_line(tmp_path, body, match):
    src = tmp_path / "t.txt"
    src.write_text(body)
    with pytest.raises(ValueError, match=match):
        text_to_tensor(src, tmp_path / "t.h5", shape=(2, 2, 2))
    assert not (tmp_path / "t.h5").exists()


def _tensor_file(path, coords, shape, n=None):
    """A tensor file as another tool might write it (any dtypes)."""
    with h5py.File(path, "w") as f:
        f.create_dataset("coords", data=coords, chunks=(len(coords), coords.shape[1]))
        f.create_dataset("values", data=np.ones(len(coords)))
        f.attrs.update(format="fastcep-tensor", format_version=1, index_base=0, binary=False)
        f.attrs["shape"] = shape
        f.attrs["n"] = len(coords) if n is None else n


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_reader_refuses_float_coords(tmp_path, dtype):
    path = tmp_path / "f.h5"
    _tensor_file(path, np.array([[0.5, 1.0, 2.0], [1.0, 0.0, 0.0]], dtype=dtype), np.array([2, 2, 3]))
    with pytest.raises(
        FileFormatError, match=f"not a valid fastcep tensor file: coords of dtype {np.dtype(dtype)}"
    ):
        TensorReader(path)
    _tensor_file(path, np.array([[0.0, 1.0, 2.0]], dtype=dtype), np.array([2, 2, 3]))  # (integer-valued)
    with pytest.raises(FileFormatError, match="integer indices expected"):
        read_tensor(path)
    _tensor_file(path, np.array([[0, 1, 2]], dtype=np.uint16), np.array([2, 2, 3]))
    assert read_tensor(path)[0].tolist() == [[0, 1, 2]]


@pytest.mark.parametrize(
    "shape, n, match",
    [
        (np.array([8.5, 2.0, 3.0]), 1, r"the shape attribute \[8.5, 2.0, 3.0\] \(float64\) is not integers"),
        (np.array([8.0, 2.0, 3.0]), 1, "shape attribute"),
        (np.array([8, 2, 3]), 1.0, r"the n attribute 1.0 \(float64\) is not an integer"),
    ],
)
def test_reader_refuses_non_integer_attributes(tmp_path, shape, n, match):
    path = tmp_path / "f.h5"
    _tensor_file(path, np.array([[7, 1, 2]]), shape, n)
    with pytest.raises(FileFormatError, match=match):
        TensorReader(path)


def test_fit_reads_a_tensor_file_whole(tmp_path):
    """``fastcep.fit(path, None, model=...)``: the fit of the file's entries and shape, bit for
    bit the fit of the same arrays; values beside the file, or another shape, are refused."""
    import fastcep
    from fastcep.data_tools import make_cp_tensor

    T, _ = make_cp_tensor((12, 10, 8), 2, 500, noise_sd=0.1, seed=0)
    path = tmp_path / "t.h5"
    write_tensor(path, T.coords, T.values, shape=(12, 10, 8))
    kw = dict(model="cp_gaussian", rank=2, max_iter=5, seed=1)
    from_file = fastcep.fit(path, None, **kw)
    from_arrays = fastcep.fit(T.coords, T.values, shape=(12, 10, 8), **kw)
    for a, b in zip(from_file.posterior.means, from_arrays.posterior.means, strict=True):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="holds the values; give values=None"):
        fastcep.fit(path, T.values, **kw)
    with pytest.raises(ValueError, match=r"shape=\(12, 10, 9\) differs from the tensor file's \(12, 10, 8\)"):
        fastcep.fit(path, None, shape=(12, 10, 9), **kw)
