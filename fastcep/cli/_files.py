"""The verbs' files: an output refused before any work (``check_output``); what a file of the
wrong kind is and the command that takes it (``fix``, ``with_fix``); the readers whose errors end
with that fix (``read_tensor``, ``check_tensor``, ``load_cp_model``, ``load_glm_model``,
``read_table``)."""

import os
import shlex

from ..io import formats as F
from ..io.kinds import KIND_WORDS
from ._common import UserError

#: the fastcep format of each kind of file a verb asks for
_FORMAT = {"tensor": F.TENSOR_FORMAT, "model": F.MODEL_FORMAT, "glm-model": F.GLM_MODEL_FORMAT}
#: where each kind of file comes from (the fix when a file is nothing a verb can use)
COMES_FROM = {
    "tensor": "a tensor file comes from `fastcep convert` (a text tensor) or fastcep.write_tensor",
    "model": "a CP model file comes from `fastcep fit` or `fastcep stream`",
    "glm-model": "a regression model file comes from `fastcep glm fit`",
    "table": "regression data is a CSV file with a header row of column names, or an HDF5 file of "
    "one 1-D dataset per column",
    None: "`fastcep info` describes fastcep's tensor, sparse-row, model and checkpoint files",
}
#: what ``existing_kind`` calls a file, in words (the refusal of an output that exists)
WORDS = {**KIND_WORDS, "png": "a PNG image"}
_PNG = b"\x89PNG\r\n\x1a\n"


def fix(path, wanted):
    """What ``path`` is and what to do with it, where a ``wanted`` file ("tensor", "model",
    "glm-model", "table" or None: any fastcep file) was asked for; None if nothing to add."""
    from ..io.kinds import checked_kind

    kind = checked_kind(path)  # (a damaged file: its error says so, and HDF5 never parses it)
    if kind in ("missing", "folder", "hdf5-stream", "damaged", _FORMAT.get(wanted)) or (
        kind in ("table", "hdf5") and wanted == "table"
    ):
        return None
    p = shlex.quote(path)
    if kind == F.TENSOR_FORMAT:
        return f"it is a tensor file: decompose it with `fastcep fit {p} -o MODEL.h5 --model MODEL --rank R`"
    if kind == F.MODEL_FORMAT:
        return f"it is a CP model file: evaluate it with `fastcep evaluate {p} TEST.h5`"
    if kind == F.GLM_MODEL_FORMAT:
        return f"it is a regression model file: evaluate it with `fastcep glm evaluate {p} DATA`"
    if kind == F.CHECKPOINT_FORMAT:
        return (
            f"it is a stream checkpoint: continue its stream with `fastcep stream TENSOR.h5 -o MODEL.h5 "
            f"--checkpoint {p} --resume` and the stream's options"
        )
    if kind == F.FIT_CHECKPOINT_FORMAT:
        return (
            f"it is the checkpoint of a fit or stream on a cluster: continue it with its command and "
            f"--scheduler ADDRESS --checkpoint {p} --resume"
        )
    if kind in (F.CSR_FORMAT, "svmlight"):
        return (
            f"it holds labelled sparse rows: regression data for `fastcep glm fit {p} -o MODEL.h5` or "
            f"`fastcep glm stream {p} -o MODEL.h5`"
        )
    if kind == "numbers" and wanted == "table":
        return "its first line holds numbers, not column names: add a header row"
    if kind == "numbers":
        dst = shlex.quote(os.path.splitext(path)[0] + ".h5")
        return f"it looks like a text tensor: convert it with `fastcep convert {p} {dst}`"
    if kind == "table":
        return (
            f"it is text with a header row: regression data for `fastcep glm fit {p} --target COL -o "
            "MODEL.h5`, or a text tensor to convert with `fastcep convert`"
        )
    return COMES_FROM[wanted]


def with_fix(exc, path, wanted):
    """``exc``, an error about ``path``, as a one-line UserError ending with the fix (``fix``)."""
    msg = str(exc).splitlines()[0].rstrip(".") if str(exc) else type(exc).__name__
    hint = fix(path, wanted)
    return UserError(f"{msg}; {hint}" if hint else msg)


def read_tensor(path, max_entries=None):
    """``(coords, values, shape)`` of a tensor file; over ``max_entries`` entries: UserError."""
    from ..io import FileFormatError, TensorReader

    try:
        with TensorReader(path) as r:
            if max_entries is not None and r.n > max_entries:
                raise UserError(
                    f"{path!r} has {r.n} entries; 'fit' holds them in memory (limit --max-entries "
                    f"{max_entries}); use 'fastcep stream' for out-of-core decomposition"
                )
            coords, values = r.read()
            return coords, values, tuple(r.shape)
    except FileFormatError as exc:
        raise with_fix(exc, path, "tensor") from None


def check_tensor(path):
    """Open a tensor file and check its metadata (the stream reads it itself)."""
    from ..io import FileFormatError, TensorReader

    try:
        with TensorReader(path):
            pass
    except FileFormatError as exc:
        raise with_fix(exc, path, "tensor") from None


def load_cp_model(path):
    """The ``CPResult`` of a CP model file; its errors end with the fix."""
    from ..io import FileFormatError, load_model

    try:
        return load_model(path)
    except FileFormatError as exc:
        raise with_fix(exc, path, "model") from None


def load_glm_model(path):
    """The ``GLMModel`` of a regression model file; its errors end with the fix."""
    from ..io import FileFormatError
    from ..io import load_glm_model as load

    try:
        return load(path)
    except FileFormatError as exc:
        raise with_fix(exc, path, "glm-model") from None


def read_table(path, columns, delimiter):
    """The ``Table`` of a CSV file or HDF5 table; its errors end with the fix."""
    from ..io import FileFormatError
    from ..io import read_table as read

    try:
        return read(path, columns, delimiter)
    except FileFormatError as exc:
        raise with_fix(exc, path, "table") from None


def existing_kind(path):
    """``io.kinds.checked_kind`` of ``path`` (HDF5 never parses a damaged file), with "png" for a
    PNG image."""
    from ..io.kinds import checked_kind

    kind = checked_kind(path)
    if kind == "binary":
        with open(path, "rb") as fh:
            if fh.read(len(_PNG)) == _PNG:
                return "png"
    return kind


def check_output(path, flag, inputs=(), kind=None, force=False):
    """Before any work: refuse an output path (of option ``flag``) that is one of the run's
    inputs, however named, a device, a FIFO, a socket, a read-only file, or whose folder does
    not exist or cannot be written (``io.files.check_output``). And one that exists and is not a
    file of ``kind`` (a fastcep format, or "png"), which the run would replace, unless ``force``
    (``--force``; ``io.kinds.check_replaceable``)."""
    from ..io.files import check_output as check
    from ..io.kinds import check_replaceable

    check(path, inputs, f"output ({flag})")
    if kind is None or force or path is None:
        return
    try:
        check_replaceable(path, kind, f"output ({flag})", "--force", existing_kind, WORDS)
    except FileExistsError as exc:
        raise UserError(str(exc)) from None


#: the arguments of each verb that name files, and how its messages call them (``distinct_paths``)
PATH_ARGS = {
    "convert": ("src", "dst"),
    "info": ("file",),
    "fit": ("tensor", "output", "checkpoint", "plot"),
    "stream": ("tensor", "output", "checkpoint", "plot"),
    "evaluate": ("model", "tensor", "plot"),
    "glm fit": ("data", "output", "checkpoint", "plot"),
    "glm evaluate": ("model", "data", "plot"),
    "glm stream": ("data", "init", "output", "checkpoint"),
}
_FLAG_WORDS = {"output": "-o", "checkpoint": "--checkpoint", "plot": "--plot", "init": "--init"}
#: the file arguments that are written
_OUTPUTS = {"dst", "output", "checkpoint", "plot"}


def _same_path(a, b):
    from ..io.files import same_file

    return same_file(a, b) or os.path.realpath(a) == os.path.realpath(b)


def distinct_paths(args, verb):
    """Before any work: refuse a command that gives one file as an output and again as another
    output or an input (``-o X --plot X``, ``--init M -o M``), however named, whether it exists
    yet or not (``PATH_ARGS``)."""
    given = [(name, getattr(args, name, None)) for name in PATH_ARGS.get(verb, ())]
    given = [(name, os.fspath(path)) for name, path in given if path is not None]
    for i, (a, pa) in enumerate(given):
        for b, pb in given[i + 1 :]:
            if (a not in _OUTPUTS and b not in _OUTPUTS) or not _same_path(pa, pb):
                continue  # (an input read twice is harmless)
            wa, wb = (_FLAG_WORDS.get(n, n.upper()) for n in (a, b))
            if (a in _OUTPUTS) != (b in _OUTPUTS):  # (an input and an output)
                (out, wo), (inp, wi) = ((pa, wa), (pb, wb)) if a in _OUTPUTS else ((pb, wb), (pa, wa))
                raise UserError(
                    f"the output ({wo}) {out!r} is the input file {inp!r} ({wi}); it would be overwritten: "
                    "choose another path"
                )
            raise UserError(
                f"{pa!r} is given as {wa} and as {wb}; one file cannot be both: give each its own path"
            )
