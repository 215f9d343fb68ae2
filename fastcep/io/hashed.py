"""CSV tables with raw categorical columns, hashed to a fixed width (the hashing trick) and written
as a sparse-row file (``fastcep convert DATA.csv OUT.h5 --target COL --hash COL ...``).

Each row becomes the features ``"name=value": 1`` of its categorical columns and ``"name": x`` of
its numeric ones (every other column but the target), hashed by scikit-learn's ``FeatureHasher``
(MurmurHash3, unsigned: ``alternate_sign=False``) to ``n_features`` columns. An empty categorical
cell is a category of its own (``"name="``); an empty or non-numeric numeric cell, or target, is an
error naming its line. The same columns and width hash a test file to the same columns.
"""

import csv
import os

import numpy as np

from .._validation import check_int
from .csr import CSR_CHUNK_ROWS, CSRWriter
from .sources import open_text_input
from .svmlight import bad_line
from .table import csv_rows


def _hasher(n_features):
    try:
        from sklearn.feature_extraction import FeatureHasher
    except ImportError:  # pragma: no cover - the sklearn extra is missing
        raise ImportError(
            "hashing categorical columns needs scikit-learn: pip install 'fastcep[sklearn]'"
        ) from None
    return FeatureHasher(n_features=n_features, input_type="dict", alternate_sign=False)


def hash_csv_to_csr(src, dst, target, categorical, n_features=1 << 20, delimiter=","):
    """Hash a CSV table's rows to ``n_features`` columns and write them, with the target as the
    label, to a sparse-row file (``fastcep.io.csr``), block by block.

    Parameters
    ----------
    src, dst : str or PathLike
        A CSV file with a header row; the sparse-row file to write (atomically).
    target : str
        The label column (numbers).
    categorical : sequence of str
        The columns hashed as categories (any text); the others must hold numbers.
    n_features : int
        The width (a power of two is usual: 2**18 to 2**24).
    delimiter : str

    Returns
    -------
    (n_rows, n_features, nnz)
    """
    func = "hash_csv_to_csr"
    n_features = check_int(n_features, "n_features", func, low=1)
    categorical = list(categorical)
    hasher = _hasher(n_features)
    src = os.fspath(src)
    if not os.path.exists(src):
        raise FileNotFoundError(f"{func}: no such file {src!r}.")
    with open_text_input(src) as fh:
        reader = csv.reader(fh, delimiter=delimiter)
        rows = csv_rows(src, reader, lambda line, why: bad_line(src, line, why))
        header = next(rows, None)
        if header is None:
            raise bad_line(src, 1, "the file is empty", "a CSV table starts with a header row of names")
        names = [name.strip() for name in header]
        for name in [target, *categorical]:
            if name not in names:
                have = f"its columns are {', '.join(names)}"
                raise bad_line(src, 1, f"the header has no column {name!r}", have)
        if target in categorical:
            raise ValueError(f"{func}: the target {target!r} is listed among the categorical columns.")
        t = names.index(target)
        cats = [(names.index(c), c + "=") for c in categorical]
        nums = [(j, name) for j, name in enumerate(names) if j != t and name not in categorical]
        with CSRWriter(dst, n_features, source=f"hashed csv:{os.path.basename(src)}") as w:
            feats, labels = [], []
            for row in rows:
                if not row or (len(row) == 1 and not row[0].strip()):
                    continue
                line = reader.line_num
                if len(row) != len(names):
                    raise bad_line(src, line, f"{len(row)} fields, the header {len(names)}")
                cells = {prefix + row[j].strip(): 1.0 for j, prefix in cats}
                for j, name in nums:
                    cells[name] = _number(src, line, name, row[j])
                feats.append(cells)
                labels.append(_number(src, line, target, row[t]))
                if len(feats) == CSR_CHUNK_ROWS:
                    w.append(hasher.transform(feats), labels)
                    feats, labels = [], []
            if feats:
                w.append(hasher.transform(feats), labels)
            if w.n == 0:
                raise bad_line(src, reader.line_num, "the header is followed by no rows", "nothing to write")
    return w.n, w.n_features, w.nnz


def _number(path, line, name, text):
    try:
        value = float(text)
    except ValueError:
        what = "an empty cell" if not text.strip() else f"{text!r}"
        raise bad_line(path, line, f"column {name!r}: {what} is not a number", "hash it (--hash)") from None
    if not np.isfinite(value):
        raise bad_line(path, line, f"column {name!r}: {text!r} is not finite")
    return value
