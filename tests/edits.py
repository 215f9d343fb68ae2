"""Edit a fastcep file in place with h5py, then sign and seal it again: only the checks of its
fields can catch the edit (an edit left unsigned fails the checksum, one left unsealed the seal)."""

import contextlib

import h5py

from fastcep.io.files import reseal, sign


@contextlib.contextmanager
def edited(path, resign=True):
    """``with edited(path) as f:`` the file open for writing (``h5py.File``); at the end signed
    again (``resign``) and sealed again."""
    with h5py.File(path, "a") as f:
        yield f
        if resign:
            sign(f)
    reseal(path)
