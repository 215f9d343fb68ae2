"""Test helper: a CP fit stopped by max_iter warns (``ConvergenceWarning``) naming its method.
Each CP method's file calls it, so that the check reuses the kernels its file compiles."""

import pytest

import fastcep
from fastcep.data_tools import make_cp_tensor


def assert_max_iter_warns(method):
    T, _ = make_cp_tensor((8, 7, 6), 2, 200, noise_sd=0.1, seed=0)
    with pytest.warns(fastcep.ConvergenceWarning, match=f"cp_gaussian/{method}"):
        fastcep.fit(T.coords, T.values, model="cp_gaussian", shape=T.shape, rank=2, method=method, max_iter=2)
