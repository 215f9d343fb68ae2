"""Numba kernels of fastcep, one module per factor type (installed as ``fastcep.kernels``).

Kernels take arrays and scalars only, never raise and never do I/O; the Python layer in
``fastcep`` validates, allocates and turns bad input into clear exceptions.
"""

from ._cache import cache_root, install

#: the folder of the current kernels' compiled caches (``kernels/_cache.py``)
CACHE_FOLDER = install()

from . import glm, likelihoods, linalg, special, tensor  # noqa: E402 (after the cache is placed)
from ._config import CHUNK_ROWS, FASTMATH, chunk_rows  # noqa: E402

__all__ = [
    "CACHE_FOLDER",
    "CHUNK_ROWS",
    "FASTMATH",
    "cache_root",
    "chunk_rows",
    "glm",
    "likelihoods",
    "linalg",
    "special",
    "tensor",
]
