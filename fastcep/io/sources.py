"""Inputs read once, from their first byte: pipes, FIFOs, ``/dev/stdin`` and devices included.

A pipe, a FIFO, ``/dev/stdin`` or a character device gives its bytes once: what is read is gone.
So the probe of what such a source holds (``head``, which ``kinds.file_kind`` reads) keeps it open
and keeps the bytes it read, and the reader that opens it next (``open_input``) gets those bytes
first and then the rest of the same stream: every line arrives. A regular file is opened afresh
each time. HDF5 is read by seeking, which a stream cannot do: ``refuse_stream`` says so.

``open_input`` also reads gzip-compressed text (known by its first bytes, whatever the file's
name) as the text it holds, and leaves out a UTF-8 byte-order mark at the start.
"""

import gzip
import io
import os
import stat
import threading
import zlib

from .files import FileFormatError

#: the bytes a probe reads (``head``)
HEAD_BYTES = 8192
GZIP_MAGIC = b"\x1f\x8b"
BOM = b"\xef\xbb\xbf"
#: where HDF5 looks for its signature (the file's start, then a user block of 512 bytes times a power of 2)
_HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"
_HDF5_OFFSETS = (0, 512, 1024, 2048, 4096)

_lock = threading.Lock()
#: (st_dev, st_ino) of a stream -> (its open file, the bytes its probe read)
_held = {}


def stream_words(path):
    """What ``path`` is if it cannot be read twice ("a pipe", "a FIFO", "a character device",
    "a socket"), in words; None for a regular file, a block device, a folder or a missing path."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    if stat.S_ISFIFO(mode):
        try:
            named = stat.S_ISFIFO(os.lstat(path).st_mode)
        except OSError:
            named = False
        return "a FIFO" if named else "a pipe"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return None


def _key(path):
    st = os.stat(path)
    return st.st_dev, st.st_ino


def _read_up_to(fh, n):
    """Up to ``n`` bytes of ``fh``, fewer only at its end (a pipe's reads return what it holds)."""
    parts, got = [], 0
    while got < n:
        chunk = fh.read(n - got)
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def head(path, n=HEAD_BYTES):
    """The first ``n`` bytes of ``path`` (fewer if it is shorter), as stored (not decompressed).
    A stream's are kept, with the stream open, for the reader that opens it next."""
    path = os.fspath(path)
    if stream_words(path) is None:
        with open(path, "rb") as fh:
            return fh.read(n)
    with _lock:
        key = _key(path)
        held = _held.get(key)
        if held is None:
            fh = open(path, "rb", buffering=0)
            try:
                held = (fh, _read_up_to(fh, HEAD_BYTES))
            except BaseException:
                fh.close()
                raise
            _held[key] = held
    return held[1][:n]


def close_held():
    """Close the streams a probe read from and no reader took (a command that refused its input):
    their writers see the pipe closed."""
    with _lock:
        held = list(_held.values())
        _held.clear()
    for fh, _ in held:
        fh.close()


def is_hdf5_head(data):
    """Whether bytes read from a file's start carry HDF5's signature."""
    return any(data[k : k + len(_HDF5_MAGIC)] == _HDF5_MAGIC for k in _HDF5_OFFSETS)


def refuse_stream(path, what):
    """Raise ``FileFormatError`` if ``path`` is a stream (``stream_words``): ``what`` (say "a
    tensor file") is HDF5, which is read by seeking."""
    words = stream_words(path)
    if words is not None:
        raise FileFormatError(
            f"{os.fspath(path)!r} is {words}, but {what} is HDF5, which is read by seeking: write it to a "
            "file and give that file's path."
        )


class _Replay(io.RawIOBase):
    """The bytes a probe read, then the rest of the stream it read them from."""

    def __init__(self, first, fh):
        super().__init__()
        self._first = memoryview(first)
        self._fh = fh

    def readable(self):
        return True

    def readinto(self, buf):
        if len(self._first):
            n = min(len(buf), len(self._first))
            buf[:n] = self._first[:n]
            self._first = self._first[n:]
            return n
        return self._fh.readinto(buf)

    def fileno(self):
        return self._fh.fileno()

    def close(self):
        if not self.closed:
            self._fh.close()
        super().close()


class _Gunzip(io.RawIOBase):
    """The text of gzip-compressed bytes; damaged or cut-short data is a ``FileFormatError``."""

    def __init__(self, raw, path):
        super().__init__()
        self._raw = raw
        self._gz = gzip.GzipFile(fileobj=raw, mode="rb")
        self._path = path

    def readable(self):
        return True

    def readinto(self, buf):
        try:
            return self._gz.readinto(buf)
        except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
            why = str(exc) if not isinstance(exc, EOFError) else "it ends before its end-of-stream marker"
            raise FileFormatError(
                f"{self._path!r} is gzip-compressed and cannot be decompressed: {why}; check the file "
                "with `gzip -t`."
            ) from None

    def close(self):
        if not self.closed:
            self._gz.close()
            self._raw.close()
        super().close()


def _open_raw(path):
    """``path`` opened for reading from its first byte (a stream: the probe's bytes first)."""
    if stream_words(path) is None:
        return open(path, "rb")
    head(path)  # (the stream's first bytes, held if no probe has read them yet)
    with _lock:
        fh, first = _held.pop(_key(path))
    return io.BufferedReader(_Replay(first, fh))


def open_input(path):
    """A binary file object that reads ``path`` once from its first byte, whatever it is (a
    regular file, a pipe, a FIFO, ``/dev/stdin``, a device); gzip-compressed data decompressed,
    a UTF-8 byte-order mark at the start left out. Close it (``with``) when done."""
    path = os.fspath(path)
    fh = _open_raw(path)
    try:
        if fh.peek(2)[:2] == GZIP_MAGIC:
            fh = io.BufferedReader(_Gunzip(fh, path))
        if fh.peek(len(BOM))[: len(BOM)] == BOM:
            fh.read(len(BOM))
    except BaseException:
        fh.close()
        raise
    return fh


def open_text_input(path):
    """``open_input`` as UTF-8 text with newlines untranslated (as the ``csv`` module asks)."""
    return io.TextIOWrapper(open_input(path), encoding="utf-8", newline="")


def decompressed_head(data, n=HEAD_BYTES):
    """The text bytes at the start of a file whose first bytes are ``data``: gzip's decompressed
    (up to ``n``; None if they cannot be), else ``data`` itself; a byte-order mark left out."""
    if data[:2] == GZIP_MAGIC:
        try:
            data = zlib.decompressobj(wbits=31).decompress(data, n)
        except zlib.error:
            return None
    return data[len(BOM) :] if data.startswith(BOM) else data
