"""Sparse-row files: labelled rows of a sparse matrix in HDF5 (CSR), read and written in blocks of
rows, for regression data of any length (``fastcep convert`` writes them from svmlight text or a
hashed CSV; ``fastcep glm fit``, ``evaluate`` and ``stream`` read them).

Layout (format "fastcep-csr", version 1): ``indptr`` (n + 1,) int64, ``indices`` (nnz,) int32 (int64
beyond 2**31 columns), ``data`` (nnz,) float64, ``y`` (n,) float64, each chunked; root attributes
``format``, ``format_version``, ``n_rows``, ``n_features``, ``nnz`` and ``source`` (what it was
converted from). Each row's indices are sorted and distinct, its values finite and nonzero.
``CSRWriter`` appends blocks of rows (the file appears, renamed from a temporary file, only when
it is complete), their structure checked from the raw arrays first (``structure_problem``);
``CSRReader`` owns the open file, checks its metadata on open (the type and size of every
attribute and dataset, ``files.check_types``, and the row pointers' ends) and every block it
reads, and reads rows by ranges, never the whole file unless asked. A sparse-row file has no
digest (it is large, and read in blocks).
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


def _first(bad):
    """The position of the first True of a boolean array, or None."""
    hit = np.flatnonzero(bad)
    return int(hit[0]) if hit.size else None


def _compressed_problem(ptr, ind, n_data, major, minor, names, first):
    """Why compressed rows (or columns) are invalid: pointers ``ptr`` of ``major`` rows into
    ``ind`` (``n_data`` values), indices within 0..minor-1; ``names``: (a row's, an index's),
    rows numbered from ``first``; None if valid."""
    ptr, ind = np.asarray(ptr), np.asarray(ind)
    if ptr.ndim != 1 or ind.ndim != 1 or ptr.dtype.kind not in "iu" or ind.dtype.kind not in "iu":
        return "its indptr and indices are not 1-D integer arrays"
    if ptr.size != major + 1:
        return f"its indptr holds {ptr.size} pointers for {major} {names[0]}s"
    end = min(ind.size, n_data)
    ptr = ptr.astype(np.int64)
    r = _first(np.concatenate([[ptr[0] != 0], (np.diff(ptr) < 0) | (ptr[1:] > end)]))
    if r is not None:
        r = max(r - 1, 0)
        held = f"indptr[{r}] = {ptr[r]}, indptr[{r + 1}] = {ptr[r + 1]}"
        return f"the pointers of {names[0]} {first + r} ({held}) do not rise from 0 within its {end} indices"
    ind = ind[: ptr[-1]]
    k = _first((ind < 0) | (ind >= minor))
    if k is not None:
        r = int(np.searchsorted(ptr, k, "right") - 1)
        return f"{names[0]} {first + r} holds {names[1]} {int(ind[k])}, outside 0..{minor - 1}"
    return None


def structure_problem(X, first=0):
    """Why the structure of a scipy.sparse matrix ``X`` is invalid, read from its raw arrays (so
    that scipy's compiled routines never see it: a falling row pointer corrupts the heap in its
    sort): pointers that start at 0 and rise within the indices, indices within the shape; rows
    numbered from ``first``. None if valid."""
    m, d = X.shape
    if X.format == "csr":
        return _compressed_problem(X.indptr, X.indices, X.data.size, m, d, ("row", "column"), first)
    if X.format == "csc":
        return _compressed_problem(X.indptr, X.indices, X.data.size, d, m, ("column", "row"), 0)
    if X.format == "bsr":
        (R, C), blocks = X.blocksize, X.data.shape[0]
        names = ("block row", "block column")
        return _compressed_problem(X.indptr, X.indices, blocks, m // R, d // C, names, 0)
    if X.format == "coo":
        rows, cols = (np.asarray(a) for a in X.coords)
        k = _first((rows < 0) | (rows >= m) | (cols < 0) | (cols >= d))
        if k is not None:
            where = f"row {int(rows[k])}, column {int(cols[k])}"
            return f"its entry {k} is at {where}, outside its shape {(m, d)}"
    return None  # (dok, lil, dia: built through scipy's own checks)


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
        self.func = "CSRWriter.append"  # (what the errors of ``append`` start with)

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
            raise TypeError(f"{self.func}: X must be scipy.sparse, not {type(X).__name__}.")
        why = structure_problem(X, self.n)  # (before scipy's compiled code reads the structure)
        if why is not None:
            raise ValueError(f"{self.func}: X is not a valid sparse matrix: {why}.")
        X = sp.csr_array(X, dtype=np.float64)
        X.sum_duplicates()
        X.eliminate_zeros()
        y = np.asarray(y, dtype=np.float64)
        m = X.shape[0]
        if y.shape != (m,):
            raise ValueError(f"{self.func}: y of shape {y.shape} for {m} rows.")
        if self.n_features is not None and X.shape[1] > self.n_features:
            cols = X.indices[X.indices >= self.n_features]
            if cols.size:
                raise ValueError(
                    f"{self.func}: column {int(cols[0])} is beyond the file's {self.n_features} columns."
                )
        for name, values in (("value", X.data), ("label", y)):
            bad = np.flatnonzero(~np.isfinite(values))
            if bad.size:
                row = int(bad[0]) if name == "label" else int(np.searchsorted(X.indptr, bad[0], "right") - 1)
                raise ValueError(f"{self.func}: a non-finite {name} in row {self.n + row}.")
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
        w.func = "write_csr"
        if not sp.issparse(X):
            raise TypeError(f"write_csr: X must be scipy.sparse, not {type(X).__name__}.")
        why = structure_problem(X)
        if why is not None:
            raise ValueError(f"write_csr: X is not a valid sparse matrix: {why}.")
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
        except (OSError, RuntimeError, KeyError, TypeError, AttributeError, ValueError) as exc:
            self._file.close()
            if isinstance(exc, FileFormatError):
                raise
            raise self._bad(f"missing or unreadable content ({type(exc).__name__}: {exc})") from exc
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
        try:
            ends = (int(f["indptr"][0]), int(f["indptr"][self.n]))
        except (OSError, RuntimeError) as exc:
            raise self._bad(f"its row pointers cannot be read ({exc})") from exc
        if ends != (0, self.nnz):
            raise self._bad(
                f"its row pointers run from {ends[0]} to {ends[1]}, not from 0 to its {self.nnz} nonzeros"
            )

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
            r = _first(np.concatenate([[ptr[0] < 0], (np.diff(ptr) < 0) | (ptr[1:] > self.nnz)]))
            if r is not None:
                r = start + max(r - 1, 0)
                held = f"indptr[{r}] = {ptr[r - start]}, indptr[{r + 1}] = {ptr[r - start + 1]}"
                raise self._bad(f"the pointers of row {r} ({held}) do not rise within 0..{self.nnz}")
            lo, hi = int(ptr[0]), int(ptr[-1])
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
