"""Numba kernels of fastcep, one module per factor type (installed as ``fastcep.kernels``).

Kernels take arrays and scalars only, never raise and never do I/O; the Python layer in
``fastcep`` validates, allocates and turns bad input into clear exceptions.
"""

import hashlib
import pathlib


def drop_stale_caches(folder, extra=()):
    """Delete numba's on-disk caches of the kernels below ``folder`` when any kernel source changed.

    numba checks a cached function against its own source file only, so a cached driver keeps
    the code it inlined from a leaf of another module after that module changed (seen: a stale
    ``regression.parallel_sweep`` writing past a resized scratch buffer, "double free or
    corruption"). The caches of every ``__pycache__`` below ``folder`` are stamped with a hash of
    every ``*.py`` below ``folder`` and below the folders ``extra`` (leaves the kernels inline from
    elsewhere), and all dropped when it differs. Returns True if they were dropped. A read-only
    install is left alone.
    """
    folder = pathlib.Path(folder)
    sources = sorted(folder.rglob("*.py"))
    for other in extra:
        sources += sorted(pathlib.Path(other).rglob("*.py"))
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sources)).hexdigest()
    cache = folder / "__pycache__"
    stamp = cache / "fastcep-kernels.sha256"
    try:
        if stamp.read_text() == digest:
            return False
    except OSError:
        pass
    try:
        cache.mkdir(exist_ok=True)
        for f in list(folder.rglob("*.nbi")) + list(folder.rglob("*.nbc")):
            f.unlink(missing_ok=True)
        stamp.write_text(digest)
    except OSError:
        return False
    return True


drop_stale_caches(pathlib.Path(__file__).parent)

from . import glm, likelihoods, linalg, special, tensor  # noqa: E402 (after the cache check)
from ._config import CHUNK_ROWS, FASTMATH, chunk_rows  # noqa: E402

__all__ = [
    "CHUNK_ROWS",
    "FASTMATH",
    "chunk_rows",
    "drop_stale_caches",
    "glm",
    "likelihoods",
    "linalg",
    "special",
    "tensor",
]
