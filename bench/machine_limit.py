"""This machine's limit for a CP iteration at rank 8, and the fraction one reaches (issue 40).

    python -m bench.machine_limit [--repeats 5]

Measured here, in one run:
1. the flop rate of a large matrix product (numpy's BLAS, every core): the machine's peak;
2. the bandwidth of a STREAM-style triad a = b + s c over three 200 MB arrays (numba, every
   core; 24 bytes moved per element, write-allocate not counted);
3. the rate of the CEP iteration's dominant step alone: the cavity moments of every entry and
   mode (``kernels.tensor.cavity.batch_cavity_moments``: per mode a Cholesky factor and inverse
   of an 8 x 8 cavity precision, its mean and E[u u^T]), on 21,076 random entries over Alog's
   shape, batches of CAVITY_BATCH entries, every core;
4. a cp_gaussian iteration at rank 8 with the defaults on Alog fold 1 (21,076 training entries),
   from its trace (median of iterations 2-20; skipped without ../shared/data/alog).

The iteration's flops and bytes per entry are counted from the kernels' loops
(``sweep_cavity_full``: ``batch_cavity_moments``, ``gaussian_batch_messages``, the noise
message, the per-group sums; per object ``reduce_object_sums`` and ``finish_object``), not
measured; they are printed with the fractions they give.
"""

import argparse
import os
import pathlib
import time
import warnings

import numpy as np
from numba import njit, prange

from fastcep.kernels.tensor.cavity import CAVITY_BATCH, batch_cavity_moments

R, K = 8, 3
#: counted from the kernels' loops (a multiply-add is 2 flops), per entry of a cp_gaussian
#: iteration at R = 8, K = 3 with expect_under="cavity": per mode the cavity (44 subtractions,
#: Cholesky R^3 / 3, inverse R^3, mean 2 R^2, E[u u^T] 2 R^2: about 983), the message (the other
#: modes' Hadamard product, tau, damping, the group's sum: about 432); the noise message (E f^2 over
#: K R^2 products: about 400)
FLOPS_PER_ENTRY = K * (44 + R**3 // 3 + R**3 + 4 * R * R) + K * 432 + 400
#: per object and iteration: the groups' sums reduced (16 x (R^2 + R)) and its moments (Cholesky,
#: inverse, mean, E[u u^T]: about 940)
FLOPS_PER_OBJECT = 16 * (R * R + R) + R**3 // 3 + R**3 + 4 * R * R
#: per entry: its messages read and written (K (R^2 + R) doubles each way), its value and objects
BYTES_PER_ENTRY = 2 * K * (R * R + R) * 8 + 8 + K * 8
SHARED = pathlib.Path(
    os.environ.get("FASTCEP_SHARED_DATA", pathlib.Path(__file__).resolve().parents[2] / "shared" / "data")
)


@njit(parallel=True, cache=True)
def _triad(a, b, c, s):
    for i in prange(a.shape[0]):
        a[i] = b[i] + s * c[i]


@njit(parallel=True, cache=True)
def _all_cavities(gidx, Lam, eta, P_Lam, P_eta, A, Lb, w, ec, Mb, E2b, ok):
    n = gidx.shape[0]
    B = A.shape[3]
    units = A.shape[0]
    n_batches = (n + B - 1) // B
    per = (n_batches + units - 1) // units * B  # (whole batches per unit)
    for u in prange(units):
        for e0 in range(u * per, min(n, (u + 1) * per), B):
            nb = min(B, n - e0)
            batch_cavity_moments(
                gidx, e0, nb, -1, Lam, eta, P_Lam, P_eta, A[u], Lb[u], w[u], ec[u], Mb[u], E2b[u], ok[u]
            )


def _best(run, repeats):
    run()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        run()
        times.append(time.perf_counter() - t)
    return min(times), float(np.median(times))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    print(f"cores: {os.cpu_count()}")
    m = 2000
    x, y = rng.standard_normal((m, m)), rng.standard_normal((m, m))
    best, _ = _best(lambda: x @ y, args.repeats)
    peak = 2.0 * m**3 / best
    print(f"1. matrix product {m} x {m}: {peak / 1e9:.1f} GFLOP/s (best of {args.repeats})")
    size = 25_000_000
    a, b, c = np.empty(size), rng.standard_normal(size), rng.standard_normal(size)
    best, _ = _best(lambda: _triad(a, b, c, 3.0), args.repeats)
    bandwidth = 24.0 * size / best
    print(f"2. triad, 3 x {size * 8 / 1e6:.0f} MB: {bandwidth / 1e9:.1f} GB/s (best of {args.repeats})")
    shape = (200, 100, 200)
    offsets = np.concatenate([[0], np.cumsum(shape)])
    n, n_obj = 21_076, int(offsets[-1])
    gidx = np.stack([rng.integers(0, d, n) + offsets[k] for k, d in enumerate(shape)], axis=1).astype(
        np.int64
    )
    G = rng.standard_normal((n_obj, R, R))
    P_Lam = np.einsum("oij,okj->oik", G, G) + 50.0 * np.eye(R)  # (positive definite, well above a message)
    P_eta = rng.standard_normal((n_obj, R))
    H = 0.1 * rng.standard_normal((n, K, R, R))
    Lam = np.einsum("ekij,eklj->ekil", H, H)
    eta = 0.1 * rng.standard_normal((n, K, R))
    units, B = 2 * (os.cpu_count() or 1), CAVITY_BATCH
    scratch = (
        np.empty((units, R, R, B)), np.empty((units, R, R, B)), np.empty((units, R, B)),
        np.empty((units, R, B)), np.empty((units, K, R, B)), np.empty((units, K, R, R, B)),
        np.empty((units, B), dtype=np.bool_),
    )  # fmt: skip
    best, med = _best(lambda: _all_cavities(gidx, Lam, eta, P_Lam, P_eta, *scratch), args.repeats)
    cav_flops = K * (44 + R**3 // 3 + R**3 + 4 * R * R)
    print(
        f"3. cavity moments of {n} entries x {K} modes: {best / n * 1e6:.3f} us an entry (median "
        f"{med / n * 1e6:.3f}), {cav_flops * n / best / 1e9:.2f} GFLOP/s counted ({cav_flops} flops an "
        f"entry): {cav_flops * n / best / peak:.1%} of the product's rate"
    )
    if not (SHARED / "alog").is_dir():
        print(f"4. skipped: no data in {SHARED}")
        return
    from fastcep import fit
    from fastcep.data_tools import load_paper_fold

    train, _ = load_paper_fold("alog", 1, SHARED)
    iters = []
    for _ in range(max(1, args.repeats // 2)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = fit(train.coords, train.values, model="cp_gaussian", shape=train.shape, rank=R, seed=0,
                      max_iter=20, tol=0.0)  # fmt: skip
        iters.append(np.median(np.diff(res.trace.elapsed)[1:]))
    per_iter = float(np.median(iters))
    n, n_obj = len(train.values), int(sum(train.shape))
    flops = FLOPS_PER_ENTRY * n + FLOPS_PER_OBJECT * n_obj
    moved = BYTES_PER_ENTRY * n
    print(
        f"4. cp_gaussian rank {R}, Alog fold 1 ({n} entries, {n_obj} objects): {per_iter * 1e3:.2f} ms an "
        f"iteration ({per_iter / n * 1e6:.3f} us an entry); counted {FLOPS_PER_ENTRY} flops and "
        f"{BYTES_PER_ENTRY} bytes an entry, {FLOPS_PER_OBJECT} flops an object: {flops / per_iter / 1e9:.2f} "
        f"GFLOP/s ({flops / per_iter / peak:.1%} of the product's rate), {moved / per_iter / 1e9:.2f} GB/s "
        f"({moved / per_iter / bandwidth:.1%} of the triad's)"
    )


if __name__ == "__main__":
    main()
