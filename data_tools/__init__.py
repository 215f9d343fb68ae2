"""Data loaders, converters and generators of fastcep (installed as ``fastcep.data_tools``)."""

from .simulate import make_regression_simulation
from .uci import UCI_DATASETS, load_uci, uci_splits

__all__ = ["UCI_DATASETS", "load_uci", "make_regression_simulation", "uci_splits"]
