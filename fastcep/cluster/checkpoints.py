"""A cluster fit's checkpoints (``checkpoint=``, ``checkpoint_every=``, ``resume=``): the client's
state, for regression (``cluster.regression``) and CP (``cluster.cp``) fits and streams alike.

The client holds the whole fit's posterior and the reduce; the sites stay on the workers. A
checkpoint is the client's state every ``checkpoint_every`` sweeps and at the end: the arrays of
the posterior (and what else the next sweep reads: a CP fit's noise, prior and hyper-posterior),
its position (sweeps done, the damping) and the trace, bound to the fit's settings and to the
digest of its data (``fastcep.io.checkpoint.write_fit_checkpoint``, signed and written
atomically). ``resume=True`` starts from it with the sites on the workers restarted against
its posterior (a regression's flat, as a lost partition's; a CP fit's at each object's average
site, whose sums are the checkpoint's), and the fit goes on to the same fixed point (within the
stopping rule's tolerance), its sweep count and trace going on from the checkpoint's. A
cluster stream (``cluster.stream``) keeps its state in the same file format after every pass,
the shards' messages included: it resumes with the next pass, bit for bit.
"""

import os

import numpy as np

from .. import _loop
from ..io.checkpoint import read_fit_checkpoint, write_fit_checkpoint
from ..io.files import check_output


def check_path(o, func):
    """A new checkpoint's path (not one to resume from) checked before any work: a folder it can
    write, not an input."""
    if o["checkpoint"] is not None and not (o["resume"] and os.path.exists(o["checkpoint"])):
        check_output(o["checkpoint"], [], "checkpoint", func)


class Checkpoints:
    """The checkpoints of one cluster fit.

    Parameters
    ----------
    o : dict
        The fit's validated options (``checkpoint``, ``checkpoint_every``, ``resume``).
    digest : str or None
        The digest of the fit's data (``data_digest`` or the entries' own).
    keys : dict
        The settings a resumed fit must share with the checkpoint's (JSON values).
    state : callable
        ``state()``: (name -> array, name -> number) of the client's state now.
    restore : callable
        ``restore(arrays, position)`` puts a checkpoint's state into the fit.
    shapes : dict
        name -> shape of every array ``state`` gives (checked when read).
    func : str
        The entry point, for messages.
    """

    def __init__(self, o, digest, keys, state, restore, shapes, func):
        self.path, self.every, self.func = o["checkpoint"], o["checkpoint_every"], func
        self.keys, self.state, self.restore, self.shapes = keys, state, restore, shapes
        self.done, self.before = 0, None
        self.resuming = bool(o["resume"]) and self.path is not None and os.path.exists(self.path)
        self.digest = digest

    def resume(self):
        """The checkpoint's state into the fit (if resuming); the sweeps done."""
        if not self.resuming:
            return 0
        arrays, position, self.before = read_fit_checkpoint(
            self.path, self.keys, list(self.keys), self.digest, self.shapes, self.func
        )
        self.restore(arrays, position)
        self.done = int(position["sweeps"])
        return self.done

    def callback(self, user):
        """The fit's callback: a checkpoint every ``every`` sweeps, then the user's."""
        if self.path is None:
            return user

        def keep(info):
            if info.iteration % self.every == 0:  # (the fit's iterations: from the checkpoint's on)
                self.write(self.trace(info.result.trace))
            return user(info) if user is not None else None

        return keep

    def trace(self, new):
        """The whole fit's trace: the checkpoint's rows, then this run's (elapsed from there)."""
        if self.before is None:
            return new
        n0 = len(self.before["elapsed"])
        shift = {"elapsed": float(self.before["elapsed"][-1]) if n0 else 0.0}
        columns = {
            name: np.concatenate([self.before[name], np.asarray(getattr(new, name)) + shift.get(name, 0)])
            for name in new._fields
        }
        return _loop.Trace.from_columns(n0 + len(new.elapsed), **columns)

    def write(self, trace):
        if self.path is None:
            return
        arrays, position = self.state()
        position = dict(position, sweeps=len(trace.elapsed))
        write_fit_checkpoint(self.path, arrays, position, self.keys, trace, self.digest)

    def options(self, options):
        """The result's options with the checkpoint's path and the sweep it resumed at."""
        if self.path is not None:
            options.update(checkpoint=os.fspath(self.path), resumed_at=self.done)
        return options
