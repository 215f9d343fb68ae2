"""What every file fastcep writes shares: the atomic write, the checks before it, and the one
error class.

Every file is written to a temporary file beside its target and renamed over it when complete, so
a failed or killed writer never leaves a half-written file, and the previous file stays intact.

- **A full disk or a file-size limit** (``ulimit -f``) makes HDF5's own writes fail inside its
  cache, and the library then crashes the interpreter when the file is closed (a segmentation
  fault, measured). So HDF5 writes through a Python file object (h5py's ``fileobj`` driver): the
  first failed write is kept, the writes after it are dropped so that HDF5 can close cleanly,
  and the write ends with ``NoRoomError`` (an ``OSError``: one line, the file and the cause), the
  temporary file removed.
- **Temporary files** are named ``.tmp-fastcep-<pid>-*.h5``; one whose process is gone (a
  killed run) is removed by the next write into that folder.
- **Checksums.** Model files and checkpoints carry a SHA-256 digest of every dataset and
  attribute (``sign``), checked when they are read (``verify``): a flipped byte is an error, never
  changed numbers.
- **Permissions** follow the umask, as for any file the user creates (a temporary file is
  created 0600).
"""

import errno
import hashlib
import io
import os
import re
import stat
import tempfile

import h5py
import numpy as np

#: the prefix of every temporary file (followed by the writer's process id and a dash)
TMP_PREFIX = ".tmp-fastcep-"
_TMP_NAME = re.compile(re.escape(TMP_PREFIX) + r"(\d+)-.*\.h5$")


class FileFormatError(ValueError):
    """A file that is missing, corrupt, of another format or version, or inconsistent."""


class NoRoomError(OSError):
    """A file could not be written for want of room (a full disk, a file-size limit): nothing
    was written, and the previous file, if any, is intact."""


def bad_file(kind, path, why):
    """The one message form: "'path' is not a valid fastcep <kind> file: <why>."."""
    return FileFormatError(f"{os.fspath(path)!r} is not a valid fastcep {kind} file: {why}.")


def open_h5(path, kind, func):
    """An existing HDF5 file opened for reading: FileNotFoundError naming ``func`` if it is
    missing, FileFormatError (``bad_file``) if it is not HDF5."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{func}: no such file {path!r}.")
    if not os.path.isfile(path):
        why = "not a regular file (a pipe or a device?), and HDF5 is read by seeking: write it to a file"
        raise bad_file(kind, path, why)
    try:
        return h5py.File(path, "r")
    except OSError as exc:
        raise bad_file(kind, path, f"cannot be opened as HDF5 ({exc})") from exc


class H5Owner:
    """The owner of an open ``h5py.File`` (``self._file``): a context manager that closes it."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def close(self):
        self._file.close()


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process
        return True
    return True


def remove_stale_temporaries(folder):
    """Remove the temporary files in ``folder`` whose writing process is gone; returns their
    number."""
    removed = 0
    try:
        names = os.listdir(folder)
    except OSError:
        return 0
    for name in names:
        m = _TMP_NAME.match(name)
        if m and int(m.group(1)) != os.getpid() and not _alive(int(m.group(1))):
            try:
                os.remove(os.path.join(folder, name))
                removed += 1
            except OSError:
                pass
    return removed


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def same_file(a, b):
    """True if paths ``a`` and ``b`` name the same existing file (a link or another spelling
    included)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


#: what a path that exists and is not a regular file is, by ``stat.S_IFMT``
_SPECIAL = {
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFIFO: "a FIFO (a named pipe)",
    stat.S_IFSOCK: "a socket",
}


def special_file(path):
    """What ``path`` is if it exists and is neither a regular file nor a folder (following
    links: "a character device", "a FIFO (a named pipe)", ...), else None. Nothing is opened."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    return _SPECIAL.get(stat.S_IFMT(mode), "not a regular file")


def refuse_special(path, what="output", func=None):
    """Refuse an output ``path`` that exists and is a device, a FIFO or a socket: HDF5 needs a
    seekable regular file, and the atomic rename would replace the special file itself."""
    special = special_file(path)
    if special is not None:
        func = f"{func}: " if func else ""
        raise ValueError(
            f"{func}the {what} {os.fspath(path)!r} is {special}, not a regular file; fastcep writes "
            "HDF5, which needs a seekable regular file: give a file path."
        )


def read_only(path):
    """Whether the existing regular file ``path`` is read-only: no write permission for anyone,
    or none for this process (as root too: its mode says read-only)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISREG(mode) and (not mode & 0o222 or not os.access(path, os.W_OK))


def check_output(path, inputs=(), what="output", func=None):
    """Before any work: refuse an output ``path`` that is one of the ``inputs`` (the same file,
    however named), a folder, a device, a FIFO or a socket, a read-only file, and one whose
    folder cannot be written (a probe file is created and removed). Nothing is opened at
    ``path``. ``func`` (the public function) starts the messages."""
    path = os.fspath(path)
    refuse_special(path, what, func)
    func = f"{func}: " if func else ""
    for inp in inputs:
        if inp is not None and same_file(path, inp):
            raise ValueError(
                f"{func}the {what} {path!r} is the input file {os.fspath(inp)!r}; it would be "
                "overwritten: choose another path."
            )
    if os.path.isdir(path):
        raise IsADirectoryError(f"{func}the {what} {path!r} is a folder; give a file name.")
    if read_only(path):
        raise PermissionError(
            f"{func}the {what} {path!r} is read-only; it is not replaced: make it writable "
            "(chmod u+w) or choose another path."
        )
    folder = os.path.dirname(os.path.realpath(path))
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"{func}the folder of the {what} {path!r} does not exist.")
    try:
        fd, probe = tempfile.mkstemp(prefix=f"{TMP_PREFIX}{os.getpid()}-", suffix=".h5", dir=folder)
    except OSError as exc:
        raise PermissionError(f"{func}cannot write the {what} {path!r}: {exc.strerror}.") from None
    os.close(fd)
    os.remove(probe)


class _GuardedFile(io.RawIOBase):
    """A binary file whose first failed write is kept in ``error`` and whose later writes are
    dropped (see the module's text)."""

    def __init__(self, fh):
        super().__init__()
        self._fh = fh
        self.error = None

    def readable(self):
        return True

    def writable(self):
        return True

    def seekable(self):
        return True

    def seek(self, pos, whence=0):
        return self._fh.seek(pos, whence)

    def tell(self):
        return self._fh.tell()

    def readinto(self, buf):
        return self._fh.readinto(buf)

    def _guard(self, op, *args):
        if self.error is None:
            try:
                return op(*args)
            except OSError as exc:
                self.error = exc
        return None

    def write(self, buf):
        self._guard(self._fh.write, buf)
        return len(buf)

    def truncate(self, size=None):
        self._guard(self._fh.truncate, size)
        return size

    def flush(self):
        self._guard(self._fh.flush)


def _naming(exc, path, why=None):
    """``exc``, an OSError about a temporary file, as one about ``path``, the file it was to become
    (the temporary file's name means nothing to the user)."""
    out = type(exc)(f"cannot write {path!r}: {why or exc.strerror or exc}")
    out.errno = exc.errno
    return out


class AtomicH5:
    """``with AtomicH5(path) as f:`` an ``h5py.File`` open for writing on a temporary file beside
    ``path``, renamed to ``path`` when the block ends without an error (see the module's text).
    ``check()`` raises ``NoRoomError`` as soon as a write has failed."""

    def __init__(self, path):
        self.path = os.fspath(path)
        self.file = None
        self._tmp = self._raw = self._guard = None

    def __enter__(self):
        refuse_special(self.path)  # (the rename would replace a device, a FIFO or a socket)
        self._target = os.path.realpath(self.path)  # (a link is written through, not replaced)
        if read_only(self._target):
            raise PermissionError(
                f"cannot write {self.path!r}: the file is read-only; it is not replaced: make it "
                "writable (chmod u+w) or choose another path."
            )
        folder = os.path.dirname(self._target)
        remove_stale_temporaries(folder)
        try:
            fd, self._tmp = tempfile.mkstemp(prefix=f"{TMP_PREFIX}{os.getpid()}-", suffix=".h5", dir=folder)
        except OSError as exc:
            why = "its folder does not exist" if exc.errno == errno.ENOENT else None
            raise _naming(exc, self.path, why) from None
        try:
            os.fchmod(fd, 0o666 & ~_umask())
            self._raw = os.fdopen(fd, "w+b", buffering=0)
            self._guard = _GuardedFile(self._raw)
            self.file = h5py.File(self._guard, "w")
        except BaseException:
            self._discard()
            raise
        return self.file

    def check(self):
        """Raise ``NoRoomError`` if a write has failed."""
        err = self._guard.error
        if err is not None:
            why = err.strerror or str(err)
            if err.errno == errno.EFBIG:
                why += " (the file-size limit, ulimit -f)"
            out = NoRoomError(f"cannot write {self.path!r}: {why}; nothing was written")
            out.errno = err.errno
            raise out

    def _discard(self):
        for close in (getattr(self.file, "close", None), getattr(self._raw, "close", None)):
            if close is not None:
                try:
                    close()
                except Exception:  # (the temporary file goes anyway)
                    pass
        if self._tmp is not None and os.path.exists(self._tmp):
            os.remove(self._tmp)

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            self._discard()
            return False
        try:
            self.file.close()
            self.check()
            os.fsync(self._raw.fileno())
            self._raw.close()
            try:
                os.replace(self._tmp, self._target)
            except OSError as exc:
                raise _naming(exc, self.path) from None
        except BaseException:
            self._discard()
            raise
        return False


def atomic_h5(path, write):
    """Call ``write(h5py.File)`` on a temporary file beside ``path``, then rename it to ``path``
    (``AtomicH5``)."""
    with AtomicH5(path) as f:
        write(f)


#: the attribute of the root group that holds the file's digest
DIGEST_ATTR = "sha256"


def content_digest(f):
    """SHA-256 (hex) of every dataset (name, dtype, shape, bytes) and attribute (name, value) of
    the open HDF5 file ``f``, in name order, the root's ``DIGEST_ATTR`` left out."""
    h = hashlib.sha256()

    def feed(*parts):
        for part in parts:
            data = part if isinstance(part, bytes) else str(part).encode()
            h.update(len(data).to_bytes(8, "little") + data)

    objects = [("", f)]
    f.visititems(lambda name, obj: objects.append((name, obj)))
    for name, obj in sorted(objects, key=lambda item: item[0]):
        for key in sorted(obj.attrs):
            if name == "" and key == DIGEST_ATTR:
                continue
            value = obj.attrs[key]
            if isinstance(value, (str, bytes)):
                feed(name, key, "s", value)
            else:
                arr = np.ascontiguousarray(value)
                feed(name, key, arr.dtype.str, arr.shape, arr.tobytes())
        if isinstance(obj, h5py.Dataset):
            arr = np.asarray(obj[()])
            if arr.dtype.kind == "O":  # variable-length strings: their bytes, not the pointers
                feed(
                    name, "strings", arr.shape, *[v if isinstance(v, bytes) else str(v) for v in arr.ravel()]
                )
            else:
                arr = np.ascontiguousarray(arr)
                feed(name, "dataset", arr.dtype.str, arr.shape, arr.tobytes())
    return h.hexdigest()


def sign(f):
    """Store the digest of the open, complete file ``f`` in its root (the last thing written)."""
    f.attrs[DIGEST_ATTR] = content_digest(f)


def verify(f, kind, path):
    """Check the digest of the open file ``f`` (``FileFormatError`` naming ``path`` if it does not
    match); returns False for a file written without one."""
    stored = f.attrs.get(DIGEST_ATTR)
    if stored is None:
        return False
    if not isinstance(stored, str) or stored != content_digest(f):
        raise bad_file(kind, path, "its checksum does not match its contents (the file is corrupt)")
    return True


def json_default(obj):
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, (tuple, np.ndarray)):
        return list(obj)
    return repr(obj)
