"""Where numba keeps the compiled kernels: in the user's cache folder, never beside the sources.

numba's default writes ``__pycache__/*.nbi, *.nbc`` next to each kernel module. Inside an
installed package those files are not in pip's record of the install, so uninstalling leaves a
``site-packages/fastcep`` folder behind, and that leftover shadows a later editable install
(``ImportError: cannot import name ... (unknown location)``). So fastcep's kernels cache under
:func:`cache_root` instead, in a folder named by the kernels' location and by a digest of every
kernel source:

- numba checks a cached function against its own source file only, so a cached driver would keep
  the code it inlined from a leaf of another module after that module changed (seen: a stale
  driver writing past a resized scratch buffer, "double free or corruption"). A new digest is a
  new folder, and the folders of older digests are removed.
- Two installs (a wheel and a checkout) never share a folder.

``FASTCEP_CACHE_DIR`` chooses the root; else ``NUMBA_CACHE_DIR``/fastcep; else the user's cache
folder (``~/.cache/fastcep`` on Linux).

Nothing here may break an import or a fit (issue 38):
- **No writable folder** (HOME read-only on a cluster worker, a read-only ``FASTCEP_CACHE_DIR``):
  the kernels compile in memory, once per process, and one :class:`KernelCacheWarning` names the
  folder. numba's own fallbacks are not used: one writes beside the sources (above), and where
  none applies numba refuses to define the function at all ("no locator available").
- **A damaged entry** (a truncated or altered ``.nbc`` or ``.nbi``): every data file carries a
  SHA-256 of its contents, checked before numba unpickles it or hands its object code to LLVM
  (an altered object file can crash the process there). A file that fails the check or cannot be
  read is removed with a warning that names the folder, and the kernel is compiled again.
- **Kernels of a user's likelihood** (``likelihoods.custom``, classes made in each process) are
  never written: their entries could never be found again, and a class whose name is not an
  identifier (``Custom_<lambda>``) made the index unreadable in every later process.

**One compile per kernel, however many processes start at once** (the test run's workers, a
cluster's): a process that misses a kernel in the cache takes that kernel's lock file
(``<name>.lock`` beside its index, an exclusive ``flock``) before it compiles, and gives it back
once the entry is written. A process that finds the lock taken waits for it (at most
COMPILE_WAIT seconds, then compiles on its own), looks again and loads what the other wrote.
The operating system frees the lock of a process that dies; a compile that fails frees it at
the kernel's next lookup. Without ``fcntl`` (Windows) every process compiles on its own, as
numba does.

These rules hold for the kernels' own functions only (``KernelCache`` passes every other cache
through to numba unchanged).
"""

import hashlib
import os
import pathlib
import pickle
import shutil
import tempfile
import time
import warnings

from numba.core import caching, config, dispatcher
from numba.misc.appdirs import AppDirs

try:
    import fcntl
except ImportError:  # (Windows: no compile locks)
    fcntl = None

#: the kernels' own folder (``fastcep.kernels``)
KERNELS = pathlib.Path(__file__).resolve().parent

# the names numba gave these classes before 0.60 carried a leading underscore
_UserWide = getattr(caching, "UserWideCacheLocator", None) or caching._UserWideCacheLocator
_CacheImpl = getattr(caching, "CacheImpl", None) or caching._CacheImpl


def cache_root():
    """The folder below which fastcep's compiled kernels are kept (see the module's text)."""
    if os.environ.get("FASTCEP_CACHE_DIR"):
        return pathlib.Path(os.environ["FASTCEP_CACHE_DIR"])
    if config.CACHE_DIR:
        return pathlib.Path(config.CACHE_DIR) / "fastcep"
    return pathlib.Path(AppDirs("fastcep", appauthor=False).user_cache_dir)


def source_digest(folder):
    """SHA-256 of every ``*.py`` below ``folder``, names and contents, in a fixed order."""
    folder = pathlib.Path(folder)
    h = hashlib.sha256()
    for path in sorted(folder.rglob("*.py")):
        h.update(path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def cache_folder(folder, root=None):
    """(the folder of this source tree's caches, the one for its current sources): the first holds
    one folder per digest of ``folder``'s sources."""
    folder = pathlib.Path(folder).resolve()
    root = pathlib.Path(root) if root is not None else cache_root()
    tree = root / f"numba-{folder.name}-{hashlib.sha1(str(folder).encode()).hexdigest()[:12]}"
    return tree, tree / source_digest(folder)[:20]


def drop_stale_caches(tree, current):
    """Remove every digest folder of ``tree`` but ``current``; returns their number. Folders that
    cannot be removed (another user's, read-only) are left alone."""
    keep = pathlib.Path(current).name
    try:
        others = [p for p in pathlib.Path(tree).iterdir() if p.is_dir() and p.name != keep]
    except OSError:
        return 0
    for path in others:
        shutil.rmtree(path, ignore_errors=True)
    return sum(not path.exists() for path in others)


class KernelCacheWarning(UserWarning):
    """The kernel cache cannot be used as it is: kernels compile in memory, or a damaged entry
    was dropped and compiled again."""


def writable(folder):
    """None if files can be created in ``folder`` (made if missing), else the reason."""
    try:
        pathlib.Path(folder).mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".probe-"):
            pass
    except OSError as exc:
        return f"{type(exc).__name__}: {exc.strerror or exc}"
    return None


class KernelCacheLocator(_UserWide):
    """numba's cache locator for fastcep's kernel modules: the cache of ``kernels/glm/probit.py``
    is ``<current digest folder>/glm``. Functions outside the kernels go to numba's own choice."""

    #: the current digest folder, set by :func:`install`
    folder = None
    #: False when that folder cannot be written: the kernels' caches are then disabled
    enabled = True

    def __init__(self, py_func, py_file):
        super().__init__(py_func, py_file)
        rel = pathlib.Path(py_file).resolve().parent.relative_to(KERNELS)
        self._cache_path = str(self.folder / rel)

    @classmethod
    def from_function(cls, py_func, py_file):
        if cls.folder is None:
            return None
        try:
            pathlib.Path(py_file).resolve().relative_to(KERNELS)
        except (ValueError, OSError):
            return None
        if not cls.enabled:  # (no folder to make: KernelCache disables itself)
            return cls(py_func, py_file)
        return super().from_function(py_func, py_file)


#: the suffix of a data file's SHA-256 (``KernelCacheFile``)
_DIGEST = hashlib.sha256().digest_size


class DamagedEntry(Exception):
    """A cache file whose digest or contents do not check out."""


class KernelCacheFile(caching.IndexDataCacheFile):
    """numba's index and data files with a SHA-256 of each data file's contents at its end,
    checked before the contents are unpickled; a damaged index or data file raises DamagedEntry."""

    def _save_data(self, name, data):
        data = self._dump(data)
        with self._open_for_write(self._data_path(name)) as f:
            f.write(data + hashlib.sha256(data).digest())

    def _load_data(self, name):
        with open(self._data_path(name), "rb") as f:
            raw = f.read()
        data, digest = raw[:-_DIGEST], raw[-_DIGEST:]
        if len(raw) <= _DIGEST or hashlib.sha256(data).digest() != digest:
            raise DamagedEntry(self._data_path(name))
        try:
            return pickle.loads(data)
        except Exception as exc:  # (a digest that matches data numba cannot read)
            raise DamagedEntry(self._data_path(name)) from exc

    def _load_index(self):
        try:
            return super()._load_index()
        except Exception as exc:  # (unpickling a damaged index raises anything)
            raise DamagedEntry(self._index_path) from exc

    def drop(self):
        """Remove this function's index and every data file it names (or that lies beside it)."""
        prefix = self._index_name[: -len(".nbi")]
        for path in pathlib.Path(self._cache_path).glob(glob_escape(prefix) + ".*"):
            if path.name == self._index_name or path.suffix == ".nbc":
                path.unlink(missing_ok=True)


def glob_escape(text):
    """``text`` with the pattern characters of ``pathlib.Path.glob`` escaped."""
    return "".join(f"[{c}]" if c in "*?[" else c for c in text)


#: likelihood classes made in this process (``likelihoods.custom``): kernels typed with one are
#: never read from or written to the disk cache
NEVER_CACHED = set()


def _mentions(types_, classes):
    """Whether one of ``types_`` (numba types), or a type nested in one, is a NamedTuple of one
    of ``classes``."""
    for t in types_:
        if getattr(t, "instance_class", None) in classes:
            return True
        inner = getattr(t, "types", None)
        if isinstance(inner, tuple) and _mentions(inner, classes):
            return True
    return False


def _never_cached(sig):
    return bool(NEVER_CACHED) and _mentions(getattr(sig, "args", sig), NEVER_CACHED)


#: a kernel could not be written to the cache in this process, and that was said once
_UNWRITTEN_WARNED = False

#: seconds a process waits for another that compiles the same kernel, then compiles it too
COMPILE_WAIT = 600.0
#: seconds between two tries of a lock that is taken
LOCK_POLL = 0.05


def take_lock(path, wait):
    """An open file descriptor of ``path`` (made if missing) holding an exclusive ``flock``, taken
    within ``wait`` seconds; None if it stayed taken, or where it cannot be made (no ``fcntl``, a
    folder that cannot be written)."""
    if fcntl is None:
        return None
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        return None
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.close(fd)
                return None
            time.sleep(LOCK_POLL)
        except OSError:  # (a file system without locks)
            os.close(fd)
            return None


def give_lock(fd):
    """Free a lock of ``take_lock`` (closing its descriptor frees the ``flock``)."""
    if fd is not None:
        os.close(fd)


class KernelCache(caching.FunctionCache):
    """numba's per-function cache, with the rules of the module's text for the kernels' own
    functions; any other function's cache behaves as numba's."""

    def __init__(self, py_func):
        super().__init__(py_func)
        self._kernel = isinstance(self._impl.locator, KernelCacheLocator)
        if not self._kernel:
            return
        self._cache_file = KernelCacheFile(
            cache_path=self._cache_path,
            filename_base=self._impl.filename_base,
            source_stamp=self._impl.locator.get_source_stamp(),
        )
        if not KernelCacheLocator.enabled:
            self.disable()
        #: the compile lock this process holds for this kernel (``load_overload``), or None
        self._lock = None

    def load_overload(self, sig, target_context):
        if not self._kernel:
            return super().load_overload(sig, target_context)
        if _never_cached(sig):
            return None
        give_lock(self._lock)  # (held still only if the last compile of this kernel failed)
        self._lock = None
        data = self._load(sig, target_context)
        if data is None and self._enabled:
            # a miss: wait while another process compiles this kernel, then look again; on a
            # second miss this process compiles it, holding the lock until ``save_overload``
            lock_path = os.path.join(self._cache_path, self._impl.filename_base + "lock")
            self._lock = take_lock(lock_path, COMPILE_WAIT)
            if self._lock is not None:
                data = self._load(sig, target_context)
                if data is not None:
                    give_lock(self._lock)
                    self._lock = None
        return data

    def _load(self, sig, target_context):
        try:
            return super().load_overload(sig, target_context)
        except Exception as exc:
            self._drop(exc)
            return None

    def save_overload(self, sig, data):
        if not self._kernel:
            return super().save_overload(sig, data)
        if _never_cached(sig):
            return None
        try:
            try:
                return super().save_overload(sig, data)
            except DamagedEntry as exc:  # (the index it extends): start the function's files again
                self._drop(exc)
                return super().save_overload(sig, data)
        except OSError as exc:  # (a full disk, a file size limit, a folder gone): keep it in memory
            self._unwritten(exc)
            return None
        finally:
            give_lock(self._lock)
            self._lock = None

    def _qualname(self):
        func = self._py_func
        return f"{func.__module__}.{getattr(func, '__qualname__', func.__name__)}"

    def _unwritten(self, exc):
        """A kernel compiled but not written (``exc``, an OSError): its entry, which may now name
        a data file that is missing, is removed, and the first such failure of a process warns."""
        global _UNWRITTEN_WARNED
        try:
            self._cache_file.drop()
        except OSError:
            pass
        if not _UNWRITTEN_WARNED:
            _UNWRITTEN_WARNED = True
            warnings.warn(
                f"fastcep: a compiled kernel ({self._qualname()}) could not be written to the kernel cache "
                f"({type(exc).__name__}: {exc.strerror or exc}); it is kept in memory, and kernels that "
                "cannot be written are compiled again in the next process. The cache folder is "
                f"{KernelCacheLocator.folder}",
                KernelCacheWarning,
                stacklevel=2,
            )

    def _drop(self, exc):
        where = exc.args[0] if isinstance(exc, DamagedEntry) and exc.args else self._cache_path
        warnings.warn(
            f"fastcep: a damaged kernel cache entry ({where}) was removed and {self._qualname()} is "
            f"compiled again; the cache folder is {KernelCacheLocator.folder}",
            KernelCacheWarning,
            stacklevel=2,
        )
        try:
            self._cache_file.drop()
        except OSError:
            pass


def install():
    """Point numba's caches of the kernels at the current digest folder, remove older digests'
    folders, and return the current folder. Where that folder cannot be written, the kernels
    compile in memory and one KernelCacheWarning says so."""
    tree, current = cache_folder(KERNELS)
    KernelCacheLocator.folder = current
    reason = writable(current)
    KernelCacheLocator.enabled = reason is None
    if reason is None:
        drop_stale_caches(tree, current)
    else:
        warnings.warn(
            f"fastcep: the kernel cache folder {current} cannot be written ({reason}); kernels are "
            "compiled in memory in each process, which slows every first fit. Set FASTCEP_CACHE_DIR "
            "to a writable folder to cache them.",
            KernelCacheWarning,
            stacklevel=2,
        )
    if KernelCacheLocator not in _CacheImpl._locator_classes:
        _CacheImpl._locator_classes.insert(0, KernelCacheLocator)
    dispatcher.FunctionCache = KernelCache  # (``Dispatcher.enable_caching`` makes one per function)
    return current
