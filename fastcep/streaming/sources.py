"""Where a stream's entries come from: arrays in memory, or an HDF5 tensor file read block by
block (the next block read by a background thread while the current one is computed)."""

import contextlib
import os

import numpy as np

from .. import _validation as V
from ..io.prefetch import read_ahead
from ..io.tensor import TensorReader
from ..tensor.layout import check_coords, check_values, entries_digest
from ..tensor.likelihoods import block_errors


class ArraySource:
    def __init__(self, coords, values, shape, likelihood, func):
        self.coords, self.shape = check_coords(coords, shape, func)
        self.values = check_values(values, len(self.coords), likelihood, func)
        if likelihood.binary:
            self.values = (self.values > 0).astype(np.float64)
        self.n = len(self.coords)

    def identity(self):
        """The digest of the stream's data (``entries_digest``): what a checkpoint is bound to."""
        return entries_digest(self.shape, [(self.coords, self.values)])

    def value_blocks(self):
        """The values, in blocks (for their mean and sd)."""
        return [self.values]

    def batches(self, batch_size, order_rng, start_batch):
        """Yield (batch index, coords, values) from ``start_batch`` on."""
        order = order_rng.permutation(self.n) if order_rng is not None else None
        n_batches = -(-self.n // batch_size)
        for b in range(start_batch, n_batches):
            lo, hi = b * batch_size, min(self.n, (b + 1) * batch_size)
            idx = order[lo:hi] if order is not None else slice(lo, hi)
            yield b, self.coords[idx], self.values[idx]

    def close(self):
        pass


class FileSource:
    """Blocks of whole chunks read by a background thread; batches cut from the stream order.
    With ``rows`` (lo, hi), only the file's entries lo..hi-1 (a shard of a cluster stream, read
    on its worker): a stream of hi - lo entries."""

    def __init__(self, path, model, likelihood, block_rows, rows=None):
        self.reader = TensorReader(path)
        self.shape = self.reader.shape
        self.lo, self.hi = (0, self.reader.n) if rows is None else (int(rows[0]), int(rows[1]))
        if not 0 <= self.lo <= self.hi <= self.reader.n:
            self.reader.close()
            raise ValueError(
                f"rows {self.lo}..{self.hi} are not within the {self.reader.n} entries of {path!r}."
            )
        self.n = self.hi - self.lo
        # a binary model's stream from a file not marked binary, or any other model's: its values
        # are checked block by block (by the likelihood's own check: counts, a Custom one's)
        self.model, self.likelihood = model, likelihood
        self.check_values = not likelihood.binary or not self.reader.binary
        chunk = self.reader.chunk_rows
        self.block_rows = max(1, -(-int(block_rows) // chunk)) * chunk

    def identity(self):
        """The digest of the file's entries (``entries_digest``; one pass over the file)."""
        if (self.lo, self.hi) == (0, self.reader.n):
            return entries_digest(self.shape, ((c, v) for _, c, v in self.reader.blocks(1 << 20)))
        step = 1 << 20
        blocks = (self.reader.read(lo, min(self.hi, lo + step)) for lo in range(self.lo, self.hi, step))
        return entries_digest(self.shape, blocks)

    def value_blocks(self):
        """The values, in blocks (one pass over the file's values)."""
        step = 1 << 22
        return (self.reader.values(lo, min(self.hi, lo + step)) for lo in range(self.lo, self.hi, step))

    def batches(self, batch_size, order_rng, start_batch):
        n_blocks = -(-self.n // self.block_rows)
        block_order = order_rng.permutation(n_blocks) if order_rng is not None else np.arange(n_blocks)
        within = [int(s) for s in order_rng.integers(0, 2**63, n_blocks)] if order_rng is not None else None
        sizes = np.array([min(self.block_rows, self.n - b * self.block_rows) for b in block_order])
        starts = np.concatenate([[0], np.cumsum(sizes)])  # stream-order position of each block
        first_row = start_batch * batch_size
        first_block = int(np.searchsorted(starts, first_row, side="right") - 1)
        todo = list(range(first_block, n_blocks))

        def read():
            for pos in todo:
                b = int(block_order[pos])
                lo = self.lo + b * self.block_rows
                coords, values = self.reader.read(lo, min(self.hi, lo + self.block_rows))
                if within is not None:
                    p = np.random.default_rng(within[pos]).permutation(len(values))
                    coords, values = coords[p], values[p]
                yield pos, coords, values

        buf_c, buf_v = [], []
        have = 0
        row = int(starts[first_block])  # stream position of the next buffered row
        b = start_batch
        with contextlib.closing(read_ahead(read())) as blocks:  # (closed: the reading thread stops)
            for _, coords, values in blocks:
                if row < first_row:  # drop the rows of the first block that were already done
                    skip = first_row - row
                    coords, values = coords[skip:], values[skip:]
                    row = first_row
                buf_c.append(coords)
                buf_v.append(values)
                have += len(values)
                while have >= batch_size:
                    c, v = np.concatenate(buf_c), np.concatenate(buf_v)
                    yield b, self._checked(c[:batch_size], v[:batch_size], row), v[:batch_size]
                    row += batch_size
                    b += 1
                    buf_c, buf_v, have = [c[batch_size:]], [v[batch_size:]], len(v) - batch_size
        if have:
            c, v = np.concatenate(buf_c), np.concatenate(buf_v)
            yield b, self._checked(c, v, row), v

    def _checked(self, coords, values, row):
        if not self.check_values:
            return coords
        if not self.likelihood.binary:
            try:
                self.likelihood.check(values, "values", "stream", len(values))
            except ValueError as exc:
                raise ValueError(
                    f"stream: model {self.model!r} ({self.likelihood!r}) refuses values of "
                    f"{self.reader.path!r} from stream position {row} on (rows counted from "
                    f"there{self._where()}): {exc}"
                ) from None
            return coords
        bad = block_errors(values)
        if bad.size:
            raise ValueError(
                f"stream: model {self.model!r} needs binary values; {self.reader.path!r} has "
                f"{float(values[bad[0]])!r} (stream position {row + int(bad[0])}{self._where()})."
            )
        return coords

    def _where(self):
        return f"; the file's entries {self.lo}..{self.hi - 1}" if self.lo else ""

    def close(self):
        self.reader.close()


def open_source(coords, values, shape, model, likelihood, batch_size, func):
    """The stream's source: an HDF5 tensor file (``coords`` a path, ``values`` None) or arrays;
    the values checked by the model's ``likelihood``."""
    if isinstance(coords, (str, os.PathLike)):
        if values is not None:
            path = os.fspath(coords)
            raise ValueError(
                f"{func}: 'values' comes from the tensor file {path!r}; do not pass it with a file."
            )
        if shape is not None:
            raise ValueError(f"{func}: 'shape' comes from the tensor file; do not pass it with a file.")
        return FileSource(coords, model, likelihood, block_rows=max(batch_size, 1 << 16))
    if values is None:
        raise V.param_error(
            "values",
            func,
            "the entries' values (with coords in memory; or pass a tensor file's path)",
            values,
            TypeError,
        )
    return ArraySource(coords, values, shape, likelihood, func)
