"""Hierarchical priors of the CP embeddings, learned by messages in the engine's loop (DESIGN.md 8).

The embeddings u^k_j of mode k have the prior N(mu_k, Lambda_k^-1) whose parameters carry
conjugate hyperpriors; their posterior is updated by variational message passing from the
embeddings' posterior moments (E[u], E[u u^T]) every iteration, and the message back to each
embedding is the Gaussian with precision E[Lambda_k] and precision-times-mean E[Lambda_k mu_k]:
the engine's per-object prior (``CPEngine.prior_Lam``, ``prior_eta``).

- ``"ard"`` (BCPF, Zhao, Zhang & Cichocki 2015): mu = 0 and Lambda = diag(lambda), one precision
  per rank column shared by every mode, lambda_r ~ Gamma(ARD_A0, ARD_B0). Columns the data do not
  support grow a large precision and are switched off (``effective_rank``).
- ``"wishart"`` (BPMF, Salakhutdinov & Mnih 2008): per mode, (mu_k, Lambda_k) ~
  N(mu_k | 0, (NW_BETA0 Lambda_k)^-1) Wishart(Lambda_k | W0, R), W0^-1 = NW_W0_INV I: a learned
  mean and a full precision per mode.

The hyper-posterior is a ``HyperState`` of flat arrays (``fastcep.results``, beside
``hyper_problems``, the check of one read from a file): part of the fit's resumable state, of the
model file and of the stream (ADF carries it from batch to batch).
"""

import numpy as np

from ..results import HyperState

#: Gamma(ARD_A0, ARD_B0) hyperprior of each ARD precision: broad, as BCPF's 1e-6
ARD_A0 = 1e-6
ARD_B0 = 1e-6
#: the Normal-Wishart hyperprior of each mode: N(mu | 0, (NW_BETA0 Lambda)^-1) W(Lambda | W0, R)
#: (BPMF's choices: mu_0 = 0, beta_0 = 2, W_0 = I, nu_0 = R)
NW_BETA0 = 2.0
#: W0^-1 = NW_W0_INV I. BPMF's 1 stays: on Alog's held-out training entries other scales (0.01 to
#: 10) helped at one rank and not at the others (BENCHMARKS.md, "Damping, the start and the
#: Wishart's scale on Alog")
NW_W0_INV = 1.0
#: a rank column is switched off when the power of its means in the reconstruction
#: (prod_k mean_j E[u^k_jr]^2) falls below this fraction of the largest column's (a column the
#: data do not carry falls to 1e-40 or less, measured; one at this fraction has 0.1 % of the
#: largest column's amplitude)
OFF_FRACTION = 1e-6


def initial(kind, Kmodes, R, prior_var):
    """The hyper-posterior whose prior message is the fixed prior N(0, prior_var I): the start."""
    empty = np.zeros(0)
    if kind == "ard":
        a = np.array([ARD_A0 + 0.5])
        b = np.full(R, a[0] * prior_var)
        return HyperState(kind, a, b, empty, empty, empty, np.zeros((0, R, R)))
    nu = np.full(Kmodes, float(R))
    W_inv = np.broadcast_to(np.eye(R) * (R * prior_var), (Kmodes, R, R)).copy()
    return HyperState(kind, empty, empty, np.zeros((Kmodes, R)), np.full(Kmodes, NW_BETA0), nu, W_inv)


def expected_precision(hyper):
    """E[Lambda_k] per mode, (K, R, R) ("wishart"), or E[lambda] (R,) ("ard")."""
    if hyper.kind == "ard":
        return hyper.a[0] / hyper.b
    return hyper.nu[:, None, None] * np.linalg.inv(hyper.W_inv)


def mode_sums(M, E2, offsets):
    """Per mode k: the number of objects (K,), the sum of their means (K, R) and of their second
    moments E[u u^T] (K, R, R), or of its diagonals (K, R) with covariance "diag" (E2 (n_obj, R))."""
    Kmodes = len(offsets) - 1
    counts = np.diff(offsets).astype(np.float64)
    sum_M = np.stack([M[offsets[k] : offsets[k + 1]].sum(axis=0) for k in range(Kmodes)])
    sum_E2 = np.stack([E2[offsets[k] : offsets[k + 1]].sum(axis=0) for k in range(Kmodes)])
    return counts, sum_M, sum_E2


def update(hyper, M, E2, offsets, covariance):
    """The hyper-posterior given the embeddings' posterior moments: one VMP update.

    ``M`` (n_obj, R) means; ``E2`` (n_obj, R, R) second moments E[u u^T] (the diagonals (n_obj,
    R) with covariance "diag"); ``offsets`` (K + 1,) the first object of each mode.
    """
    return update_from_sums(hyper, *mode_sums(M, E2, offsets))


def update_from_sums(hyper, counts, sum_M, sum_E2):
    """One VMP update of the hyper-posterior from per-mode sums of the embeddings' posterior
    moments (``mode_sums``): what a stream keeps of the objects it has seen."""
    R = sum_M.shape[1]
    diag = np.diagonal(sum_E2, axis1=1, axis2=2) if sum_E2.ndim == 3 else sum_E2
    if hyper.kind == "ard":
        a = np.array([ARD_A0 + 0.5 * counts.sum()])
        b = ARD_B0 + 0.5 * diag.sum(axis=0)
        return hyper._replace(a=a, b=b)
    Kmodes = len(counts)
    mean, beta, nu = np.empty((Kmodes, R)), np.empty(Kmodes), np.empty(Kmodes)
    W_inv = np.empty((Kmodes, R, R))
    for k in range(Kmodes):
        n = counts[k]
        xbar = sum_M[k] / max(n, 1.0)
        scatter = sum_E2[k] - n * np.outer(xbar, xbar)
        beta[k] = NW_BETA0 + n
        mean[k] = n * xbar / beta[k]
        nu[k] = R + n
        W_inv[k] = NW_W0_INV * np.eye(R) + scatter + (NW_BETA0 * n / beta[k]) * np.outer(xbar, xbar)
        W_inv[k] = 0.5 * (W_inv[k] + W_inv[k].T)
    return hyper._replace(mean=mean, beta=beta, nu=nu, W_inv=W_inv)


def messages(hyper, Kmodes, covariance):
    """The prior message of each mode's objects, natural parameters: (K, R, R) precisions ((K, R)
    with covariance "diag", "ard" only) and (K, R) precision-times-means."""
    P = expected_precision(hyper)
    if hyper.kind == "ard":
        Lam = np.diag(P) if covariance == "full" else P
        return np.broadcast_to(Lam, (Kmodes, *Lam.shape)).copy(), np.zeros((Kmodes, len(P)))
    return P, np.einsum("kij,kj->ki", P, hyper.mean)


def fill_prior(hyper, offsets, covariance, prior_Lam, prior_eta):
    """Write the prior message of every object (natural parameters) into ``prior_Lam`` (n_obj, R,
    R) or (n_obj, R) with "diag" ("ard" only), and ``prior_eta`` (n_obj, R)."""
    Lam, eta = messages(hyper, len(offsets) - 1, covariance)
    for k in range(len(offsets) - 1):
        prior_Lam[offsets[k] : offsets[k + 1]] = Lam[k]
        prior_eta[offsets[k] : offsets[k + 1]] = eta[k]


def column_power(M, offsets):
    """Power of each rank column's means in the reconstruction, prod_k mean_j E[u^k_jr]^2 (R,)."""
    power = np.ones(M.shape[1])
    for k in range(len(offsets) - 1):
        power *= np.mean(M[offsets[k] : offsets[k + 1]] ** 2, axis=0)
    return power


def active_columns(M, offsets):
    """The rank columns that are not switched off (bool (R,)): power above OFF_FRACTION of the
    largest column's (``column_power``)."""
    power = column_power(M, offsets)
    return power > OFF_FRACTION * power.max()
