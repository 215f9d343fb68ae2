"""Kernels of fully factorised regression (GLM): row functions per likelihood and method, the
parallel and sequential schedules that run them, and the baselines' kernels (LP, IS, KJIT, VB)."""

from . import generic, importance, kjit, laplace, logistic, probit, schedules, sparse, state, sweep, vb

__all__ = [
    "generic",
    "importance",
    "kjit",
    "laplace",
    "logistic",
    "probit",
    "schedules",
    "sparse",
    "state",
    "sweep",
    "vb",
]
