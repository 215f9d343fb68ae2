"""The CP drivers' NamedTuples (``kernels.tensor.state``) around a test's own arrays, by
reference: a driver's writes land in the arrays the test passed."""

import numpy as np

from fastcep.kernels import tensor as K
from fastcep.tensor.engine import ENTRY_CHUNK, OBJECT_CHUNK


def cp_tuples(
    lay, y, Lam, eta, P_Lam=None, P_eta=None, M=None, S=None, E2=None, *, s=None, code=0,
    prior_Lam=None, prior_eta=None, alpha=None, beta=None, noise=None, rule=None, units=None,
    with_noise=False, with_sums=False, cavity=False, lp=False, lp_rule=0, obj_chunk=OBJECT_CHUNK,
):  # fmt: skip
    """(problem, store, scratch) of entries laid out as ``lay`` with values ``y`` (and signs ``s``,
    default y) and messages Lam, eta. The posterior arrays default to fresh ones of the right
    shapes (for a rebuild to fill), the prior to zeros, the noise messages to zeros and the
    noise to (0, 0, 1). ``units``: the work units the scratch serves (default: one per
    ENTRY_CHUNK entries); with ``with_sums`` as many sum groups, with ``cavity`` as many cavity
    units, with ``lp`` the Laplace method's. ``rule``: a generic model's (nodes, weights)."""
    n, Km, R = eta.shape
    n_obj = int(lay.offsets[-1])
    full = Lam.ndim == 4
    block = (R, R) if full else (R,)
    fresh = {"P_Lam": block, "P_eta": (R,), "M": (R,), "S": block, "E2": block}
    given = {"P_Lam": P_Lam, "P_eta": P_eta, "M": M, "S": S, "E2": E2}
    post = {k: np.empty((n_obj, *fresh[k])) if v is None else v for k, v in given.items()}
    store = K.CPStore(
        Lam, eta, np.zeros(n) if alpha is None else alpha, np.zeros(n) if beta is None else beta, **post,
        noise=np.array([0.0, 0.0, 1.0]) if noise is None else noise,
    )  # fmt: skip
    units = -(-n // ENTRY_CHUNK) if units is None else units
    scratch = K.state.scratch(
        store, units, obj_chunk, n_groups=units if with_sums else 0, cav_units=units if cavity else 0, lp=lp,
        guard=True,
    )  # fmt: skip
    # (a rule as writable arrays, as the engine passes it)
    nodes, weights = (np.empty(0), np.empty(0)) if rule is None else map(np.array, rule)
    problem = K.CPProblem(
        lay.gidx, y, y if s is None else s, lay.ptr, lay.ent, lay.obj_mode,
        np.zeros((n_obj, *block)) if prior_Lam is None else prior_Lam,
        np.zeros((n_obj, R)) if prior_eta is None else prior_eta, code, obj_chunk, nodes, weights, lp_rule,
        with_noise, with_sums,
    )  # fmt: skip
    return problem, store, scratch
