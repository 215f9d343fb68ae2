"""Numba kernels of fastcep, one module per factor type (installed as ``fastcep.kernels``).

Kernels take arrays and scalars only, never raise and never do I/O; the Python layer in
``fastcep`` validates, allocates and turns bad input into clear exceptions.
"""

from . import (
    cp,
    cp_lp,
    cp_vmp,
    cp_wopt,
    importance,
    kjit,
    laplace,
    linalg,
    logistic,
    probit,
    regression,
    special,
    vb,
)
from ._config import CHUNK_ROWS, FASTMATH

__all__ = [
    "CHUNK_ROWS",
    "FASTMATH",
    "cp",
    "cp_lp",
    "cp_vmp",
    "cp_wopt",
    "importance",
    "kjit",
    "laplace",
    "linalg",
    "logistic",
    "probit",
    "regression",
    "special",
    "vb",
]
