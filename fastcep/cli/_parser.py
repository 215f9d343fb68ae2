"""The parser of ``fastcep``: every verb's options (those of ``fastcep.fit`` and ``fastcep.stream``
with their choices and help from the option table, ``fastcep._options``) and the ``cmd_*``
function each verb runs."""

import argparse

from .. import __version__
from .. import _options as O
from .convert import cmd_convert
from .demo import cmd_demo
from .evaluate import cmd_evaluate
from .fit import cmd_fit
from .glm_evaluate import cmd_glm_evaluate
from .glm_fit import cmd_glm_fit
from .glm_stream import cmd_glm_stream
from .info import cmd_info
from .stream import cmd_stream


def scheduler_arg(parser, how):
    """``--scheduler ADDRESS``: the verb's fit on that Dask cluster (``_fitting.scheduler``)."""
    parser.add_argument(
        "--scheduler", metavar="ADDRESS", default=None,
        help=f"fit on the Dask cluster of this scheduler (tcp://host:8786; the dask extra): {how}, the "
        "result is the fit in one process (default: none, this process)",
    )  # fmt: skip


#: the widest hashed width ``convert --hash-bits`` offers: a regression holds a posterior over every
#: column in memory (2**24 columns took 1.7 GB in a fit of 2,000 rows, 2**26 6.4 GB)
MAX_HASH_BITS = 24


def _hash_bits(text):
    """``--hash-bits``: an integer from 1 to ``MAX_HASH_BITS``."""
    bits = int(text) if text.strip().lstrip("+-").isdigit() else None
    if bits is None or not 1 <= bits <= MAX_HASH_BITS:
        raise argparse.ArgumentTypeError(
            f"must be an integer from 1 to {MAX_HASH_BITS} (a width of 2**BITS = 2 to {1 << MAX_HASH_BITS:,} "
            f"columns, which a regression holds in memory); got {text!r}"
        )
    return bits


def _width(text):
    """``--width``: a positive integer."""
    width = int(text) if text.strip().lstrip("+-").isdigit() else None
    if width is None or width < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer (the rows' columns); got {text!r}")
    return width


def _float_or_auto(text):
    """A float, or the word 'auto' (``--damping`` of ``glm fit``)."""
    if text == "auto":
        return text
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a float in (0, 1] or 'auto', not {text!r}") from None


def _cp_likelihood_names():
    """The likelihood names ``--likelihood`` takes (with ``--model cp``: a built-in, its defaults)."""
    from .._models import names

    return names()


def _force_arg(q):
    q.add_argument(
        "--force", action="store_true",
        help="replace an output file that exists and is not of the kind this verb writes (a data "
        "file, say); without it such a file is refused",
    )  # fmt: skip


def build_parser():
    """The ``argparse`` parser of ``fastcep`` and its verbs (each sets ``func``, its ``cmd_*``)."""
    p = argparse.ArgumentParser(prog="fastcep", description="Conditional expectation propagation.")
    p.add_argument("--version", action="version", version=f"fastcep {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("demo", help="CEP-1, CEP-2 and EP on simulated and UCI data: a comparison table")
    d.add_argument("--uci", default="ionos", help="UCI set for the second part (default: %(default)s)")
    d.add_argument("--uci-dir", default=None, help="folder of the UCI files (default: PyPI packages)")
    d.add_argument("--json", action="store_true", help="print the table as JSON")
    d.add_argument("--quiet", action="store_true", help="no notes on stderr")
    d.set_defaults(func=cmd_demo)

    c = sub.add_parser(
        "convert",
        help="text tensor (i,j,k,value a line) -> HDF5 tensor file; svmlight text or a CSV table "
        "(--target, --hash) -> sparse-row HDF5 file",
    )
    c.add_argument("src", help="text tensor, svmlight text or CSV table")
    c.add_argument("dst", help="HDF5 file to write")
    c.add_argument(
        "--index-base", type=int, choices=(0, 1), default=None,
        help="of the text file (default: 1 for a tensor; 0 for svmlight, whose column k is index k)",
    )  # fmt: skip
    c.add_argument(
        "--width", type=_width, default=None, help="sparse rows: the columns (default: from the data)"
    )
    c.add_argument(
        "--target", default=None, help="a CSV table's label column, for sparse rows (default: none)"
    )
    c.add_argument(
        "--hash", nargs="+", metavar="COL", default=None,
        help="a CSV table's categorical columns, hashed (FeatureHasher; the rest: numbers; default: none)",
    )  # fmt: skip
    c.add_argument(
        "--hash-bits", type=_hash_bits, default=20,
        help=f"hashed width 2**BITS, BITS from 1 to {MAX_HASH_BITS} (default %(default)s)",
    )  # fmt: skip
    c.add_argument("--delimiter", default="auto", help="comma, tab, space, auto (default) or a character")
    c.add_argument("--shape", default=None, help="tensor shape, e.g. 200,100,200 (default: from the data)")
    c.add_argument("--binary", action="store_true", help="values must be 0 or 1")
    c.add_argument(
        "--skip-header", action="store_true", help="skip the first line that is not blank or a comment"
    )
    c.add_argument("--json", action="store_true", help="print the result as JSON")
    _force_arg(c)
    c.set_defaults(func=cmd_convert)

    i = sub.add_parser("info", help="describe an HDF5 tensor, model or checkpoint file")
    i.add_argument("file", help="a fastcep HDF5 file")
    i.add_argument("--json", action="store_true", help="print the description as JSON")
    i.set_defaults(func=cmd_info)

    def option(q, name, family, **kw):
        """An option of ``fastcep.fit`` (family "cp" or "regression") or ``fastcep.stream`` as a
        flag: its choices and help from the option table (``fastcep._options``); None (not
        given): the default."""
        if O.choices(name, family) is not None:
            kw.setdefault("choices", O.choices(name, family))
        kw.setdefault("default", None)
        q.add_argument("--" + name.replace("_", "-"), help=O.cli_help(name, family), **kw)

    def json_and_plot(q, what, drawing):
        """--json (print ``what`` as JSON) and --plot FILE.png (draw ``drawing`` to that image)."""
        q.add_argument("--json", action="store_true", help=f"print {what} as JSON")
        q.add_argument(
            "--plot", metavar="FILE.png", default=None,
            help=f"draw {drawing} to this image (needs matplotlib; default: none)",
        )  # fmt: skip
        _force_arg(q)

    def common(q, family, what):
        q.add_argument("-o", "--output", required=True, help=f"{what} file to write (HDF5; required)")
        q.add_argument("--threads", type=int, default=None, help=O.cli_help("n_threads", family))
        q.add_argument("--quiet", action="store_true", help="no progress on stderr")
        json_and_plot(q, "the result", "the convergence (change per iteration and against time)")

    def fit_checkpoints(q, family):
        """--checkpoint, --checkpoint-every, --resume of a fit on a cluster (with --scheduler)."""
        option(q, "checkpoint", family, type=str)
        option(q, "checkpoint_every", family, type=int)
        option(q, "resume", family, action="store_true")  # (None unless given: the baselines take none)

    def model_args(q, family):
        q.add_argument("tensor", help="HDF5 tensor file (see 'fastcep convert')")
        common(q, family, "model")
        option(q, "model", family, required=True)
        option(q, "likelihood", family, choices=_cp_likelihood_names())
        option(q, "rank", family, type=int)
        for name in ("damping", "tol", "prior_var", "a0", "b0", "prior_mean"):
            option(q, name, family, type=float)
        option(q, "max_iter", family, type=int)
        for name in ("covariance", "probit_curvature", "expect_under", "prior"):
            option(q, name, family)
        option(q, "seed", family, type=int, default=O.defaults(family, "cep1")["seed"])

    f = sub.add_parser("fit", help="batch CEP on an HDF5 tensor; writes a model file")
    model_args(f, "cp")
    option(f, "method", "cp", default=O.defaults("cp", "cep1")["method"])
    option(f, "schedule", "cp")
    option(f, "init", "cp")
    option(f, "noise_warmup", "cp", type=int)
    f.add_argument(
        "--max-entries", type=int, default=50_000_000,
        help="refuse larger tensors (use stream; default %(default)s)",
    )  # fmt: skip
    scheduler_arg(f, "the entries and their messages are split among its workers")
    fit_checkpoints(f, "cp")
    f.set_defaults(func=cmd_fit, verb="fit")

    s = sub.add_parser("stream", help="streaming ADF-CEP on an HDF5 tensor, with checkpoints")
    model_args(s, "stream")
    option(s, "method", "stream", default=O.defaults("stream", "cep1")["method"])
    option(s, "batch_size", "stream", type=int, default=O.defaults("stream", "cep1")["batch_size"])
    option(s, "shuffle", "stream", action="store_true", default=False)
    option(s, "checkpoint", "stream", type=str)
    option(s, "checkpoint_every", "stream", type=int)
    option(s, "resume", "stream", action="store_true", default=False)
    option(s, "passes", "stream", type=int)
    scheduler_arg(s, "the entries are cut into one shard per worker, read there, combined as EP over shards")
    s.set_defaults(func=cmd_stream, verb="stream")

    e = sub.add_parser("evaluate", help="test metrics of a model file on an HDF5 test tensor")
    e.add_argument("model", help="CP model file (from 'fastcep fit' or 'fastcep stream')")
    e.add_argument("tensor", help="HDF5 test tensor file of the model's shape")
    json_and_plot(e, "the metrics", "calibration and ROC (binary) or predicted against observed (continuous)")
    e.set_defaults(func=cmd_evaluate)

    g = sub.add_parser("glm", help="Bayesian regression of binary, real or count targets on a data table")
    gsub = g.add_subparsers(dest="glm_command", required=True)

    def data_args(q):
        q.add_argument("--delimiter", default=",", help="field separator of a CSV file (default %(default)r)")
        q.add_argument(
            "--index-base", type=int, choices=(0, 1), default=0,
            help="svmlight text: what its first column is called (default 0: column k is index k)",
        )  # fmt: skip

    def width_arg(q):
        q.add_argument(
            "--width", type=_width, default=None,
            help="svmlight text: the columns (default: its largest index + 1)",
        )  # fmt: skip

    gf = gsub.add_parser("fit", help="fit a regression model; writes a regression model file")
    gf.add_argument(
        "data",
        help="CSV file with a header row, HDF5 file of one 1-D dataset per column in its root, svmlight "
        "text or a sparse-row HDF5 file (fastcep convert)",
    )
    gf.add_argument(
        "--target", default=None,
        help="the target column of a table: binary labels 0/1 or -1/1, or values the --model takes "
        "(default: none, which only sparse rows take: they carry their label)",
    )  # fmt: skip
    gf.add_argument(
        "--features", nargs="+", metavar="COL", default=None,
        help="the feature columns (default: every column but the target)",
    )  # fmt: skip
    common(gf, "regression", "regression model")
    # (a Custom likelihood is code: not a command-line choice)
    names = [m for m in O.choices("model", "regression") if m != "custom"]
    option(gf, "model", "regression", default=O.defaults("regression", "cep1")["model"], choices=names)
    option(gf, "method", "regression", default=O.defaults("regression", "cep1")["method"])
    option(gf, "damping", "regression", type=_float_or_auto)
    option(gf, "fit_intercept", "regression", action=argparse.BooleanOptionalAction)
    option(gf, "center", "regression", action=argparse.BooleanOptionalAction)
    for name in ("prior_var", "intercept_var", "tol", "threshold"):
        option(gf, name, "regression", type=float)
    for name in ("max_iter", "n_nodes", "n_samples", "n_features"):
        option(gf, name, "regression", type=int)
    option(gf, "schedule", "regression")
    option(gf, "stopping", "regression")
    option(gf, "seed", "regression", type=int, default=O.defaults("regression", "cep1")["seed"])
    scheduler_arg(gf, "the rows are split among its workers")
    fit_checkpoints(gf, "regression")
    data_args(gf)
    width_arg(gf)
    gf.set_defaults(func=cmd_glm_fit, verb="glm fit")

    ge = gsub.add_parser("evaluate", help="test metrics of a regression model file on data")
    ge.add_argument("model", help="regression model file (from 'fastcep glm fit')")
    ge.add_argument(
        "data",
        help="CSV file or HDF5 table holding the model's feature columns and the target, or sparse rows "
        "(svmlight text, a sparse-row HDF5 file) of the model's width",
    )
    ge.add_argument(
        "--target", default=None,
        help="a table's target column (default: the model's target; sparse rows carry their label)",
    )  # fmt: skip
    json_and_plot(ge, "the metrics", "calibration and ROC")
    data_args(ge)
    ge.set_defaults(func=cmd_glm_evaluate, verb="glm evaluate")

    gs = gsub.add_parser(
        "stream",
        help="one online pass over sparse rows (svmlight, sparse-row HDF5); writes a regression model",
    )
    gs.add_argument("data", help="svmlight text or a sparse-row HDF5 file (fastcep convert)")
    gs.add_argument("-o", "--output", required=True, help="regression model file to write (HDF5; required)")
    gs.add_argument("--model", default="probit", choices=names, help="the likelihood (default %(default)s)")
    stream_methods = ("cep1", "cep2", "ep")
    gs.add_argument(
        "--method", default="cep1", choices=stream_methods, help="the method (default %(default)s)"
    )
    gs.add_argument("--batch-rows", type=int, default=10_000, help="rows a batch (default %(default)s)")
    gs.add_argument("--forget", type=float, default=0.0, help="forgetting per row, in [0, 1) (default 0.0)")
    gs.add_argument("--max-iter", type=int, default=None, help="sweeps of a batch at most (default: 200)")
    gs.add_argument("--tol", type=float, default=1e-5, help="a batch's stop rule (default %(default)s)")
    gs.add_argument("--prior-var", type=float, default=1.0, help="the weights' prior variance (default 1.0)")
    gs.add_argument("--intercept-var", type=float, default=100.0, help="the intercept's (default 100.0)")
    gs.add_argument(
        "--fit-intercept", action=argparse.BooleanOptionalAction, default=True,
        help="fit an intercept (default: True)",
    )  # fmt: skip
    gs.add_argument(
        "--init", metavar="MODEL.h5", help="start from this regression model (default: the prior)"
    )
    gs.add_argument(
        "--checkpoint", help="write the model here every --checkpoint-every batches (default: none)"
    )
    gs.add_argument(
        "--checkpoint-every", type=int, default=100, help="batches a checkpoint (default %(default)s)"
    )
    gs.add_argument("--resume", action="store_true", help="go on from --checkpoint if it exists")
    gs.add_argument(
        "--passes", type=int, default=None, help="with --scheduler: the passes over the shards (default 3)"
    )
    scheduler_arg(
        gs, "a sparse-row file's rows are cut into one shard per worker, combined as EP over shards"
    )
    gs.add_argument("--threads", type=int, default=None, help=O.cli_help("n_threads", "regression"))
    gs.add_argument("--quiet", action="store_true", help="no progress on stderr")
    gs.add_argument("--json", action="store_true", help="print the result as JSON")
    _force_arg(gs)
    data_args(gs)
    width_arg(gs)
    gs.set_defaults(func=cmd_glm_stream, verb="glm stream")
    return p
