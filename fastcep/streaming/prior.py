"""A stream's learned prior: the hierarchical prior of ``fastcep.tensor.hyper`` under ADF.

The stream absorbs each batch into the posterior of the objects it touches; the posterior of an
object holds one prior message, the hyper-posterior's at some time. ``PriorLedger`` keeps the
hyper-posterior, the per-mode sums of the seen objects' posterior moments it is learned from,
the prior message of every version of it (one version a batch) and the version each object's
posterior holds. Around a batch:

- ``before``: the batch's objects get the current prior message: a seen object's posterior
  swaps its old message for it (precisions and precision-times-means are sums of messages), a
  new object starts from it;
- ``after``: the batch's objects' new moments replace their old ones in the sums, and one VMP
  update gives the next version of the hyper-posterior.

Nothing is done for objects the batch does not touch; at the end of the stream (``finish``)
every object's posterior takes the last version's message. The ledger's arrays are part of the
``StreamState`` (``StreamPrior``) and of checkpoints.
"""

import numpy as np

from ..results import StreamPrior
from ..tensor import hyper as H


class PriorLedger:
    """The learned prior of one stream, updated around each batch: ``start`` for a fresh stream,
    or built from the ``StreamPrior`` of a state or checkpoint (its arrays are copied)."""

    def __init__(self, prior, offsets, covariance):
        self.offsets, self.covariance = offsets, covariance
        self.hyper = prior.hyper
        self.counts, self.sum_M, self.sum_E2, self.version = (np.array(a) for a in prior[1:5])
        n = len(prior.msg_Lam)
        self._Lam = _grown(prior.msg_Lam, max(8, 2 * n))
        self._eta = _grown(prior.msg_eta, max(8, 2 * n))
        self.n_versions = n

    @classmethod
    def start(cls, kind, offsets, R, prior_var, covariance):
        """A fresh stream's ledger: the fixed prior N(0, prior_var I) as version 0, no object seen."""
        Kmodes = len(offsets) - 1
        hyper = H.initial(kind, Kmodes, R, prior_var)
        Lam, eta = H.messages(hyper, Kmodes, covariance)
        cov = (Kmodes, R, R) if covariance == "full" else (Kmodes, R)
        version = np.full(int(offsets[-1]), -1, dtype=np.int64)
        prior = StreamPrior(
            hyper, np.zeros(Kmodes), np.zeros((Kmodes, R)), np.zeros(cov), version, Lam[None], eta[None]
        )
        return cls(prior, offsets, covariance)

    def state(self):
        """The ``StreamPrior`` (views of the ledger's arrays: copy what you keep)."""
        V = self.n_versions
        return StreamPrior(
            self.hyper, self.counts, self.sum_M, self.sum_E2, self.version, self._Lam[:V], self._eta[:V]
        )

    def before(self, glob, new, P_Lam, P_eta):
        """The current prior message into the posterior of the batch's objects ``glob`` (``new``:
        first seen now). Returns the prior means of the new objects (n_new, R)."""
        modes = self._to_current(glob, P_Lam, P_eta)
        if self.hyper.kind == "ard":
            return np.zeros((int(np.count_nonzero(new)), P_eta.shape[1]))
        return self.hyper.mean[modes[new]]

    def _to_current(self, objs, P_Lam, P_eta):
        """The current version's prior message into the posterior of ``objs``: swapped for the
        message it holds (precisions and precision-times-means are sums of messages), or set
        where it holds none (never seen). Returns the objects' modes."""
        cur = self.n_versions - 1
        modes = np.searchsorted(self.offsets, objs, side="right") - 1
        old = self.version[objs]
        held = old >= 0
        g, k, v = objs[held], modes[held], old[held]
        P_Lam[g] += self._Lam[cur, k] - self._Lam[v, k]
        P_eta[g] += self._eta[cur, k] - self._eta[v, k]
        P_Lam[objs[~held]] = self._Lam[cur, modes[~held]]
        P_eta[objs[~held]] = self._eta[cur, modes[~held]]
        self.version[objs] = cur
        return modes

    def after(self, glob, new, M_old, S_old, M_new, S_new):
        """The batch's objects' moments, before (``M_old``, ``S_old``: of the seen ones; ignored
        for ``new``) and after the batch, into the sums; the next version of the hyper-posterior.
        ``glob`` is sorted (each mode's objects in turn)."""
        cov = self.covariance
        Kmodes = len(self.offsets) - 1
        bounds = np.searchsorted(glob, self.offsets)
        for k in range(Kmodes):
            part = slice(bounds[k], bounds[k + 1])
            seen = ~new[part]
            M_o, S_o = M_old[part][seen], S_old[part][seen]
            self.counts[k] += np.count_nonzero(new[part])
            self.sum_M[k] += M_new[part].sum(axis=0) - M_o.sum(axis=0)
            self.sum_E2[k] += second_moment_sum(M_new[part], S_new[part]) - second_moment_sum(M_o, S_o)
        self.hyper = H.update_from_sums(self.hyper, self.counts, self.sum_M, self.sum_E2)
        Lam, eta = H.messages(self.hyper, Kmodes, cov)
        if self.n_versions == len(self._Lam):
            self._Lam = _grown(self._Lam, 2 * self.n_versions)
            self._eta = _grown(self._eta, 2 * self.n_versions)
        self._Lam[self.n_versions], self._eta[self.n_versions] = Lam, eta
        self.n_versions += 1

    def finish(self, P_Lam, P_eta, M, S):
        """At the end of the stream: every object's posterior takes the last version's prior
        message (objects never seen: the prior itself); their moments again."""
        self._to_current(np.arange(len(self.version)), P_Lam, P_eta)
        if self.covariance == "full":
            S[:] = np.linalg.inv(P_Lam)
            S[:] = 0.5 * (S + np.swapaxes(S, 1, 2))
            M[:] = np.einsum("oij,oj->oi", S, P_eta)
        else:
            S[:] = 1.0 / P_Lam
            M[:] = S * P_eta


def second_moment_sum(M, S):
    """sum_j E[u_j u_j^T] = sum_j S_j + M^T M (R, R), or its diagonal (R,) for variances S (n, R)
    (numpy's own loops, not BLAS: the same bits whatever the machine's BLAS threads)."""
    if S.ndim == 3:
        return S.sum(axis=0) + np.einsum("ji,jk->ik", M, M)
    return S.sum(axis=0) + np.einsum("jr,jr->r", M, M)


def _grown(a, capacity):
    """``a`` (n, ...) copied into a buffer of ``capacity`` rows (the versions grow by doubling)."""
    out = np.empty((capacity, *a.shape[1:]))
    out[: len(a)] = a
    return out
