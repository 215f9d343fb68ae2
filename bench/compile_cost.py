"""What a user's first fits cost in compilation: one fresh process, one empty kernel cache.

    python -m bench.compile_cost [--repeats 3] [--code DIR ...]

Each repeat runs, in a new process with a new empty ``FASTCEP_CACHE_DIR``, a fixed sequence of
small fits (a few sweeps each: the time is the compilation) and prints each fit's wall time:
regression CEP-1 with the probit, the logistic, the Gaussian and the Poisson likelihood (both
schedules), then CP-CEP-1 with cp_probit, cp_gaussian, cp_logistic and cp_poisson (the parallel
and the sequential schedule). Each step compiles what the earlier steps did not, so a step's
time is the cost of one more likelihood. ``--code`` runs the sequence on other checkouts (their
roots go first on ``PYTHONPATH``), one after the other in the same sitting: old and new code
side by side. Prints a markdown table of medians (min - max).
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]

#: the fits, in order: (label, model, schedules)
STEPS = [
    ("probit", "probit", ("parallel", "sequential")),
    ("logistic", "logistic", ("parallel", "sequential")),
    ("gaussian", "gaussian", ("parallel", "sequential")),
    ("poisson", "poisson", ("parallel", "sequential")),
    ("cp_probit", "cp_probit", ("parallel", "sequential")),
    ("cp_gaussian", "cp_gaussian", ("parallel", "sequential")),
    ("cp_logistic", "cp_logistic", ("parallel", "sequential")),
    ("cp_poisson", "cp_poisson", ("parallel", "sequential")),
]

_CHILD = r"""
import json, sys, time, warnings
import numpy as np
warnings.simplefilter("ignore")
t0 = time.perf_counter()
import fastcep
from fastcep.data_tools import make_cp_tensor
out = {"import": time.perf_counter() - t0}
rng = np.random.default_rng(0)
X = rng.normal(size=(300, 4))
f = X @ np.array([0.5, -0.3, 0.2, 0.1])
reg = {"probit": (f > 0).astype(float), "logistic": (f > 0).astype(float),
       "gaussian": f + 0.3 * rng.normal(size=300), "poisson": rng.poisson(np.exp(f)).astype(float)}
T, _ = make_cp_tensor((14, 12, 10), rank=2, n_obs=900, noise_sd=0.1, seed=8)
g = T.values / np.std(T.values)
cp = {"cp_probit": (g > 0).astype(float), "cp_gaussian": g, "cp_logistic": (g > 0).astype(float),
      "cp_poisson": rng.poisson(np.exp(g)).astype(float)}
for label, model, schedules in json.loads(sys.argv[1]):
    t = time.perf_counter()
    for schedule in schedules:
        if model in reg:
            fastcep.fit(X, reg[model], model=model, method="cep1", schedule=schedule, max_iter=3)
        else:
            fastcep.fit(T.coords, cp[model], model=model, shape=T.shape, rank=2, schedule=schedule,
                        max_iter=3)
    out[label] = time.perf_counter() - t
print(json.dumps(out))
"""


def one_run(code):
    """The seconds of each step in a fresh process and cache, on the checkout ``code``."""
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, FASTCEP_CACHE_DIR=cache, PYTHONPATH=str(code))
        out = subprocess.run(
            [sys.executable, "-c", _CHILD, json.dumps(STEPS)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            cwd=cache,
        )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--code", nargs="+", default=[str(ROOT)], help="checkout roots (default: this one)")
    args = p.parse_args()
    runs = {code: [] for code in args.code}
    for _ in range(args.repeats):  # (the checkouts alternate: both see the same machine)
        for code in args.code:
            runs[code].append(one_run(code))
            print(code, json.dumps(runs[code][-1]), file=sys.stderr, flush=True)
    labels = ["import"] + [s[0] for s in STEPS] + ["total"]
    for code in args.code:
        for run in runs[code]:
            run["total"] = sum(v for k, v in run.items() if k != "total")
    print("| step | " + " | ".join(args.code) + " |")
    print("|---|" + "---|" * len(args.code))
    for label in labels:
        cells = []
        for code in args.code:
            x = np.array([r[label] for r in runs[code]])
            cells.append(f"{np.median(x):.1f} s ({x.min():.1f} - {x.max():.1f})")
        print(f"| {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
