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
folder (``~/.cache/fastcep`` on Linux). Where none of them can be written, numba falls back to its
own choice.
"""

import hashlib
import os
import pathlib
import shutil

from numba.core import caching, config
from numba.misc.appdirs import AppDirs

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


class KernelCacheLocator(_UserWide):
    """numba's cache locator for fastcep's kernel modules: the cache of ``kernels/glm/probit.py``
    is ``<current digest folder>/glm``. Functions outside the kernels go to numba's own choice."""

    #: the current digest folder, set by :func:`install`
    folder = None

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
        return super().from_function(py_func, py_file)


def install():
    """Point numba's caches of the kernels at the current digest folder, remove older digests'
    folders, and return the current folder."""
    tree, current = cache_folder(KERNELS)
    KernelCacheLocator.folder = current
    drop_stale_caches(tree, current)
    if KernelCacheLocator not in _CacheImpl._locator_classes:
        _CacheImpl._locator_classes.insert(0, KernelCacheLocator)
    return current
