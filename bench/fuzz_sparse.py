"""Fuzz the sparse-row boundary: hypothesis draws scipy.sparse matrices with any index arrays
(out of range, negative, duplicated, unsorted, explicit zeros, a corrupt indptr, several formats)
and feeds them to ``fit``, ``predict_proba``, ``update`` and a classifier's ``partial_fit``.

    python -m bench.fuzz_sparse --examples 20000

Every input must either give the same numbers as its dense copy (a matrix whose indices fit its
shape) or raise ``ValueError`` / ``TypeError``; anything else fails, and a crash of the
interpreter shows as the process's exit status (run it in a subprocess: the test run does,
``tests/test_fuzz_sparse.py``). Prints the inputs tried, refused and accepted as JSON.
"""

import argparse
import json
import sys
import warnings

import numpy as np
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

#: the width of the fitted model whose predictions and updates are fuzzed
D = 5
#: indices far out of range (within int32, so that both index types can hold them)
FAR = [10**6, -(10**6), 2**31 - 1, -(2**31)]


@st.composite
def raw_sparse(draw):
    """(format, shape, arrays): a CSR, CSC or COO matrix's index arrays as a user can build or
    mutate them (scipy's constructors do not check indices against the shape)."""
    fmt = draw(st.sampled_from(["csr", "csr", "csc", "coo"]))
    n = draw(st.integers(1, 6))
    d = draw(st.sampled_from([D, D, draw(st.integers(1, 7))]))
    nnz = draw(st.integers(0, 14))
    dtype = draw(st.sampled_from([np.int32, np.int64]))
    value = st.one_of(st.floats(-3, 3), st.just(0.0), st.sampled_from([1e-300, -2.5]))
    data = np.array(draw(st.lists(value, min_size=nnz, max_size=nnz)))

    def indices(bound):
        out = draw(st.lists(st.integers(0, bound - 1), min_size=nnz, max_size=nnz))
        if nnz and draw(st.booleans()):  # (half the inputs: one index or two out of range)
            wild = st.one_of(st.integers(-4, -1), st.integers(bound, bound + 4), st.sampled_from(FAR))
            for _ in range(draw(st.integers(1, 2))):
                out[draw(st.integers(0, nnz - 1))] = draw(wild)
        return np.array(out, dtype=np.int64).astype(dtype)

    if fmt == "coo":
        return fmt, (n, d), (indices(n), indices(d), data)
    major, minor = (n, d) if fmt == "csr" else (d, n)
    indptr = [0, *sorted(draw(st.lists(st.integers(0, nnz), min_size=major - 1, max_size=major - 1))), nnz]
    if draw(st.integers(0, 9)) == 0:  # (a corrupt indptr: a jump, a start past 0, an end past nnz)
        at = draw(st.integers(0, major))
        indptr[at] = draw(st.sampled_from([-1, nnz + 3, 10**6, indptr[at] + 1]))
    return fmt, (n, d), (np.array(indptr).astype(dtype), indices(minor), data)


def build(fmt, shape, arrays):
    """The matrix as the user would hold it: an empty one of the shape, its arrays then set in
    place (what scipy never checks again)."""
    if fmt == "coo":
        A = sp.coo_array(shape)
        rows, cols, data = arrays
        A.coords, A.data = (rows, cols), data
        return A
    A = sp.csr_array(shape) if fmt == "csr" else sp.csc_array(shape)
    A.indptr, A.indices, A.data = arrays
    return A


def in_bounds(A):
    """Whether A's index arrays fit its shape (the slow, textbook test)."""
    n, d = A.shape
    if A.format == "coo":
        return all(0 <= r < n for r in A.row) and all(0 <= c < d for c in A.col)
    major, minor = (n, d) if A.format == "csr" else (d, n)
    p = list(A.indptr)
    if len(p) != major + 1 or p[0] != 0 or any(b < a for a, b in zip(p, p[1:], strict=False)):
        return False
    if p[-1] > min(len(A.indices), len(A.data)):
        return False
    return all(0 <= i < minor for i in A.indices[: p[-1]])


def dense(A):
    """The dense copy of an in-bounds A, summed by hand (duplicates added, order free)."""
    n, d = A.shape
    out = np.zeros((n, d))
    if A.format == "coo":
        for r, c, v in zip(A.row, A.col, A.data, strict=True):
            out[r, c] += v
        return out
    for major in range(len(A.indptr) - 1):
        for k in range(A.indptr[major], A.indptr[major + 1]):
            i, j = (major, A.indices[k]) if A.format == "csr" else (A.indices[k], major)
            out[i, j] += A.data[k]
    return out


def main(argv=None):
    import fastcep
    from fastcep.estimators import BayesianProbitClassifier

    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--examples", type=int, default=2000)
    args.add_argument("--seed", type=int, default=0)
    a = args.parse_args(argv)
    rng = np.random.default_rng(a.seed)
    X0 = rng.normal(size=(40, D))
    y0 = (X0 @ rng.normal(size=D) > 0).astype(float)
    model = fastcep.fit(X0, y0, model="probit")
    counts = {"inputs": 0, "refused": 0, "accepted": 0}

    @settings(
        max_examples=a.examples, deadline=None, database=None, derandomize=True,
        suppress_health_check=list(HealthCheck),
    )  # fmt: skip
    @given(raw=raw_sparse())
    def check(raw):
        A = build(*raw)
        counts["inputs"] += 1
        good = in_bounds(A)
        y = (np.arange(A.shape[0]) % 2).astype(float)
        calls = [lambda: model.predict_proba(A), lambda: fastcep.fit(A, y, model="probit", max_iter=5)]
        if A.shape[1] == D:
            calls.append(lambda: _copy(model).update(A, y))
            calls.append(lambda: BayesianProbitClassifier(max_iter=5).partial_fit(A, y, classes=[0.0, 1.0]))
        for call in calls:
            try:
                got = call()
            except (ValueError, TypeError) as exc:
                assert not good or A.shape[1] != D, f"an input in bounds was refused: {exc}"
                counts["refused"] += 1
                continue
            assert good, "an out-of-range index was accepted"
            counts["accepted"] += 1
            if isinstance(got, np.ndarray) and A.shape[1] == D:
                np.testing.assert_allclose(got, model.predict_proba(dense(A)), rtol=1e-12, atol=1e-15)

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (as the test run: a warning is a defect too)
        warnings.simplefilter("ignore", fastcep.ConvergenceWarning)  # (max_iter=5 on purpose)
        check()
    json.dump(counts, sys.stdout)
    print()
    return 0


def _copy(res):
    import copy

    return copy.deepcopy(res)


if __name__ == "__main__":
    sys.exit(main())
