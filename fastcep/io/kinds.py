"""What a file holds, from its first bytes and its format attribute: lets an error about a file of
the wrong kind say what the file is and what to do with it (the command line's hints)."""

import os
import re

import h5py

from .files import FileFormatError, open_verified, sealed_kind, unsealed_hdf5
from .formats import (
    CHECKPOINT_FORMAT,
    CSR_FORMAT,
    FIT_CHECKPOINT_FORMAT,
    GLM_MODEL_FORMAT,
    MODEL_FORMAT,
    TENSOR_FORMAT,
)
from .sources import GZIP_MAGIC, HEAD_BYTES, decompressed_head, head, is_hdf5_head, stream_words

#: what ``file_kind`` calls a file, in words (e.g. the refusal of an output that exists)
KIND_WORDS = {
    "numbers": "text of numbers (a text tensor?)",
    "table": "a text table (CSV data?)",
    "text": "text",
    "binary": "a binary file",
    "hdf5": "an HDF5 file that is not fastcep's",
    "unreadable": "a file that cannot be read",
    "damaged-hdf5": "a damaged HDF5 file (cut short or corrupt: h5py cannot open it)",
    "damaged": "a damaged file (it fails its checksum or its checks: cut short or corrupt)",
    "hdf5-stream": "HDF5 through a pipe or device (HDF5 is read by seeking: write it to a file)",
    TENSOR_FORMAT: "a fastcep tensor",
    MODEL_FORMAT: "a fastcep CP model",
    GLM_MODEL_FORMAT: "a fastcep regression model",
    CHECKPOINT_FORMAT: "a fastcep stream checkpoint",
    FIT_CHECKPOINT_FORMAT: "a fastcep cluster fit checkpoint",
    CSR_FORMAT: "fastcep sparse rows",
    "svmlight": "svmlight text (sparse rows)",
}

#: the rows (non-blank, not only a comment) whose shape decides between svmlight and the rest
SAMPLE_ROWS = 32
_FIELD = re.compile(r"[,\t; ]+")


def _is_number(word):
    try:
        float(word)
    except ValueError:
        return False
    return True


def _svmlight_row(body):
    """Whether a row (its comment cut off) is shaped as svmlight: a label, then ``index:value``
    fields (``qid:`` among them) or none."""
    words = body.split()
    if not words or ":" in words[0]:
        return False
    if len(words) == 1:
        return _is_number(words[0])
    return all(w.count(":") == 1 for w in words[1:])


def _text_kind(text, cut=False):
    """The kind of a file's text start; ``cut``: its last line may be cut short."""
    lines = text.splitlines()
    if cut and lines:
        lines.pop()
    bodies = [b for b in (ln.split("#", 1)[0] for ln in lines) if b.strip()][:SAMPLE_ROWS]
    if bodies and all(_svmlight_row(b) for b in bodies):
        return "svmlight"
    line = bodies[0] if bodies else ""
    fields = [f for f in _FIELD.split(line.strip()) if f]
    if fields and all(_is_number(f) for f in fields):
        return "numbers"
    return "table" if len(fields) >= 2 and ("," in line or "\t" in line) else "text"


def file_kind(path):
    """What ``path`` holds, from its first bytes (a pipe's or FIFO's are kept for its reader:
    ``sources.head``) and, for HDF5, its format attribute.

    Returns
    -------
    str
        "missing", "folder", "empty", "svmlight" (text whose first rows are ``label
        index:value ...`` or a lone label), "numbers" (UTF-8 text whose first line is numbers: a
        text tensor, say), "table" (UTF-8 text whose first line is comma or tab separated fields,
        not all numbers: a CSV header), "text" (other text), "binary" (neither text nor HDF5),
        "hdf5" (HDF5 without a fastcep format attribute), "damaged-hdf5" (HDF5's signature, but
        h5py cannot open it), "hdf5-stream" (HDF5 through a pipe or device, which HDF5 cannot
        read), "unreadable", or the fastcep format attribute ("fastcep-tensor",
        "fastcep-cp-model", "fastcep-glm-model", "fastcep-csr", ...). gzip-compressed text is of
        the kind of the text it holds.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        return "missing"
    if os.path.isdir(path):
        return "folder"
    streamed = stream_words(path) is not None
    try:
        if not streamed and h5py.is_hdf5(path):
            try:
                with h5py.File(path, "r") as f:
                    fmt = f.attrs.get("format")
            except (OSError, KeyError, RuntimeError, ValueError):  # (a damaged file fails anywhere in h5py)
                return "damaged-hdf5"
            return fmt if isinstance(fmt, str) and fmt.startswith("fastcep-") else "hdf5"
        raw = head(path)
    except (OSError, KeyError, RuntimeError, ValueError):
        return "unreadable"
    if streamed and is_hdf5_head(raw):
        return "hdf5-stream"
    if not raw:
        return "empty"
    data = decompressed_head(raw)
    if data is None or b"\0" in data:
        return "binary"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(data) - 3:  # (not a character cut at the end of the head)
            return "binary"
        text = data[: exc.start].decode("utf-8")
    cut = len(raw) == HEAD_BYTES or raw[:2] == GZIP_MAGIC
    return _text_kind(text, cut=cut and not text.endswith("\n"))


def checked_kind(path):
    """``file_kind`` of ``path``, for a file checked first so that HDF5 cannot crash or hang
    on it: a sealed file's format from its seal; "damaged" for a file that fails its seal or
    (unsealed HDF5) the checks of ``open_verified``."""
    if not os.path.isfile(path):  # (a folder, a device, a FIFO: never opened here)
        return file_kind(path)
    kind = sealed_kind(path)
    if kind is None and unsealed_hdf5(path):
        try:
            open_verified(path, FileFormatError).close()
        except FileFormatError:
            kind = "damaged"
    return file_kind(path) if kind is None else kind


def check_replaceable(path, kind, what, force_hint, kind_of, words=KIND_WORDS):
    """Refuse to replace a file at ``path`` that holds something other than a file of ``kind``
    (a fastcep format): a data file, another kind of model. A missing or empty file holds
    nothing to lose. ``what`` names the output, ``force_hint`` how to replace it anyway;
    ``kind_of`` says what a file is (``checked_kind``, which never lets HDF5 parse a
    damaged file), ``words`` says it in words. Call it once
    ``files.check_output`` has refused special files, so that nothing but a regular file is read."""
    found = kind_of(path)
    if found in ("missing", "empty", kind):
        return
    raise FileExistsError(
        f"the {what} {os.fspath(path)!r} exists and holds {words.get(found, found)}, not "
        f"{words[kind]}; it would be replaced. Give {force_hint} to replace it, or choose another path."
    )
