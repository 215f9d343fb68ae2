"""Data loaders, converters and generators of fastcep (installed as ``fastcep.data_tools``)."""

from .clicks import ClickLog, iter_click_log, make_click_log
from .dblp import DBLP_SHAPE, build_dblp_training, dblp_test_auc, dblp_training_set, load_dblp
from .simulate import make_regression_simulation
from .tensors import (
    ALOG_EXACT_COUNTS,
    PAPER_TENSORS,
    SparseTensor,
    load_alog_counts,
    load_paper_fold,
    make_cp_tensor,
    read_text_tensor,
)
from .uci import UCI_DATASETS, load_uci, uci_splits

__all__ = [
    "ALOG_EXACT_COUNTS",
    "ClickLog",
    "iter_click_log",
    "make_click_log",
    "load_alog_counts",
    "DBLP_SHAPE",
    "build_dblp_training",
    "dblp_test_auc",
    "dblp_training_set",
    "load_dblp",
    "PAPER_TENSORS",
    "SparseTensor",
    "UCI_DATASETS",
    "load_paper_fold",
    "load_uci",
    "make_cp_tensor",
    "make_regression_simulation",
    "read_text_tensor",
    "uci_splits",
]
