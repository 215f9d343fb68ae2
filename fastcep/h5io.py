"""HDF5 files of fastcep: fitted CP models and sparse tensors (DESIGN.md section 4).

A model file holds, under the root group, the attributes ``format`` ("fastcep-cp-model"),
``format_version``, ``model``, ``method``, ``covariance``, ``rank``, ``shape``, ``n_iter``,
``converged``, ``stop_reason``, ``seed`` and ``options`` (JSON), and the datasets ``means/<k>``
(d_k, R), ``covs/<k>`` (d_k, R, R) or (d_k, R), ``noise`` (a, b) for cp_gaussian, and the trace
under ``trace/``. Files are written to a temporary file beside the target and renamed over it,
so a killed writer never leaves a half-written model behind.

A tensor file holds ``coords`` (n, K) int32 or int64, 0-based, and ``values`` (n,) float64,
both chunked along n (``TENSOR_CHUNK_ROWS`` rows), with the attributes ``format``
("fastcep-tensor"), ``format_version``, ``shape``, ``index_base`` (always 0), ``n`` and
``binary``. ``TensorWriter`` appends blocks (the file appears, renamed from a temporary file,
only when it is complete); ``TensorReader`` owns the open file, checks its metadata on open and
every block it reads, and yields blocks aligned to the chunking.
"""

import json
import os
import re
import tempfile

import h5py
import numpy as np

MODEL_FORMAT = "fastcep-cp-model"
MODEL_FORMAT_VERSION = 1
_TRACE_FIELDS = ("elapsed", "change", "skipped", "paper_change", "damping", "eval_metric")
#: written too, and read when present (files written before it have none: NaN on load)
_OPTIONAL_TRACE_FIELDS = ("elbo",)


def atomic_h5(path, write):
    """Call ``write(h5py.File)`` on a temporary file in the target's folder, then rename it to ``path``."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".h5", dir=folder)
    os.close(fd)
    try:
        with h5py.File(tmp, "w") as f:
            write(f)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def _json_default(obj):
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, (tuple, np.ndarray)):
        return list(obj)
    return repr(obj)


def save_model(result, path):
    """Write a ``CPResult`` to ``path`` (HDF5, atomically); read it back with ``load_model``."""
    from .cp import CPResult

    if not isinstance(result, CPResult):
        raise TypeError(f"save_model: expected a CPResult, got {type(result).__name__}.")

    def write(f):
        f.attrs["format"] = MODEL_FORMAT
        f.attrs["format_version"] = MODEL_FORMAT_VERSION
        f.attrs["model"] = result.model
        f.attrs["method"] = result.method
        f.attrs["covariance"] = result.covariance
        f.attrs["rank"] = result.rank
        f.attrs["shape"] = np.asarray(result.shape, dtype=np.int64)
        f.attrs["n_iter"] = result.n_iter
        f.attrs["converged"] = bool(result.converged)
        f.attrs["stop_reason"] = result.stop_reason
        seed = result.options.get("seed")
        f.attrs["seed"] = json.dumps(seed if isinstance(seed, (int, type(None))) else repr(seed))
        f.attrs["options"] = json.dumps(result.options, default=_json_default)
        gm, gc = f.create_group("means"), f.create_group("covs")
        for k, (m, c) in enumerate(zip(result.posterior.means, result.posterior.covs, strict=True)):
            gm.create_dataset(str(k), data=m)
            gc.create_dataset(str(k), data=c)
        if result.posterior.noise is not None:
            f.create_dataset("noise", data=np.asarray(result.posterior.noise, dtype=np.float64))
        gt = f.create_group("trace")
        for name in _TRACE_FIELDS + _OPTIONAL_TRACE_FIELDS:
            gt.create_dataset(name, data=np.asarray(getattr(result.trace, name)))

    atomic_h5(path, write)


def _bad_file(path, why):
    return ValueError(f"load_model: {os.fspath(path)!r} is not a valid fastcep model file: {why}.")


def load_model(path):
    """Read a model written by ``CPResult.save``; returns a ``CPResult`` (without its message state).

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        If the file is not HDF5, not a fastcep model, of another format version, or incomplete.
    """
    from .cp import POINT_METHODS, CPResult
    from .results import trace_from_lists

    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"load_model: no such file {path!r}.")
    try:
        f = h5py.File(path, "r")
    except OSError as exc:
        raise _bad_file(path, f"cannot be opened as HDF5 ({exc})") from exc
    with f:
        if f.attrs.get("format") != MODEL_FORMAT:
            raise _bad_file(path, f"format attribute is {f.attrs.get('format')!r}, not {MODEL_FORMAT!r}")
        version = int(f.attrs.get("format_version", -1))
        if version != MODEL_FORMAT_VERSION:
            raise _bad_file(path, f"format version {version}, this fastcep reads {MODEL_FORMAT_VERSION}")
        try:
            shape = tuple(int(d) for d in f.attrs["shape"])
            rank = int(f.attrs["rank"])
            covariance = str(f.attrs["covariance"])
            model = str(f.attrs["model"])
            means = [np.asarray(f["means"][str(k)], dtype=np.float64) for k in range(len(shape))]
            covs = [np.asarray(f["covs"][str(k)], dtype=np.float64) for k in range(len(shape))]
            noise = tuple(float(v) for v in f["noise"][()]) if "noise" in f else None
            lists = [np.asarray(f["trace"][name]) for name in _TRACE_FIELDS]
            lists += [
                np.asarray(f["trace"][name]) if name in f["trace"] else None
                for name in _OPTIONAL_TRACE_FIELDS
            ]
            options = json.loads(f.attrs["options"])
            attrs = {k: f.attrs[k] for k in ("method", "n_iter", "converged", "stop_reason")}
        except (KeyError, OSError, ValueError) as exc:
            raise _bad_file(path, f"missing or unreadable content ({exc})") from exc
    cov_shape = (rank, rank) if covariance == "full" else (rank,)
    for k, d in enumerate(shape):
        if means[k].shape != (d, rank) or covs[k].shape != (d, *cov_shape):
            raise _bad_file(path, f"mode {k} arrays have shapes {means[k].shape}, {covs[k].shape}")
        if not (np.all(np.isfinite(means[k])) and np.all(np.isfinite(covs[k]))):
            raise _bad_file(path, f"mode {k} holds non-finite numbers")
    if model == "cp_gaussian" and noise is None and str(attrs["method"]) not in POINT_METHODS:
        raise _bad_file(path, "cp_gaussian model without a noise posterior")
    options["shape"] = shape
    return CPResult(
        model,
        str(attrs["method"]),
        covariance,
        rank,
        shape,
        np.concatenate(means),
        np.concatenate(covs),
        noise,
        int(attrs["n_iter"]),
        bool(attrs["converged"]),
        str(attrs["stop_reason"]),
        trace_from_lists(*[None if a is None else list(a) for a in lists]),
        None,
        options,
    )


# ---------------------------------------------------------------------------- tensor files
TENSOR_FORMAT = "fastcep-tensor"
TENSOR_FORMAT_VERSION = 1
#: rows per HDF5 chunk of a tensor file (coords and values chunked alike along n)
TENSOR_CHUNK_ROWS = 1 << 16


class TensorFileError(ValueError):
    """A tensor file that is missing, corrupt, of another format or inconsistent."""


def _tensor_error(path, why):
    return TensorFileError(f"{os.fspath(path)!r} is not a valid fastcep tensor file: {why}.")


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
        self.shape = None if shape is None else tuple(int(d) for d in shape)
        if self.shape is not None and (len(self.shape) < 2 or min(self.shape) < 1):
            raise ValueError(f"TensorWriter: shape must have >= 2 positive sizes, got {shape!r}.")
        self.K = len(self.shape) if self.shape is not None else n_modes
        self.binary = bool(binary)
        self.chunk_rows = int(chunk_rows)
        self.n = 0
        self._max = None
        self._file = None
        self._tmp = None

    def __enter__(self):
        folder = os.path.dirname(os.path.abspath(self.path))
        fd, self._tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".h5", dir=folder)
        os.close(fd)
        self._file = h5py.File(self._tmp, "w")
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
        if self._max is None:
            self._create(coords.shape[1])
        if coords.shape[1] != self.K:
            raise ValueError(
                f"TensorWriter.append: {coords.shape[1]} columns, the tensor has {self.K} modes."
            )
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
        self.n += m
        np.maximum(self._max, coords.max(0), out=self._max)

    def __exit__(self, exc_type, exc, tb):
        try:
            if exc_type is None:
                if self.n == 0:
                    raise ValueError(f"TensorWriter: no entries written to {self.path!r}.")
                shape = self.shape if self.shape is not None else tuple(int(v) + 1 for v in self._max)
                f = self._file
                f.attrs["format"] = TENSOR_FORMAT
                f.attrs["format_version"] = TENSOR_FORMAT_VERSION
                f.attrs["shape"] = np.asarray(shape, dtype=np.int64)
                f.attrs["index_base"] = 0
                f.attrs["n"] = self.n
                f.attrs["binary"] = self.binary
                self.shape = shape
            self._file.close()
            if exc_type is None:
                with open(self._tmp, "rb") as fh:
                    os.fsync(fh.fileno())
                os.replace(self._tmp, self.path)
        finally:
            if os.path.exists(self._tmp):
                os.remove(self._tmp)
        return False


def write_tensor(path, coords, values, shape=None, binary=False, chunk_rows=TENSOR_CHUNK_ROWS):
    """Write 0-based ``coords`` (n, K) and ``values`` (n,) to an HDF5 tensor file (atomically)."""
    coords = np.asarray(coords)
    with TensorWriter(path, shape, binary=binary, chunk_rows=chunk_rows) as w:
        for lo in range(0, len(coords), 1 << 20):
            w.append(coords[lo : lo + (1 << 20)], np.asarray(values)[lo : lo + (1 << 20)])
    return w.shape


class TensorReader:
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
        try:
            self._file = h5py.File(self.path, "r")
        except OSError as exc:
            raise _tensor_error(self.path, f"cannot be opened as HDF5 ({exc})") from exc
        try:
            self._check()
        except BaseException:
            self._file.close()
            raise

    def _check(self):
        f = self._file
        if f.attrs.get("format") != TENSOR_FORMAT:
            raise _tensor_error(
                self.path, f"format attribute is {f.attrs.get('format')!r}, not {TENSOR_FORMAT!r}"
            )
        version = int(f.attrs.get("format_version", -1))
        if version != TENSOR_FORMAT_VERSION:
            raise _tensor_error(
                self.path, f"format version {version}, this fastcep reads {TENSOR_FORMAT_VERSION}"
            )
        if "coords" not in f or "values" not in f:
            raise _tensor_error(self.path, "missing 'coords' or 'values' dataset")
        try:
            self.shape = tuple(int(d) for d in f.attrs["shape"])
            self.n = int(f.attrs["n"])
            base = int(f.attrs["index_base"])
            self.binary = bool(f.attrs.get("binary", False))
        except (KeyError, TypeError, ValueError) as exc:
            raise _tensor_error(self.path, f"missing or bad attribute ({exc})") from exc
        if base != 0:
            raise _tensor_error(self.path, f"index_base is {base}; files store 0-based indices")
        c, v = f["coords"], f["values"]
        if len(self.shape) < 2 or min(self.shape) < 1:
            raise _tensor_error(self.path, f"bad shape attribute {self.shape}")
        if c.ndim != 2 or c.shape[1] != len(self.shape):
            raise _tensor_error(self.path, f"coords of shape {c.shape} for a {len(self.shape)}-mode tensor")
        if c.shape[0] != self.n or v.shape != (self.n,):
            raise _tensor_error(
                self.path, f"attribute n = {self.n} but coords has {c.shape[0]} rows and values {v.shape[0]}"
            )
        if self.n == 0:
            raise _tensor_error(self.path, "the tensor has no entries")
        self.n_modes = len(self.shape)
        self.chunk_rows = c.chunks[0] if c.chunks else TENSOR_CHUNK_ROWS

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def close(self):
        self._file.close()

    def __repr__(self):
        return f"TensorReader({self.path!r}, shape={self.shape}, n={self.n}, binary={self.binary})"

    def read(self, start=0, stop=None):
        """Rows start..stop-1 as (coords (m, K) int64, values (m,) float64), checked."""
        stop = self.n if stop is None else min(int(stop), self.n)
        try:
            coords = np.asarray(self._file["coords"][start:stop], dtype=np.int64)
            values = np.asarray(self._file["values"][start:stop], dtype=np.float64)
        except (OSError, RuntimeError) as exc:
            raise _tensor_error(self.path, f"rows {start}..{stop - 1} cannot be read ({exc})") from exc
        bad = np.nonzero(((coords < 0) | (coords >= np.asarray(self.shape))).any(1))[0]
        if bad.size:
            r = int(bad[0])
            raise _tensor_error(
                self.path, f"index {coords[r].tolist()} at row {start + r} is outside shape {self.shape}"
            )
        bad = np.nonzero(~np.isfinite(values))[0]
        if bad.size:
            raise _tensor_error(self.path, f"non-finite value at row {start + int(bad[0])}")
        if self.binary:
            bad = np.nonzero((values != 0.0) & (values != 1.0))[0]
            if bad.size:
                raise _tensor_error(self.path, f"non-binary value at row {start + int(bad[0])}")
        return coords, values

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
