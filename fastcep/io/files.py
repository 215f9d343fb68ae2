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
- **Seals.** A damaged file can crash HDF5 itself (a flipped bit in an attribute's type
  segfaulted ``fastcep.load``, another hung it), before any digest is read. So model files and
  checkpoints are sealed (``AtomicH5(path, seal=format)``): they start with an HDF5 user block of
  ``SEAL_BYTES`` bytes (HDF5's superblock follows it; h5py opens such a file as any other) that
  holds, as ASCII lines padded with NUL bytes, ``fastcep sealed HDF5 file``, ``seal: 1`` (the
  seal's version), ``format: <the file's format>``, ``bytes: <length of the rest of the file>``
  and ``sha256: <the SHA-256 of the lines before it and the rest of the file>``, written after
  HDF5 has closed the temporary file and before the rename. The seal is checked from plain
  bytes before h5py opens the file (``check_seal``), so that any change, anywhere, is refused
  before HDF5 parses a byte. Files written before seals
  (HDF5's signature at their start) are read as before, after checks of their heaps of strings
  from plain bytes (``check_heaps``) and of the type and size of every attribute and dataset
  with h5py's low-level API (``check_types``), as are the large data files (tensors, sparse
  rows), which carry no digest.
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
from h5py import h5a, h5d, h5s, h5t

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


# ----------------------------------------------------------------------------- seals
#: the size of a sealed file's user block (the seal; HDF5's superblock starts after it)
SEAL_BYTES = 512
#: the first line of a seal, and the version of its layout
SEAL_MAGIC = b"fastcep sealed HDF5 file\n"
SEAL_VERSION = 1
#: what every HDF5 file starts with (at offset 0, or after a user block)
HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
_SEAL = re.compile(
    rb"fastcep sealed HDF5 file\nseal: (\d{1,4})\nformat: (fastcep-[a-z0-9-]{1,40})\n"
    rb"bytes: (\d{1,19})\nsha256: ([0-9a-f]{64})\n"
)
#: bytes hashed at a time
_BLOCK = 1 << 20


def _seal_fields(fmt, size):
    """The seal's lines before its digest (which covers them too)."""
    return f"fastcep sealed HDF5 file\nseal: {SEAL_VERSION}\nformat: {fmt}\nbytes: {size}\n".encode()


def _seal_block(fmt, size, digest):
    return (_seal_fields(fmt, size) + f"sha256: {digest}\n".encode()).ljust(SEAL_BYTES, b"\0")


def _digest(fh, fields):
    """SHA-256 (hex) of a seal's ``fields`` and the bytes after the seal in the open binary file
    ``fh``."""
    h = hashlib.sha256(fields)
    fh.seek(SEAL_BYTES)
    while block := fh.read(_BLOCK):
        h.update(block)
    return h.hexdigest()


def write_seal(fh, fmt):
    """Seal the complete HDF5 file open in ``fh`` (binary, read and write; HDF5 has closed it):
    its user block gets the format, the length of the bytes after it and the digest of both and
    those bytes (see the module's text)."""
    size = fh.seek(0, os.SEEK_END) - SEAL_BYTES
    digest = _digest(fh, _seal_fields(fmt, size))
    fh.seek(0)
    fh.write(_seal_block(fmt, size, digest))


def reseal(path):
    """Seal again a sealed file that was changed in place (an edit with h5py, say), under its
    format."""
    with open(path, "r+b") as fh:
        m = _SEAL.match(fh.read(SEAL_BYTES))
        if m is None:
            raise ValueError(f"reseal: {os.fspath(path)!r} is not a sealed fastcep file.")
        write_seal(fh, m.group(2).decode())


def _read_seal(fh, bad):
    """The format named by the seal of the binary file ``fh`` after checking it against the
    bytes, or None for a file without a seal (HDF5's signature at its start, or not HDF5 at
    all); ``bad(why)`` for a damaged seal or contents."""
    head = fh.read(SEAL_BYTES)
    if head.startswith(HDF5_SIGNATURE):
        return None
    fh.seek(SEAL_BYTES)
    if not head.startswith(SEAL_MAGIC[:8]) and fh.read(len(HDF5_SIGNATURE)) != HDF5_SIGNATURE:
        return None  # (not HDF5 as fastcep writes it: h5py's own error, or another's file)
    m = _SEAL.match(head)
    if m is None:
        raise bad("its seal (its first 512 bytes) is damaged (the file is corrupt)")
    version, fmt, size, digest = int(m.group(1)), m.group(2).decode(), int(m.group(3)), m.group(4).decode()
    if version != SEAL_VERSION:
        raise bad(f"its seal is of version {version}; this fastcep reads {SEAL_VERSION} (a newer fastcep?)")
    if head != _seal_block(fmt, size, digest):
        raise bad("its seal (its first 512 bytes) is damaged (the file is corrupt)")
    held = fh.seek(0, os.SEEK_END) - SEAL_BYTES
    if held != size:
        why = f"{held:,} bytes after its seal, which names {size:,}: truncated, extended or corrupt"
        raise bad(f"its checksum does not match its contents ({why})")
    if _digest(fh, _seal_fields(fmt, size)) != digest:
        raise bad("its checksum does not match its contents (the file is corrupt)")
    return fmt


def check_seal(path, kind):
    """The format a sealed file names, its seal checked against every byte of it (before h5py
    opens it); None for a file without a seal. FileFormatError (``bad_file``) if it is damaged."""
    path = os.fspath(path)
    with open(path, "rb") as fh:
        return _read_seal(fh, lambda why: bad_file(kind, path, why))


def unsealed_hdf5(path):
    """True if the file at ``path`` starts with HDF5's signature (an HDF5 file without a seal: a
    data file, or a file written before seals)."""
    try:
        with open(path, "rb") as fh:
            return fh.read(len(HDF5_SIGNATURE)) == HDF5_SIGNATURE
    except OSError:
        return False


def sealed_kind(path):
    """What a sealed file is, from its seal alone: its format, "damaged" if the seal does not
    match the bytes, None if the file has no seal (or is not a regular file, or cannot be read)."""
    try:
        if not os.path.isfile(path):
            return None
        return check_seal(path, "sealed")
    except FileFormatError:
        return "damaged"
    except OSError:
        return None


# --------------------------------------------------------------- the checks of an unsealed file
#: what starts a global heap collection (HDF5's store of variable-length strings), version 1
_HEAP_SIGNATURE = b"GCOL\x01\x00\x00\x00"
#: files up to this size have every byte searched for heaps; larger ones their first and last
#: ``_HEAP_SPAN`` bytes, where fastcep's writers put their attributes (a model's and a checkpoint's
#: first, a data file's last)
_HEAP_SCAN_ALL = 1 << 23
_HEAP_SPAN = 1 << 22


def _heap_problem(data, at, whole):
    """Why the global heap collection at ``data[at:]`` would stop HDF5's parser (its objects must
    chain to the collection's end: a zeroed or flipped object size made it loop forever,
    measured), or None; ``whole``: ``data`` runs to the end of the file (else a collection cut
    by its end is not checked)."""
    length = int.from_bytes(data[at + 8 : at + 16], "little") if at + 16 <= len(data) else None
    if length is None or at + length > len(data):
        return "a heap that runs past the end of the file" if whole else None
    if length < 4096:
        return f"a heap of {length} bytes"
    p, end = at + 16, at + length
    while p + 16 <= end:
        index = int.from_bytes(data[p : p + 2], "little")
        held = int.from_bytes(data[p + 8 : p + 16], "little")
        need = held if index == 0 else 16 + (-(-held // 8) * 8)
        if need < 16 or p + need > end:
            return f"a heap object of {held} bytes at byte {p}"
        p += need
    return None


def check_heaps(fh, bad):
    """Before HDF5 opens the binary file ``fh``: each global heap collection found in it (its
    variable-length strings: every text attribute) is whole (``_heap_problem``). ``bad(why)``."""
    size = os.fstat(fh.fileno()).st_size
    spans = [(0, size)] if size <= _HEAP_SCAN_ALL else [(0, _HEAP_SPAN), (size - _HEAP_SPAN, size)]
    for lo, hi in spans:
        fh.seek(lo)
        data = fh.read(hi - lo)
        at = data.find(_HEAP_SIGNATURE)
        while at >= 0:
            why = _heap_problem(data, at, hi == size)
            if why is not None:
                raise bad(f"its store of strings is damaged ({why}; the file is corrupt)")
            at = data.find(_HEAP_SIGNATURE, at + 1)


# --------------------------------------------------------------- the types of an unsealed file
def _known_types():
    """The HDF5 types of fastcep's files and of tables or tensors written by hand: h5py's strings
    of any length (UTF-8 first, then ASCII), bool, and the integers and floats of numpy in
    either byte order."""
    numbers = [f"{order}{kind}{size}" for order in "<>" for kind in "iu" for size in (1, 2, 4, 8)]
    numbers += [f"{order}f{size}" for order in "<>" for size in (2, 4, 8)]
    strings = [h5t.py_create(h5py.string_dtype(code), logical=True) for code in ("utf-8", "ascii")]
    return [*strings, *(h5t.py_create(np.dtype(t)) for t in (*numbers, "|b1"))]


#: the largest attribute (elements) fastcep writes: a shape, a string
_MAX_ATTR_POINTS = 1 << 16


def _space_points(space, max_rank):
    """The elements of a dataspace (None if it is not scalar or simple of rank <= max_rank)."""
    kind = space.get_simple_extent_type()
    if kind == h5s.SCALAR:
        return 1
    if kind != h5s.SIMPLE or space.get_simple_extent_ndims() > max_rank:
        return None
    return space.get_simple_extent_npoints()


def _type_problem(tid, known):
    """Why an HDF5 type is not one fastcep reads (``_known_types``, or a string of a fixed
    length), or None."""
    fixed = tid.get_class() == h5t.STRING and not tid.is_variable_str()
    if not (fixed or any(tid == t for t in known)):
        return f"of an HDF5 type fastcep does not read (class {tid.get_class()}, {tid.get_size()} bytes)"
    return None


def check_types(f, bad):
    """Before reading a value of an unsealed HDF5 file ``f``: every attribute and dataset is of a
    type fastcep writes (``_known_types``), of a scalar or simple dataspace of a plausible rank,
    and its storage the size its type and space say (h5py's low-level API: a damaged type is
    what crashed HDF5's conversions). ``bad(why)`` for the first that is not."""
    known = _known_types()
    objects = [("/", f.id)]

    def add(name, obj):
        objects.append((name, obj.id))

    try:
        f.visititems(add)
        for name, oid in objects:
            _check_object(name, oid, known, bad)
    except (KeyError, OSError, ValueError, TypeError, RuntimeError) as exc:
        if isinstance(exc, FileFormatError):
            raise
        raise bad(f"its structure cannot be read ({type(exc).__name__}: {exc}; the file is corrupt)") from exc


def _variable(tid):
    """True for a string type of any length (stored as its length and a heap address)."""
    return tid.get_class() == h5t.STRING and tid.is_variable_str()


def _check_object(name, oid, known, bad):
    """``check_types`` of one object (its id ``oid``, its name ``name``)."""
    for i in range(h5a.get_num_attrs(oid)):
        attr = h5a.open(oid, index=i)
        what = f"the attribute {attr.name.decode(errors='replace')!r} of {name!r}"
        tid = attr.get_type()
        why = _type_problem(tid, known)
        points = _space_points(attr.get_space(), 1)
        if why is None and (points is None or points > _MAX_ATTR_POINTS):
            why = "of a dataspace fastcep does not write"
        if why is None:
            per = 16 if _variable(tid) else tid.get_size()
            if attr.get_storage_size() != points * per:
                why = f"of {attr.get_storage_size()} bytes where its type and shape need {points * per}"
        if why is not None:
            raise bad(f"{what} is {why} (the file is corrupt)")
    if isinstance(oid, h5d.DatasetID):
        tid = oid.get_type()
        why = _type_problem(tid, known)
        points = _space_points(oid.get_space(), 4)
        if why is None and points is None:
            why = "of a dataspace fastcep does not write"
        layout = oid.get_create_plist().get_layout()
        if why is None and layout in (h5d.CONTIGUOUS, h5d.COMPACT) and not _variable(tid):
            size = oid.get_storage_size()
            if size not in (0, points * tid.get_size()):
                why = f"stored in {size} bytes where its type and shape need {points * tid.get_size()}"
        if why is not None:
            raise bad(f"the dataset {name!r} is {why} (the file is corrupt)")


def open_verified(path, bad):
    """An existing HDF5 file opened for reading, nothing parsed by HDF5 before it was checked:
    a sealed file's seal against its bytes (``check_seal``; then h5py opens that very file), an
    unsealed one's heaps of strings (``check_heaps``) and then its types (``check_types``).
    ``bad(why)`` for a file that fails, or is not HDF5."""
    path = os.fspath(path)
    with open(path, "rb") as fh:
        fmt = _read_seal(fh, bad)
        if fmt is None:
            check_heaps(fh, bad)
        try:
            f = h5py.File(path, "r")
        except OSError as exc:
            raise bad(f"cannot be opened as HDF5 ({exc})") from exc
        try:
            if fmt is not None:
                held, opened = os.fstat(fh.fileno()), os.fstat(f.id.get_vfd_handle())
                if (held.st_dev, held.st_ino) != (opened.st_dev, opened.st_ino):
                    raise bad("it was replaced while it was read; read it again")
                f._fastcep_seal = fmt  # (what ``is_sealed`` asks)
            else:
                check_types(f, bad)
        except BaseException:
            f.close()
            raise
    return f


def is_sealed(f):
    """True if the open file ``f`` was opened by ``open_verified`` after its seal was checked."""
    return getattr(f, "_fastcep_seal", None) is not None


def open_h5(path, kind, func):
    """An existing HDF5 file opened for reading (``open_verified``): FileNotFoundError naming
    ``func`` if it is missing, FileFormatError (``bad_file``) if it is not HDF5 or is damaged."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{func}: no such file {path!r}.")
    if not os.path.isfile(path):
        why = "not a regular file (a pipe or a device?), and HDF5 is read by seeking: write it to a file"
        raise bad_file(kind, path, why)
    return open_verified(path, lambda why: bad_file(kind, path, why))


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
    ``seal``: the file's format, to seal it (a user block of ``SEAL_BYTES``, filled in once HDF5
    has closed the file). ``check()`` raises ``NoRoomError`` as soon as a write has failed."""

    def __init__(self, path, seal=None):
        self.path = os.fspath(path)
        self.seal = seal
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
            block = {} if self.seal is None else {"userblock_size": SEAL_BYTES}
            self.file = h5py.File(self._guard, "w", **block)
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
            if self.seal is not None:
                write_seal(self._guard, self.seal)  # (through the guard: a full disk is kept)
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


def atomic_h5(path, write, seal=None):
    """Call ``write(h5py.File)`` on a temporary file beside ``path``, then rename it to ``path``
    (``AtomicH5``; ``seal``: the file's format, to seal it)."""
    with AtomicH5(path, seal) as f:
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
