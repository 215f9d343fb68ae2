"""Sparse-row files: labelled rows of a sparse matrix in HDF5 (CSR), read and written in blocks of
rows, for regression data of any length (``fastcep convert`` writes them from svmlight text or a
hashed CSV; ``fastcep glm fit``, ``evaluate`` and ``stream`` read them).

Layout (format "fastcep-csr", version 1): ``indptr`` (n + 1,) int64, ``indices`` (nnz,) int32 (int64
beyond 2**31 columns), ``data`` (nnz,) float64, ``y`` (n,) float64, each chunked; root attributes
``format``, ``format_version``, ``n_rows``, ``n_features``, ``nnz`` and ``source`` (what it was
converted from). Each row's indices are sorted and distinct, its values finite and nonzero.
``CSRWriter`` appends blocks of rows (the file appears, renamed from a temporary file, only when
it is complete); ``CSRReader`` owns the open file, checks its metadata on open and every block it
reads, and reads rows by ranges, never the whole file unless asked.
"""

import os

import numpy as np
import scipy.sparse as sp

from .._validation import check_int
from .files import AtomicH5, FileFormatError, H5Owner, bad_file, open_h5
from .formats import CSR_FORMAT
from .svmlight import SparseRows

CSR_FORMAT_VERSION = 1
#: rows per HDF5 chunk of ``indptr`` and ``y``; nonzeros per chunk of ``indices`` and ``data``
CSR_CHUNK_ROWS = 1 << 16
CSR_CHUNK_NNZ = 1 << 20
#: the kind named in the errors ("... is not a valid fastcep sparse-row file: ...")
KIND = "sparse-row"


class CSRWriter:
    """Write labelled sparse rows to an HDF5 CSR file in appended blocks; the file appears only on
    success.

    ``with CSRWriter(path, n_features=None) as w: w.append(X, y)``: X a scipy.sparse matrix or
    array (any format; made CSR with sorted, summed indices), y (m,) finite labels. ``n_features``
    None: the width is the largest column + 1, known at close (blocks may then be of any width).
    On any error, or if the ``with`` block raises, the temporary file is removed and ``path`` is
    left as it was.
    """

    def __init__(self, path, n_features=None, source=""):
        self.path = os.fspath(path)
        if n_features is not None:
            n_features = check_int(n_features, "n_features", "CSRWriter", low=1)
        self.n_features = n_features
        self.source = str(source)
        self.n = self.nnz = 0
        self._width = 0  # (largest column + 1 so far)
        self._file = self._atomic = None

    def __enter__(self):
        self._atomic = AtomicH5(self.path)
        f = self._file = self._atomic.__enter__()
        wide = self.n_features is None or self.n_features > np.iinfo(np.int32).max
        f.create_dataset("indptr", data=np.zeros(1, np.int64), maxshape=(None,), chunks=(CSR_CHUNK_ROWS,))
        f.create_dataset("y", shape=(0,), maxshape=(None,), dtype=np.float64, chunks=(CSR_CHUNK_ROWS,))
        index_type = np.int64 if wide else np.int32
        f.create_dataset("indices", shape=(0,), maxshape=(None,), dtype=index_type, chunks=(CSR_CHUNK_NNZ,))
        f.create_dataset("data", shape=(0,), maxshape=(None,), dtype=np.float64, chunks=(CSR_CHUNK_NNZ,))
        return self

    def append(self, X, y):
        """Append a block of rows: X (m, width) sparse, y (m,)."""
        if not sp.issparse(X):
            raise TypeError(f"CSRWriter.append: X must be scipy.sparse, not {type(X).__name__}.")
        X = sp.csr_array(X, dtype=np.float64)
        X.sum_duplicates()
        X.eliminate_zeros()
        y = np.asarray(y, dtype=np.float64)
        m = X.shape[0]
        if y.shape != (m,):
            raise ValueError(f"CSRWriter.append: y of shape {y.shape} for {m} rows.")
        if self.n_features is not None and X.shape[1] > self.n_features:
            cols = X.indices[X.indices >= self.n_features]
            if cols.size:
                raise ValueError(
                    f"CSRWriter.append: column {int(cols[0])} is beyond the file's {self.n_features} columns."
                )
        for name, values in (("value", X.data), ("label", y)):
            bad = np.flatnonzero(~np.isfinite(values))
            if bad.size:
                row = int(bad[0]) if name == "label" else int(np.searchsorted(X.indptr, bad[0], "right") - 1)
                raise ValueError(f"CSRWriter.append: a non-finite {name} in row {self.n + row}.")
        if m == 0:
            return
        f = self._file
        nnz = X.nnz
        f["indptr"].resize((self.n + m + 1,))
        f["indptr"][self.n + 1 :] = self.nnz + X.indptr[1:]
        f["y"].resize((self.n + m,))
        f["y"][self.n :] = y
        if nnz:
            f["indices"].resize((self.nnz + nnz,))
            f["indices"][self.nnz :] = X.indices
            f["data"].resize((self.nnz + nnz,))
            f["data"][self.nnz :] = X.data
            self._width = max(self._width, int(X.indices.max()) + 1)
        self._atomic.check()  # (a full disk: stop at once)
        self.n += m
        self.nnz += nnz

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None and self.n == 0:
            self._atomic.__exit__(ValueError, None, None)  # (removes the temporary file)
            raise ValueError(f"CSRWriter: no rows written to {self.path!r}.")
        if exc_type is None:
            f = self._file
            self.n_features = self.n_features if self.n_features is not None else max(self._width, 1)
            f.attrs["format"] = CSR_FORMAT
            f.attrs["format_version"] = CSR_FORMAT_VERSION
            f.attrs["n_rows"] = self.n
            f.attrs["n_features"] = self.n_features
            f.attrs["nnz"] = self.nnz
            f.attrs["source"] = self.source
        return self._atomic.__exit__(exc_type, exc, tb)  # (renames, or removes the temporary file)


def write_csr(path, X, y, n_features=None, source=""):
    """Write labelled sparse rows X (n, d), y (n,) to ``path`` (atomically); ``n_features``
    defaults to X's width."""
    with CSRWriter(path, X.shape[1] if n_features is None else n_features, source) as w:
        X = sp.csr_array(X)
        for lo in range(0, X.shape[0], CSR_CHUNK_ROWS):
            w.append(X[lo : lo + CSR_CHUNK_ROWS], np.asarray(y)[lo : lo + CSR_CHUNK_ROWS])
    return w.n, w.n_features


class CSRReader(H5Owner):
    """An open sparse-row file; reads rows by ranges (``read``) or blocks (``blocks``), checked.

    Attributes: ``n`` (rows), ``n_features``, ``nnz``, ``source``. Use as a context manager or
    call ``close()``.
    """

    def __init__(self, path):
        self.path = os.fspath(path)
        self._file = open_h5(self.path, KIND, "CSRReader")
        try:
            self._check()
        except BaseException:
            self._file.close()
            raise

    def _bad(self, why):
        return bad_file(KIND, self.path, why)

    def _check(self):
        f = self._file
        fmt = f.attrs.get("format")
        if fmt != CSR_FORMAT:
            raise self._bad(f"format attribute is {fmt!r}, not {CSR_FORMAT!r}")
        version = int(f.attrs.get("format_version", -1))
        if version != CSR_FORMAT_VERSION:
            raise self._bad(f"format version {version}, this fastcep reads {CSR_FORMAT_VERSION}")
        for name in ("indptr", "indices", "data", "y"):
            if name not in f or f[name].ndim != 1:
                raise self._bad(f"missing or not 1-D dataset {name!r}")
        try:
            n, d, nnz = (np.asarray(f.attrs[k]) for k in ("n_rows", "n_features", "nnz"))
        except KeyError as exc:
            raise self._bad(f"missing attribute {exc}") from None
        if any(a.ndim != 0 or a.dtype.kind not in "iu" for a in (n, d, nnz)):
            raise self._bad("its n_rows, n_features and nnz attributes are not integers")
        self.n, self.n_features, self.nnz = int(n), int(d), int(nnz)
        self.source = str(f.attrs.get("source", ""))
        shapes = (f["indptr"].shape[0], f["y"].shape[0], f["indices"].shape[0], f["data"].shape[0])
        if shapes != (self.n + 1, self.n, self.nnz, self.nnz) or self.n < 1 or self.n_features < 1:
            raise self._bad(
                f"{self.n} rows, {self.n_features} columns and {self.nnz} nonzeros in its attributes, but "
                f"datasets of lengths indptr {shapes[0]}, y {shapes[1]}, indices {shapes[2]}, "
                f"data {shapes[3]}"
            )
        if f["indices"].dtype.kind not in "iu" or f["indptr"].dtype.kind not in "iu":
            raise self._bad("its indptr and indices are not integers")

    def __repr__(self):
        return f"CSRReader({self.path!r}, n={self.n}, n_features={self.n_features}, nnz={self.nnz})"

    def read(self, start=0, stop=None):
        """Rows start..stop-1 as ``SparseRows`` (X of width ``n_features``), checked: pointers
        that rise, indices within the width, sorted and distinct in each row, finite numbers."""
        stop = self.n if stop is None else min(int(stop), self.n)
        start = min(int(start), stop)
        f = self._file
        try:
            ptr = np.asarray(f["indptr"][start : stop + 1], dtype=np.int64)
            lo, hi = int(ptr[0]), int(ptr[-1])
            if lo < 0 or hi > self.nnz or np.any(np.diff(ptr) < 0):
                why = f"its row pointers of rows {start}..{stop - 1} do not rise within 0..{self.nnz}"
                raise self._bad(why)
            indices = np.asarray(f["indices"][lo:hi], dtype=np.int64)
            data = np.asarray(f["data"][lo:hi], dtype=np.float64)
            y = np.asarray(f["y"][start:stop], dtype=np.float64)
        except (OSError, RuntimeError) as exc:
            raise self._bad(f"rows {start}..{stop - 1} cannot be read ({exc})") from exc
        ptr -= lo
        row_of = np.repeat(np.arange(stop - start), np.diff(ptr))
        within = np.ones(indices.size, dtype=bool)
        within[ptr[1:-1][ptr[1:-1] < indices.size]] = False  # (a row's first index needs no order)
        checks = (
            ((indices < 0) | (indices >= self.n_features), f"a column outside 0..{self.n_features - 1}"),
            (within & (np.diff(indices, prepend=-1) <= 0), "indices not sorted and distinct"),
            (~np.isfinite(data), "a non-finite value"),
        )
        for bad, what in checks:
            if np.any(bad):
                raise self._bad(f"row {start + int(row_of[np.argmax(bad)])} holds {what}")
        if not np.all(np.isfinite(y)):
            raise self._bad(f"row {start + int(np.argmax(~np.isfinite(y)))} has a non-finite label")
        X = sp.csr_array((data, indices, ptr), shape=(stop - start, self.n_features))
        X.has_sorted_indices = True
        return SparseRows(start, X, y, None)

    def blocks(self, rows=CSR_CHUNK_ROWS, start=0):
        """Yield ``SparseRows`` of ``rows`` rows (the last shorter) from row ``start`` on."""
        rows = check_int(rows, "rows", "CSRReader.blocks", low=1)
        for lo in range(int(start), self.n, rows):
            yield self.read(lo, lo + rows)


def read_csr(path):
    """All rows of a sparse-row file as ``SparseRows``."""
    with CSRReader(path) as r:
        return r.read()


def svmlight_to_csr(src, dst, n_features=None, index_base=0, rows=None):
    """Convert an svmlight / libsvm file to a sparse-row file, block by block (memory bounded by
    a block of ``rows`` rows); errors name the text's line, and ``dst`` is written only if the
    whole file converts.

    Returns
    -------
    (n_rows, n_features, nnz)
    """
    from .svmlight import SVMLIGHT_BLOCK_ROWS, iter_svmlight

    if n_features is not None:
        n_features = check_int(n_features, "n_features", "svmlight_to_csr", low=1)
    blocks = iter_svmlight(src, rows or SVMLIGHT_BLOCK_ROWS, n_features, index_base)
    with CSRWriter(dst, n_features, source=f"svmlight:{os.path.basename(os.fspath(src))}") as w:
        for part in blocks:
            w.append(part.X, part.y)
        if w.n == 0:
            raise FileFormatError(
                f"{os.fspath(src)!r} holds no rows (only blank lines and comments; an svmlight line is "
                "'label index:value ...'): nothing to write."
            )
    return w.n, w.n_features, w.nnz
