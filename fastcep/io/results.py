"""One save and one load for every fitted result (``fastcep.save``, ``fastcep.load``).

A regression result (any likelihood and method) is written as a regression model file
(``glm_model``), a CP result (every method: CEP, LP, VMP, CP-WOPT, and a stream's) as a CP model
file (``model``). Each file names what it holds in its ``format`` attribute, and ``load`` reads
that attribute to choose the reader; a file of another kind (a tensor, a stream checkpoint, a
table) is refused with what it is and what reads it.
"""

import os

from ..glm.result import RegressionResult
from ..results import register_writer
from ..tensor.result import CPResult
from .checkpoint import CHECKPOINT_FORMAT
from .files import FileFormatError, check_output, open_h5
from .glm_model import GLM_MODEL_FORMAT, load_glm_model, save_glm_model
from .kinds import KIND_WORDS, check_replaceable, checked_kind
from .model import MODEL_FORMAT, load_model, save_model
from .tensor import TENSOR_FORMAT

#: what reads each other fastcep file: named in ``load``'s error
_OTHER_READERS = {
    TENSOR_FORMAT: "a tensor: read it with fastcep.read_tensor or fastcep.TensorReader",
    CHECKPOINT_FORMAT: "a stream checkpoint: resume it with fastcep.stream(..., checkpoint=path, "
    "resume=True)",
}


def save(result, path, features=None, target="", force=False):
    """Write a fitted result to ``path`` (HDF5, atomically: a temporary file beside it, renamed
    over it when complete); read it back with ``fastcep.load``. A model file of the result's
    kind is replaced; any other file (data, a model of the other kind) only with ``force``, and
    never a device, a FIFO, a socket, a folder or a read-only file. A link is written through.

    Parameters
    ----------
    result : RegressionResult or CPResult
        What ``fastcep.fit`` or ``fastcep.stream`` returned (a ``Custom`` likelihood, code, cannot
        be written).
    path : str or PathLike
    features : sequence of str, optional
        Regression only: one distinct name per weight, in the order of X's columns, kept in the
        file (``res.features`` after ``load``); default: the result's own names, or none (the
        columns known by their positions, ``res.features`` None).
    target : str
        Regression only: the name of the label column ("" if unknown).
    force : bool
        Replace an existing file that is not a model of the result's kind.
    """
    if not isinstance(result, (RegressionResult, CPResult)):
        raise TypeError(
            f"save: expected a RegressionResult or a CPResult (what fastcep.fit and fastcep.stream "
            f"return), got {type(result).__name__}."
        )
    if isinstance(result, CPResult) and (features is not None or target):
        raise ValueError("save: 'features' and 'target' name a regression's columns; a CP result has none.")
    regression = isinstance(result, RegressionResult)
    check_output(path, (), "output", "save")
    if not force:
        kind = GLM_MODEL_FORMAT if regression else MODEL_FORMAT
        check_replaceable(path, kind, "output", "force=True", checked_kind)
    if regression:
        save_glm_model(result, path, result.features if features is None else features, target)
    else:
        save_model(result, path)


def load(path):
    """Read a result written by ``fastcep.save`` (or by ``save_model``, ``save_glm_model`` and
    ``fastcep glm fit``).

    Returns
    -------
    RegressionResult or CPResult
        As the file says (its ``format`` attribute), without the message state; it predicts as
        the fitted result did. A regression's feature names and target are ``res.features`` and
        ``res.target``.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    FileFormatError
        If the file is not a fastcep model of either kind (it says what the file is), or is
        corrupt, of another version, or inconsistent.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"load: no such file {path!r}.")
    kind = checked_kind(path)  # (HDF5 never parses a damaged file)
    if kind == "damaged":  # (its FileFormatError says what is wrong)
        open_h5(path, "model", "load").close()
    if kind == GLM_MODEL_FORMAT:
        return load_glm_model(path).result
    if kind == MODEL_FORMAT:
        return load_model(path)
    what = _OTHER_READERS.get(kind) or KIND_WORDS.get(kind, kind)
    raise FileFormatError(
        f"load: {path!r} is not a fastcep model file ({GLM_MODEL_FORMAT!r} or {MODEL_FORMAT!r}): "
        f"it is {what}."
    )


register_writer(save)  # (the results' own ``save`` methods write through ``fastcep.results``)
