"""Kernels of Bayesian CP decomposition: moments, messages, cavities, posterior rebuilds,
predictions and the schedules that run them; the baselines' kernels (LP, VMP, CP-WOPT).

The names of the CEP engine's modules are re-exported here, so ``from fastcep.kernels import
tensor as K`` gives ``K.sweep_full``, ``K.rebuild_full``, ``K.predict_full``, ...
"""

from . import cp_wopt as cp_wopt
from . import lp as lp
from . import vmp as vmp
from .cavity import *  # noqa: F403
from .messages import *  # noqa: F403
from .moments import *  # noqa: F403
from .posterior import *  # noqa: F403
from .prediction import *  # noqa: F403
from .schedules import *  # noqa: F403
from .sketch import *  # noqa: F403
from .state import CPProblem as CPProblem
from .state import CPScratch as CPScratch
from .state import CPStore as CPStore
from .tilted import *  # noqa: F403
