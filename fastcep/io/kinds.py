"""What a file holds, from its first bytes and its format attribute: lets an error about a file of
the wrong kind say what the file is and what to do with it (the command line's hints)."""

import os
import re

import h5py

from .formats import (
    CHECKPOINT_FORMAT,
    CSR_FORMAT,
    FIT_CHECKPOINT_FORMAT,
    GLM_MODEL_FORMAT,
    MODEL_FORMAT,
    TENSOR_FORMAT,
)

#: what ``file_kind`` calls a file, in words (e.g. the refusal of an output that exists)
KIND_WORDS = {
    "numbers": "text of numbers (a text tensor?)",
    "table": "a text table (CSV data?)",
    "text": "text",
    "binary": "a binary file",
    "hdf5": "an HDF5 file that is not fastcep's",
    "unreadable": "a file that cannot be read",
    TENSOR_FORMAT: "a fastcep tensor",
    MODEL_FORMAT: "a fastcep CP model",
    GLM_MODEL_FORMAT: "a fastcep regression model",
    CHECKPOINT_FORMAT: "a fastcep stream checkpoint",
    FIT_CHECKPOINT_FORMAT: "a fastcep cluster fit checkpoint",
    CSR_FORMAT: "fastcep sparse rows",
    "svmlight": "svmlight text (sparse rows)",
}

#: bytes read to tell text from binary
_HEAD = 8192
_FIELD = re.compile(r"[,\t; ]+")


def _text_kind(text):
    line = next((ln for ln in text.splitlines() if ln.split("#", 1)[0].strip()), "")
    words = line.split("#", 1)[0].split()
    if len(words) >= 2 and ":" not in words[0] and all(w.count(":") == 1 for w in words[1:]):
        return "svmlight"
    fields = [f for f in _FIELD.split(line.strip()) if f]
    numbers = 0
    for field in fields:
        try:
            float(field)
            numbers += 1
        except ValueError:
            pass
    if fields and numbers == len(fields):
        return "numbers"
    return "table" if len(fields) >= 2 and ("," in line or "\t" in line) else "text"


def file_kind(path):
    """What ``path`` holds.

    Returns
    -------
    str
        "missing", "folder", "empty", "svmlight" (text whose first row is ``label index:value
        ...``), "numbers" (UTF-8 text whose first line is numbers: a text tensor, say), "table"
        (UTF-8 text whose first line is comma or tab separated fields, not all numbers: a CSV
        header), "text" (other text), "binary" (neither text nor HDF5), "hdf5" (HDF5 without a
        fastcep format attribute), "unreadable", or the fastcep format attribute
        ("fastcep-tensor", "fastcep-cp-model", "fastcep-glm-model", "fastcep-csr", ...).
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        return "missing"
    if os.path.isdir(path):
        return "folder"
    try:
        if h5py.is_hdf5(path):
            with h5py.File(path, "r") as f:
                fmt = f.attrs.get("format")
            return fmt if isinstance(fmt, str) and fmt.startswith("fastcep-") else "hdf5"
        with open(path, "rb") as fh:
            head = fh.read(_HEAD)
    except (OSError, KeyError, RuntimeError, ValueError):  # (a damaged HDF5 file fails anywhere in h5py)
        return "unreadable"
    if not head:
        return "empty"
    if b"\0" in head:
        return "binary"
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 3:  # (not a character cut at the end of the head)
            return "binary"
        text = head[: exc.start].decode("utf-8")
    return _text_kind(text.lstrip("\ufeff"))


def check_replaceable(path, kind, what, force_hint, kind_of=file_kind, words=KIND_WORDS):
    """Refuse to replace a file at ``path`` that holds something other than a file of ``kind``
    (a fastcep format): a data file, another kind of model. A missing or empty file holds
    nothing to lose. ``what`` names the output, ``force_hint`` how to replace it anyway;
    ``kind_of`` says what a file is (``file_kind``), ``words`` says it in words. Call it once
    ``files.check_output`` has refused special files, so that nothing but a regular file is read."""
    found = kind_of(path)
    if found in ("missing", "empty", kind):
        return
    raise FileExistsError(
        f"the {what} {os.fspath(path)!r} exists and holds {words.get(found, found)}, not "
        f"{words[kind]}; it would be replaced. Give {force_hint} to replace it, or choose another path."
    )
