"""Tensor files: the observed entries of a sparse tensor, read and written in chunks.

A tensor file holds ``coords`` (n, K) int32 or int64, 0-based, and ``values`` (n,) float64,
both chunked along n (``TENSOR_CHUNK_ROWS`` rows), with the attributes ``format``
("fastcep-tensor"), ``format_version``, ``shape``, ``index_base`` (always 0), ``n`` and
``binary``. A tensor file has no digest (it is large, and read in blocks): on open, the type and
size of every attribute and dataset are checked (``files.check_types``) before any value is read.
``TensorWriter`` appends blocks (the file appears, renamed from a temporary file,
only when it is complete); ``TensorReader`` owns the open file, checks its metadata on open and
every block it reads, and yields blocks aligned to the chunking.
"""

import numbers
import os

import numpy as np

from .._validation import param_error
from .files import AtomicH5, FileFormatError, H5Owner, bad_file, open_verified
from .formats import TENSOR_FORMAT
from .sources import refuse_stream

TENSOR_FORMAT_VERSION = 1
#: rows per HDF5 chunk of a tensor file (coords and values chunked alike along n)
TENSOR_CHUNK_ROWS = 1 << 16
#: the largest index or size a tensor file holds (int64)
INT64_MAX = int(np.iinfo(np.int64).max)


def check_shape(shape, func):
    """A tensor shape as a tuple of ints: >= 2 positive integers (Python or numpy ints; floats,
    even 8.0, and bools are refused, so that a size is never truncated)."""
    what = "a sequence of >= 2 positive integers"
    try:
        dims = list(shape)
    except TypeError:
        raise param_error("shape", func, what, shape) from None
    ints = all(isinstance(d, numbers.Integral) and not isinstance(d, (bool, np.bool_)) for d in dims)
    if len(dims) < 2 or not ints or not all(1 <= d <= INT64_MAX for d in dims):
        raise param_error("shape", func, what, shape)
    return tuple(int(d) for d in dims)


class TensorWriter:
    """Write a sparse tensor to HDF5 in appended blocks; the file appears only on success.

    ``with TensorWriter(path, shape, binary=False) as w: w.append(coords, values)`` with 0-based
    coords (m, K). Each block is checked (indices within ``shape``, finite values, binary values
    in {0, 1} if ``binary``) before it is written; on any error, or if the ``with`` block raises,
    the temporary file is removed and ``path`` is left as it was. ``shape=None`` infers the shape
    from the largest index of each mode at close.
    """

    def __init__(self, path, shape, binary=False, chunk_rows=TENSOR_CHUNK_ROWS, n_modes=None):
        self.path = os.fspath(path)
        self.shape = None if shape is None else check_shape(shape, "TensorWriter")
        self.K = len(self.shape) if self.shape is not None else n_modes
        self.binary = bool(binary)
        self.chunk_rows = int(chunk_rows)
        self.n = 0
        self._max = None
        self._file = None
        self._atomic = None

    def __enter__(self):
        self._atomic = AtomicH5(self.path)
        self._file = self._atomic.__enter__()
        return self

    def _create(self, K):
        self.K = K
        big = self.shape is None or max(self.shape) > np.iinfo(np.int32).max
        self._file.create_dataset(
            "coords",
            shape=(0, K),
            maxshape=(None, K),
            dtype=np.int64 if big else np.int32,
            chunks=(self.chunk_rows, K),
        )
        self._file.create_dataset(
            "values", shape=(0,), maxshape=(None,), dtype=np.float64, chunks=(self.chunk_rows,)
        )
        self._max = np.full(K, -1, dtype=np.int64)

    def append(self, coords, values, first_row=None):
        """Append a block; ``first_row`` (for messages) is the row number of its first entry."""
        coords = np.asarray(coords)
        values = np.asarray(values, dtype=np.float64)
        first = self.n if first_row is None else first_row
        if coords.ndim != 2 or coords.shape[0] != values.shape[0] or values.ndim != 1:
            raise ValueError(
                f"TensorWriter.append: coords (m, K) and values (m,) expected, got shapes "
                f"{coords.shape} and {values.shape}."
            )
        if len(coords) == 0:
            return
        if coords.dtype.kind not in "iu":
            raise TypeError(f"TensorWriter.append: integer coords expected, got dtype {coords.dtype}.")
        if self.K is not None and coords.shape[1] != self.K:
            raise ValueError(
                f"TensorWriter.append: coords have {coords.shape[1]} columns, the tensor has {self.K} modes."
            )
        if self._max is None:
            self._create(coords.shape[1])
        bad = np.nonzero((coords < 0).any(1))[0]
        if bad.size:
            raise ValueError(f"TensorWriter.append: negative index at row {first + int(bad[0])}.")
        if self.shape is not None:
            over = np.nonzero((coords >= np.asarray(self.shape)).any(1))[0]
            if over.size:
                r = int(over[0])
                raise ValueError(
                    f"TensorWriter.append: index {coords[r].tolist()} at row {first + r} is beyond "
                    f"shape {self.shape}."
                )
        bad = np.nonzero(~np.isfinite(values))[0]
        if bad.size:
            raise ValueError(f"TensorWriter.append: non-finite value at row {first + int(bad[0])}.")
        if self.binary:
            bad = np.nonzero((values != 0.0) & (values != 1.0))[0]
            if bad.size:
                r = int(bad[0])
                raise ValueError(
                    f"TensorWriter.append: binary tensor, value {float(values[r])!r} at row {first + r} "
                    "is not 0 or 1."
                )
        m = len(values)
        dc, dv = self._file["coords"], self._file["values"]
        dc.resize((self.n + m, self.K))
        dv.resize((self.n + m,))
        dc[self.n :] = coords
        dv[self.n :] = values
        self._atomic.check()  # (a full disk: stop at once)
        self.n += m
        np.maximum(self._max, coords.max(0), out=self._max)

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None and self.n == 0:
            self._atomic.__exit__(ValueError, None, None)  # (removes the temporary file)
            raise ValueError(f"TensorWriter: no entries written to {self.path!r}.")
        if exc_type is None:
            shape = self.shape if self.shape is not None else tuple(int(v) + 1 for v in self._max)
            f = self._file
            f.attrs["format"] = TENSOR_FORMAT
            f.attrs["format_version"] = TENSOR_FORMAT_VERSION
            f.attrs["shape"] = np.asarray(shape, dtype=np.int64)
            f.attrs["index_base"] = 0
            f.attrs["n"] = self.n
            f.attrs["binary"] = self.binary
            self.shape = shape
        return self._atomic.__exit__(exc_type, exc, tb)  # (renames, or removes the temporary file)


def write_tensor(path, coords, values, shape=None, binary=False, chunk_rows=TENSOR_CHUNK_ROWS):
    """Write 0-based ``coords`` (n, K) and ``values`` (n,) to an HDF5 tensor file (atomically)."""
    coords = np.asarray(coords)
    shape = None if shape is None else check_shape(shape, "write_tensor")
    with TensorWriter(path, shape, binary=binary, chunk_rows=chunk_rows) as w:
        for lo in range(0, len(coords), 1 << 20):
            w.append(coords[lo : lo + (1 << 20)], np.asarray(values)[lo : lo + (1 << 20)])
    return w.shape


class TensorReader(H5Owner):
    """An open HDF5 tensor file; reads blocks aligned to its chunking (never the whole file).

    Attributes: ``shape``, ``n``, ``n_modes``, ``binary``, ``chunk_rows``. ``read(start, stop)``
    returns (coords int64, values float64) of rows start..stop-1, checked (indices within
    shape, finite values, binary values); ``blocks(rows)`` iterates over consecutive blocks of
    ``rows`` rows (rounded up to whole chunks). Use as a context manager or call ``close()``.
    """

    def __init__(self, path):
        self.path = os.fspath(path)
        if not os.path.exists(self.path):
            raise FileNotFoundError(f"no such tensor file {self.path!r}")
        refuse_stream(self.path, "a tensor file")
        self._file = open_verified(self.path, lambda why: bad_file("tensor", self.path, why))
        try:
            self._check()
        except (OSError, RuntimeError, KeyError, TypeError, AttributeError, ValueError) as exc:
            self._file.close()
            if isinstance(exc, FileFormatError):
                raise
            why = f"missing or unreadable content ({type(exc).__name__}: {exc})"  # (a damaged file)
            raise bad_file("tensor", self.path, why) from exc
        except BaseException:
            self._file.close()
            raise

    def _check(self):
        f = self._file
        if f.attrs.get("format") != TENSOR_FORMAT:
            raise bad_file(
                "tensor", self.path, f"format attribute is {f.attrs.get('format')!r}, not {TENSOR_FORMAT!r}"
            )
        version = int(f.attrs.get("format_version", -1))
        if version != TENSOR_FORMAT_VERSION:
            raise bad_file(
                "tensor", self.path, f"format version {version}, this fastcep reads {TENSOR_FORMAT_VERSION}"
            )
        if "coords" not in f or "values" not in f:
            raise bad_file("tensor", self.path, "missing 'coords' or 'values' dataset")
        try:
            shape, n = np.asarray(f.attrs["shape"]), np.asarray(f.attrs["n"])
            base = int(f.attrs["index_base"])
            self.binary = bool(f.attrs.get("binary", False))
        except (KeyError, TypeError, ValueError) as exc:
            raise bad_file("tensor", self.path, f"missing or bad attribute ({exc})") from exc
        # (integers only: a size or a count of 8.5 is never truncated to 8)
        if shape.ndim != 1 or shape.dtype.kind not in "iu":
            raise bad_file(
                "tensor", self.path, f"the shape attribute {shape.tolist()} ({shape.dtype}) is not integers"
            )
        if n.ndim != 0 or n.dtype.kind not in "iu":
            raise bad_file("tensor", self.path, f"the n attribute {n.tolist()} ({n.dtype}) is not an integer")
        self.shape, self.n = tuple(int(d) for d in shape), int(n)
        if base != 0:
            raise bad_file("tensor", self.path, f"index_base is {base}; files store 0-based indices")
        c, v = f["coords"], f["values"]
        if c.dtype.kind not in "iu":
            raise bad_file("tensor", self.path, f"coords of dtype {c.dtype}; integer indices expected")
        if v.dtype.kind not in "iuf":
            raise bad_file("tensor", self.path, f"values of dtype {v.dtype}; numbers expected")
        if len(self.shape) < 2 or min(self.shape) < 1:
            raise bad_file("tensor", self.path, f"bad shape attribute {self.shape}")
        if c.ndim != 2 or c.shape[1] != len(self.shape):
            raise bad_file(
                "tensor", self.path, f"coords of shape {c.shape} for a {len(self.shape)}-mode tensor"
            )
        if c.shape[0] != self.n or v.shape != (self.n,):
            raise bad_file(
                "tensor",
                self.path,
                f"attribute n = {self.n} but coords has {c.shape[0]} rows and values {v.shape[0]}",
            )
        if self.n == 0:
            raise bad_file("tensor", self.path, "the tensor has no entries")
        self.n_modes = len(self.shape)
        self.chunk_rows = c.chunks[0] if c.chunks else TENSOR_CHUNK_ROWS

    def __repr__(self):
        return f"TensorReader({self.path!r}, shape={self.shape}, n={self.n}, binary={self.binary})"

    def read(self, start=0, stop=None):
        """Rows start..stop-1 as (coords (m, K) int64, values (m,) float64), checked."""
        stop = self.n if stop is None else min(int(stop), self.n)
        try:
            coords = np.asarray(self._file["coords"][start:stop], dtype=np.int64)
            values = np.asarray(self._file["values"][start:stop], dtype=np.float64)
        except (OSError, RuntimeError) as exc:
            raise bad_file("tensor", self.path, f"rows {start}..{stop - 1} cannot be read ({exc})") from exc
        bad = np.nonzero(((coords < 0) | (coords >= np.asarray(self.shape))).any(1))[0]
        if bad.size:
            r = int(bad[0])
            raise bad_file(
                "tensor",
                self.path,
                f"index {coords[r].tolist()} at row {start + r} is outside shape {self.shape}",
            )
        bad = np.nonzero(~np.isfinite(values))[0]
        if bad.size:
            raise bad_file("tensor", self.path, f"non-finite value at row {start + int(bad[0])}")
        if self.binary:
            bad = np.nonzero((values != 0.0) & (values != 1.0))[0]
            if bad.size:
                raise bad_file("tensor", self.path, f"non-binary value at row {start + int(bad[0])}")
        return coords, values

    def values(self, start=0, stop=None):
        """The values of rows start..stop-1 (float64), unchecked: a pass over the values alone."""
        stop = self.n if stop is None else min(int(stop), self.n)
        try:
            return np.asarray(self._file["values"][start:stop], dtype=np.float64)
        except (OSError, RuntimeError) as exc:
            raise bad_file("tensor", self.path, f"rows {start}..{stop - 1} cannot be read ({exc})") from exc

    def blocks(self, rows=None, start=0):
        """Yield (first_row, coords, values) for consecutive blocks of whole chunks."""
        rows = self.chunk_rows if rows is None else max(1, -(-int(rows) // self.chunk_rows)) * self.chunk_rows
        for lo in range(int(start), self.n, rows):
            coords, values = self.read(lo, lo + rows)
            yield lo, coords, values


def read_tensor(path):
    """The whole tensor of an HDF5 file as ``(coords, values, shape)`` (for small files)."""
    with TensorReader(path) as r:
        coords, values = r.read()
        return coords, values, r.shape
