"""The ``fastcep`` command line (also ``python -m fastcep``; ``fastcep --version``).

``fastcep demo``: fit Bayesian probit and logistic regression with CEP-1, CEP-2 and EP on the
paper's simulated data and on a UCI set, and print a comparison table.
``fastcep convert SRC.txt DST.h5``: a text tensor (``i,j,k,value`` a line) to an HDF5 tensor file;
svmlight text, or a CSV table whose categorical columns are hashed (``--target COL --hash COL
...``), to a sparse-row HDF5 file (``fastcep.io.csr``).
``fastcep info FILE``: what an HDF5 tensor, model or checkpoint file holds.
``fastcep fit TENSOR.h5 -o MODEL.h5``: batch CEP on an HDF5 tensor, writes a model file.
``fastcep stream TENSOR.h5 -o MODEL.h5``: ADF-CEP with checkpoints and ``--resume``.
``fastcep evaluate MODEL.h5 TEST.h5``: RMSE and test log-likelihood (continuous; counts also the
RMSE on the log scale), or AUC, test log-likelihood, Brier score, calibration error, mean P and
positive rate (binary).
``fastcep glm fit DATA --target COL -o MODEL.h5``: Bayesian regression (``--model``: probit,
logistic, gaussian, poisson, negbin, student_t) on a CSV file or HDF5 table (``fastcep.io.table``),
writes a regression model file (``fastcep.io.glm_model``); ``fastcep glm evaluate MODEL.h5 DATA``:
its test metrics (binary: as ``evaluate``; values: RMSE, test log-likelihood, mean deviance, and
for counts the RMSE on the log scale). Both also take labelled sparse rows: svmlight text or a
sparse-row HDF5 file. ``fastcep glm stream ROWS -o MODEL.h5``: one online pass over such a file
(batches read ahead, rows/s in the progress line, ``--checkpoint`` and ``--resume``).

``--json`` prints machine-readable output, ``--quiet`` silences progress and notes, ``--plot
FILE.png`` draws the fit's convergence (``fit``, ``stream``, ``glm fit``) or the predictions
(``evaluate``, ``glm evaluate``; needs matplotlib). User errors (bad arguments, missing, corrupt
or mismatched files, bad values) exit with status 2 and a one-line message that names the fix
where there is one (a text tensor given as a tensor file: ``fastcep convert`` it).

One module per verb, each holding its ``cmd_*`` function: ``demo``, ``convert``, ``info``, ``fit``,
``stream``, ``evaluate``, ``glm_fit``, ``glm_evaluate``, ``glm_stream``; ``_parser`` builds the
parser. What they share: ``_common`` (``UserError``, the output as text or JSON), ``_files``
(outputs checked before any work, a wrong file's fix, the readers), ``_fitting`` (options,
``--scheduler``, a fit's report), ``_data`` (regression data), ``_metrics``, ``_plots``.
"""

import sys

from .._loop import end_status
from ..io.sources import close_held
from ._common import UserError
from ._files import distinct_paths
from ._parser import build_parser

__all__ = ["build_parser", "main"]


def main(argv=None):
    """Run the command line on ``argv`` (default: ``sys.argv[1:]``); returns the exit status: 0,
    2 for a user error (a one-line message on stderr), 130 when interrupted."""
    parser = build_parser()
    args = parser.parse_args(argv)  # argparse exits with status 2 on bad arguments
    verb = getattr(args, "verb", None) or args.command
    try:
        distinct_paths(args, verb)
        return args.func(args)
    except (
        UserError,
        ValueError,
        TypeError,
        OSError,
        FloatingPointError,
        MemoryError,
        NotImplementedError,
    ) as exc:
        end_status()  # (a progress line left open: the message starts a line of its own)
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        print(f"fastcep {verb}: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        end_status()
        print(f"fastcep {verb}: interrupted", file=sys.stderr)
        return 130
    finally:
        close_held()  # (a pipe probed and then refused: its writer sees it closed)
