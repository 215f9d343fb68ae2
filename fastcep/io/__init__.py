"""fastcep's files, one module per format: tensor files (``tensor``), text tensors (``text``),
fitted models (``model``), stream checkpoints (``checkpoint``); ``files`` holds the atomic write
and the one error class, ``FileFormatError``."""

from .checkpoint import read_checkpoint, write_checkpoint
from .files import FileFormatError, atomic_h5
from .model import load_model, save_model
from .tensor import TensorReader, TensorWriter, read_tensor, write_tensor
from .text import iter_text_rows, text_to_tensor

__all__ = [
    "FileFormatError",
    "TensorReader",
    "TensorWriter",
    "atomic_h5",
    "iter_text_rows",
    "load_model",
    "read_checkpoint",
    "save_model",
    "read_tensor",
    "text_to_tensor",
    "write_checkpoint",
    "write_tensor",
]
