"""splitmix64 (Steele, Lea and Flood 2014): the one hash of the kernels, for the importance
sampler's counter-based random streams (``glm.importance``) and the sketch start's test signs
(``tensor.sketch``)."""

import numpy as np
from numba import njit

from ._config import LEAF

#: the golden-ratio increment of the splitmix64 stream
GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_S30 = np.uint64(30)
_S27 = np.uint64(27)
_S31 = np.uint64(31)


@njit(**LEAF)
def mix64(z):
    """splitmix64's finaliser: a bijective scrambling of a uint64."""
    z = (z ^ (z >> _S30)) * _MIX1
    z = (z ^ (z >> _S27)) * _MIX2
    return z ^ (z >> _S31)
