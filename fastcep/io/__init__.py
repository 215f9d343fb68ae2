"""fastcep's files, one module per format: tensor files (``tensor``), text tensors (``text``),
fitted CP models (``model``), regression models (``glm_model``), stream checkpoints
(``checkpoint``), data tables of named columns, CSV or HDF5 (``table``), labelled sparse rows as
svmlight text (``svmlight``) or HDF5 (``csr``), CSV tables hashed to sparse rows (``hashed``);
``prefetch`` reads ahead in a thread; ``results`` writes and
reads any fitted result (``save``, ``load``); ``files`` holds the atomic
write and the one error class, ``FileFormatError``; ``kinds`` tells what a file holds, and
``sources`` opens an input so that its reader gets every byte (a pipe's too, gzip read through);
``describe`` what a fastcep file holds (``fastcep info``); ``formats`` names the formats."""

from .checkpoint import read_checkpoint, write_checkpoint
from .csr import CSRReader, CSRWriter, read_csr, svmlight_to_csr, write_csr
from .describe import Description, NotFastcepFileError, describe
from .files import FileFormatError, atomic_h5
from .glm_model import GLMModel, load_glm_model, save_glm_model
from .hashed import hash_csv_to_csr
from .kinds import file_kind
from .model import load_model, save_model
from .results import load, save
from .svmlight import SparseRows, iter_svmlight, read_svmlight
from .table import Table, read_table
from .tensor import TensorReader, TensorWriter, read_tensor, write_tensor
from .text import iter_text_rows, text_to_tensor

__all__ = [
    "CSRReader",
    "CSRWriter",
    "SparseRows",
    "hash_csv_to_csr",
    "iter_svmlight",
    "read_csr",
    "read_svmlight",
    "svmlight_to_csr",
    "write_csr",
    "Description",
    "NotFastcepFileError",
    "describe",
    "FileFormatError",
    "GLMModel",
    "Table",
    "TensorReader",
    "TensorWriter",
    "atomic_h5",
    "file_kind",
    "iter_text_rows",
    "load",
    "load_glm_model",
    "load_model",
    "read_checkpoint",
    "read_table",
    "save",
    "save_glm_model",
    "save_model",
    "read_tensor",
    "text_to_tensor",
    "write_checkpoint",
    "write_tensor",
]
