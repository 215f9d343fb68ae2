"""The NamedTuples that the CP drivers take whole, as the regression drivers take theirs
(DESIGN.md section 6; ``kernels.glm.state``).

``CPProblem`` holds what a sweep reads and does not change: the entries, their layout by object,
the prior (rewritten in place by the hyper-layer between sweeps), the quadrature rule and the
choices made once per fit. ``CPStore`` holds the message store and the per-object posterior that
the sweeps change. ``CPScratch`` holds the work space (allocated once per fit, never inside the
loop; the parts a fit does not use are empty arrays of the right number of dimensions).

The kernel-side store is not called ``CPState``: that name is the public resumable state
(``fastcep.CPState``: messages, hyper-posterior, likelihood), which a checkpoint holds. A generic
model's likelihood goes beside the three as an argument of its own (a tuple inside a tuple cannot
enter a numba parallel loop; ``None`` for the hand-written models, see ``messages.by_likelihood``).

The parallel drivers take each array into a local name of its own, at most three to a line
(``M, S, E2 = store.M, store.S, store.E2``, which Python compiles to plain stores), never by
unpacking a tuple: numba's parfor pass loses track of an array that such an assignment unpacks
(``... = store``, or four names or more, which build a tuple first) and drops the loop's writes
to it as dead code (seen: a cavity sweep's skipped counts were lost; ``test_cp_kernels`` checks
them; ``tests/test_style.py`` holds the rule).

Shapes: n entries, K modes, R rank, n_obj objects; ``B`` is R x R for full covariances and R for
diagonal ones (so Lam is (n, K, R, R) or (n, K, R), P_Lam and S (n_obj, R, R) or (n_obj, R)).
"""

from typing import NamedTuple

import numpy as np

from .cavity import CAVITY_BATCH
from .lp import LP_MATS, LP_VECS
from .messages import ENTRY_MATS, ENTRY_VECS


class CPProblem(NamedTuple):
    """What the sweeps read and do not change."""

    gidx: np.ndarray  #: (n, K) int64 the global object of each entry's modes
    y: np.ndarray  #: (n,) values (binary models: the labels' signs)
    s: np.ndarray  #: (n,) label signs (zeros for the other models)
    ptr: np.ndarray  #: (n_obj + 1,) CSR pointers: the entries of object o are ent[ptr[o]:ptr[o + 1]]
    ent: np.ndarray  #: (n K,) entry ids grouped by object
    obj_mode: np.ndarray  #: (n_obj,) the mode of each object
    prior_Lam: np.ndarray  #: (n_obj, B) per-object prior precisions (the hyper-layer rewrites them)
    prior_eta: np.ndarray  #: (n_obj, R) per-object prior precision-times-means
    code: int  #: the model code (``messages.MODEL_*``)
    obj_chunk: int  #: objects per parallel work unit of the rebuilds
    nodes: np.ndarray = np.empty(0)  #: (J,) a generic model's Gauss-Hermite nodes, (0,) for the others
    weights: np.ndarray = np.empty(0)  #: (J,) their weights
    lp_rule: int = 0  #: method "lp": what an indefinite Laplace message does (``lp.LP_*``)
    with_noise: bool = False  #: cp_gaussian's noise messages in the sweep's own pass over the entries
    with_sums: bool = False  #: the parallel sweep sums each work unit's messages per object (``part_L``)


class CPStore(NamedTuple):
    """The messages and the posterior: what a sweep changes."""

    Lam: np.ndarray  #: (n, K, B) each entry's message precisions to its K objects
    eta: np.ndarray  #: (n, K, R) their precision-times-means
    alpha: np.ndarray  #: (n,) cp_gaussian's Gamma noise messages: shapes
    beta: np.ndarray  #: (n,) and rates
    P_Lam: np.ndarray  #: (n_obj, B) posterior precisions = prior + messages
    P_eta: np.ndarray  #: (n_obj, R) posterior precision-times-means
    M: np.ndarray  #: (n_obj, R) posterior means
    S: np.ndarray  #: (n_obj, B) posterior covariances (variances)
    E2: np.ndarray  #: (n_obj, B) second moments E[z z^T] (E[z^2])
    noise: np.ndarray  #: (3,) the noise posterior's (a, b) and the E[tau] the messages use


class CPScratch(NamedTuple):
    """Work space of the sweeps and rebuilds, per work unit c (a fixed range of entries or
    objects, so nothing depends on the thread count)."""

    skipped: np.ndarray  #: (n_chunks,) int64 messages not applied, per work unit
    mat: np.ndarray  #: (n_chunks, ENTRY_MATS, R, R) an entry's matrices (full covariances)
    vec: np.ndarray  #: (n_chunks, ENTRY_VECS, R) its vectors; (n_chunks, 2) for diagonal ones
    Ls: np.ndarray  #: (n_obj_chunks, R, R) a Cholesky factor per object work unit
    bad: np.ndarray  #: (n_obj,) int64 1 where a posterior is not proper (or the guard refuses it)
    part_L: np.ndarray  #: (n_groups, n_obj, R, R) with_sums: each group's message sums per object
    part_e: np.ndarray  #: (n_groups, n_obj, R)
    #: expect_under="cavity": one entry's cavity moments (K, R), (K, R, R), then a batch's blocks
    #: (2, R, R, CAVITY_BATCH), rows (2, R, B), moments (K, R, B), (K, R, R, B) and flags (B,)
    cav_M: np.ndarray
    cav_E2: np.ndarray
    cav_mat: np.ndarray
    cav_vec: np.ndarray
    cav_Mb: np.ndarray
    cav_E2b: np.ndarray
    cav_ok: np.ndarray
    #: method "lp": the cavities (K, R, R), (K, R), the messages (K, R, R), (K, R), their flags
    #: (K,) and the joint mode's (LP_MATS, K R, K R), (LP_VECS, K R) per entry work unit
    lp_Lc: np.ndarray
    lp_ec: np.ndarray
    lp_Lmsg: np.ndarray
    lp_emsg: np.ndarray
    lp_ok: np.ndarray
    lp_mat: np.ndarray
    lp_vec: np.ndarray
    #: the sequential schedule (full covariances): an entry's messages before its update (K, R,
    #: R), (K, R) and a Cholesky factor (R, R)
    seq_L: np.ndarray
    seq_e: np.ndarray
    seq_tmp: np.ndarray
    #: the guard of messages of negative precision (``posterior.restore_objects``): the messages
    #: and posterior precisions of before the sweep (shaped as Lam, eta, P_Lam), the messages
    #: pulled back per object (n_obj,) int64, and scratch of ``mark_shrunk`` (as Ls)
    old_Lam: np.ndarray
    old_eta: np.ndarray
    old_P: np.ndarray
    restored: np.ndarray
    guard_A: np.ndarray


def _empty(*shape, dtype=np.float64):
    """An unused part of the scratch: no elements, the part's number of dimensions."""
    return np.empty((0,) * len(shape), dtype=dtype)


def scratch(
    store, n_chunks, obj_chunk, *, n_groups=0, cav_units=0, lp=False, guard=False, empty=np.empty,
    zeros=np.zeros,
):  # fmt: skip
    """The scratch of a fit whose messages and posterior are ``store``: ``n_chunks`` entry work
    units; with ``n_groups`` > 0 the per-group sums of the parallel sweep, with ``cav_units`` > 0
    the cavity sweep's units, with ``lp`` the Laplace method's per-unit scratch, with ``guard``
    the guard's copies. ``empty`` and ``zeros`` allocate its arrays (numpy's, or a stream's
    buffers kept across its batches: ``fastcep.tensor.engine.BufferPool``)."""
    n, K, R = store.eta.shape
    n_obj = store.M.shape[0]
    covariance = "full" if store.Lam.ndim == 4 else "diag"
    full = covariance == "full"
    B = CAVITY_BATCH
    KR = K * R
    if full:
        mat, vec = empty((n_chunks, ENTRY_MATS, R, R)), empty((n_chunks, ENTRY_VECS, R))
        Ls = empty((-(-n_obj // obj_chunk), R, R))
        seq = (empty((K, R, R)), empty((K, R)), empty((R, R)))
    else:
        mat, vec = _empty(1, 1, 1, 1), empty((n_chunks, 2))
        Ls = _empty(1, 1, 1)
        seq = (_empty(1, 1, 1), _empty(1, 1), _empty(1, 1))
    if n_groups:
        part = (empty((n_groups, n_obj, R, R)), empty((n_groups, n_obj, R)))
    else:
        part = (empty((1, 0, R, R)), empty((1, 0, R)))
    u = cav_units
    cav = (
        empty((u, K, R)),
        empty((u, K, R, R)),
        empty((u, 2, R, R, B)),
        empty((u, 2, R, B)),
        empty((u, K, R, B)),
        empty((u, K, R, R, B)),
        empty((u, B), dtype=np.bool_),
    )
    m = n_chunks if lp else 0
    lps = (
        empty((m, K, R, R)),
        empty((m, K, R)),
        empty((m, K, R, R)),
        empty((m, K, R)),
        zeros((m, K), dtype=np.bool_),
        empty((m, LP_MATS, KR, KR)),
        empty((m, LP_VECS, KR)),
    )
    if guard:
        old = (empty(store.Lam.shape), empty(store.eta.shape), empty(store.P_Lam.shape))
        guard_A = empty(Ls.shape)
    else:
        old = (_empty(*store.Lam.shape), _empty(1, 1, 1), _empty(*store.P_Lam.shape))
        guard_A = _empty(*Ls.shape)
    restored = zeros(n_obj if guard else 0, dtype=np.int64)
    skipped, bad = zeros(n_chunks, dtype=np.int64), zeros(n_obj, dtype=np.int64)
    return CPScratch(skipped, mat, vec, Ls, bad, *part, *cav, *lps, *seq, *old, restored, guard_A)
