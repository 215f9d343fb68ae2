"""The option table (``fastcep._options``): it covers every entry point's keywords with their
defaults, refuses unknown and inapplicable options, gives the one error form, and is what the
docstrings, the estimators and the command line read."""

import inspect
import re

import numpy as np
import pytest

import fastcep
from fastcep import _options as O
from fastcep._validation import REQUIRED, Refused, Spec
from fastcep.api import fit
from fastcep.glm.engine import SCHEDULES as GLM_SCHEDULES
from fastcep.glm.engine import STOP_REASONS, fit_regression
from fastcep.streaming.adf import stream
from fastcep.tensor.cp_wopt import fit_cp_wopt
from fastcep.tensor.engine import LP_INDEFINITE, fit_cp
from fastcep.tensor.vmp import fit_vmp

DATA = ("X", "y", "coords", "values")
#: keywords of the entry points that are not options: the data, and the module of
#: ``fastcep.cluster`` that ``fastcep.fit`` and ``fastcep.stream`` pass with ``client=``
NOT_OPTIONS = (*DATA, "cluster")
#: every entry point, its family and the methods it runs
ENTRY_POINTS = [
    (fit_regression, "regression", O.choices("method", "regression")),
    (fit_cp, "cp", O.CEP),
    (fit_vmp, "cp", ("vmp",)),
    (fit_cp_wopt, "cp", ("cp_wopt",)),
    (stream, "stream", O.choices("method", "stream")),
]


def _same(a, b):
    return type(a) is type(b) and a == b


@pytest.mark.parametrize("func, family, methods", ENTRY_POINTS, ids=lambda v: getattr(v, "__name__", None))
def test_the_table_covers_every_keyword_with_its_default(func, family, methods):
    params = inspect.signature(func).parameters
    for method in methods:
        for name, p in params.items():
            if name in NOT_OPTIONS or p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
                continue
            found = O.spec(name, family, method)
            assert found is not None, f"{func.__name__}: {name!r} is not in the table for {family}/{method}"
            if isinstance(found, Refused):  # kept in the signature as the "left out" marker
                assert p.default is None, (func.__name__, name)
            elif found.default is REQUIRED or (name == "model" and p.default is p.empty):
                assert p.default is p.empty, (func.__name__, name)
            else:
                assert _same(p.default, found.default), (
                    func.__name__,
                    method,
                    name,
                    p.default,
                    found.default,
                )
        # and every option the table gives this method is a keyword of the entry point (the
        # baselines' entry points are their method)
        for name in O.defaults(family, method):
            assert name in params or (name == "method" and len(methods) == 1), (func.__name__, method, name)
    assert any(p.kind is p.VAR_KEYWORD for p in params.values())  # unknown names reach validate


def test_fit_selectors_take_the_table_defaults():
    params = inspect.signature(fit).parameters
    assert params["model"].default == O.spec("model", "regression").default == "probit"
    assert params["method"].default == O.spec("method", "regression").default == "cep1"


def test_the_defaults_have_not_changed():
    """The values of the per-engine dicts the table replaced (results stay bitwise the same)."""
    reg = O.defaults("regression", "cep1")
    assert {k: reg[k] for k in ("damping", "max_iter", "tol", "schedule", "stopping", "n_nodes")} == dict(
        damping="auto", max_iter=5000, tol=1e-5, schedule="parallel", stopping="posterior", n_nodes=None
    )
    assert (reg["prior_var"], reg["n_samples"], reg["threshold"], reg["n_features"], reg["seed"]) == (
        1.0, 10_000, 1e-3, 200, 0,
    )  # fmt: skip
    cp = O.defaults("cp", "cep1")
    assert {
        k: cp[k] for k in ("damping", "max_iter", "tol", "a0", "b0", "noise_warmup", "warmup_snr")
    } == dict(damping=0.5, max_iter=500, tol=1e-4, a0=1e-3, b0=1e-3, noise_warmup=10, warmup_snr=10.0)
    assert (cp["lp_indefinite"], cp["probit_curvature"], cp["expect_under"], cp["init"]) == (
        "clip", None, None, None,
    )  # fmt: skip
    # (init None: the SVD start, as before; "sketch" for a tensor file read on a cluster's workers)
    assert O.validate("fit", "cp", "cp_gaussian", "cep1", {"rank": 2})["init"] == "svd"
    # issue 21: what None stands for in prior and expect_under, per method and covariance
    resolved = {
        (method, cov, schedule): O.validate(
            "fit", "cp", "cp_probit", method, {"rank": 2, "covariance": cov, "schedule": schedule}
        )
        for method, cov, schedule in (
            ("cep1", "full", "parallel"), ("cep1", "full", "block"), ("cep1", "full", "sequential"),
            ("cep1", "diag", "parallel"), ("lp", "full", "parallel"),
        )
    }  # fmt: skip
    assert {k: (v["prior"], v["expect_under"], v["probit_curvature"]) for k, v in resolved.items()} == {
        ("cep1", "full", "parallel"): ("wishart", "cavity", "rank1"),
        ("cep1", "full", "block"): ("wishart", "cavity", "rank1"),
        ("cep1", "full", "sequential"): ("wishart", "posterior", "rank1"),
        ("cep1", "diag", "parallel"): ("ard", "posterior", "rank1"),
        ("lp", "full", "parallel"): ("fixed", "posterior", "full"),
    }
    for cov, kind in (("full", "wishart"), ("diag", "ard")):  # (the learned prior that suits)
        for family, func in (("cp", "fit"), ("stream", "stream")):
            given = {"rank": 2, "covariance": cov, "prior": "hierarchical"}
            assert O.validate(func, family, "cp_probit", "cep1", given)["prior"] == kind
    gaussian = O.validate("fit", "cp", "cp_gaussian", "cep1", {"rank": 2})
    assert gaussian["probit_curvature"] == "full"  # (the only value it accepts; unused)
    with_mean = O.validate("fit", "cp", "cp_probit", "cep1", {"rank": 2, "prior_mean": 0.3})
    assert with_mean["prior"] == "fixed"
    streams = {
        (method, cov): O.validate("stream", "stream", "cp_probit", method, {"rank": 2, "covariance": cov})
        for method, cov in (("cep1", "full"), ("cep1", "diag"), ("post", "full"))
    }
    assert {k: (v["prior"], v["expect_under"], v["probit_curvature"]) for k, v in streams.items()} == {
        ("cep1", "full"): ("wishart", "cavity", "rank1"),
        ("cep1", "diag"): ("ard", "posterior", "rank1"),
        ("post", "full"): ("fixed", "posterior", "full"),
    }
    assert O.defaults("cp", "vmp")["init_snr"] == 10.0
    assert O.defaults("cp", "cp_wopt")["tol"] == 1e-9 and O.defaults("cp", "cp_wopt")["reg"] == 0.0
    # the stream's per-model values of None
    resolved = {
        (model, method): O.validate("stream", "stream", model, method, {"rank": 2})
        for model in ("cp_probit", "cp_gaussian")
        for method in ("cep1", "post")
    }
    got = {k: (v["damping"], v["max_iter"], v["prior_mean"], v["schedule"]) for k, v in resolved.items()}
    assert got == {
        ("cp_probit", "cep1"): (1.0, 3, 0.1, "parallel"),
        ("cp_gaussian", "cep1"): (0.5, 50, 0.0, "parallel"),
        ("cp_probit", "post"): (1.0, 50, 0.1, "parallel"),
        ("cp_gaussian", "post"): (1.0, 50, 0.0, "parallel"),
    }
    assert (
        resolved["cp_probit", "cep1"]["tol"] == 1e-3 and resolved["cp_probit", "cep1"]["batch_size"] == 1000
    )


def test_validate_fills_and_checks_every_option():
    o = O.validate("fit", "regression", "probit", "cep1", {"max_iter": np.int64(7), "tol": 0})
    assert _same(o["max_iter"], 7) and _same(o["tol"], 0.0)
    assert set(o) == set(O.defaults("regression", "cep1")) - {"model", "method"}
    assert o["damping"] == "auto" and o["seed"] == 0 and o["init_state"] is None


X = np.random.default_rng(0).standard_normal((20, 3))
Y = (X[:, 0] > 0).astype(float)
COORDS = np.array([[0, 0, 0], [1, 2, 3], [2, 1, 0]])
VALUES = np.array([0.5, -1.0, 2.0])


@pytest.mark.parametrize(
    "call, valid",
    [
        (lambda: fastcep.fit(X, Y, bogus=1), ["damping", "n_nodes", "stopping"]),
        (lambda: fastcep.fit(X, Y, rank=2), ["prior_var", "threshold"]),  # a CP option
        (lambda: fastcep.fit(COORDS, VALUES, model="cp_gaussian", rank=2, bogus=1), ["expect_under"]),
        (lambda: fastcep.fit(COORDS, VALUES, model="cp_gaussian", rank=2, reg=1.0), ["lp_indefinite"]),
        (
            lambda: fastcep.fit(COORDS, VALUES, model="cp_gaussian", method="vmp", rank=2, bogus=1),
            ["init_snr"],
        ),
        (
            lambda: fastcep.fit(COORDS, VALUES, model="cp_gaussian", method="cp_wopt", rank=2, bogus=1),
            ["reg"],
        ),
        (lambda: fastcep.stream(COORDS, VALUES, model="cp_gaussian", rank=2, bogus=1), ["batch_size"]),
    ],
)
def test_unknown_options_are_refused_naming_the_valid_ones(call, valid):
    with pytest.raises(TypeError, match="unexpected keyword argument") as info:
        call()
    msg = str(info.value)
    listed = msg.split(": ")[-1].rstrip(".").split(", ")
    assert all(name in listed for name in valid), msg
    assert "model" not in listed and "method" not in listed


@pytest.mark.parametrize(
    "func, family, model, method, given, exc, message",
    [
        ("fit", "regression", "probit", "cep1", {"damping": 1.5}, ValueError,
         "The 'damping' parameter of fit must be a finite float > 0.0 and <= 1.0. Got 1.5 instead."),
        ("fit", "regression", "probit", "cep1", {"damping": "fast"}, ValueError,
         "The 'damping' parameter of fit must be a float in (0, 1] or 'auto'. Got 'fast' instead."),
        ("fit", "cp", "cp_gaussian", "cep1", {"rank": 2, "damping": "auto"}, TypeError,
         "The 'damping' parameter of fit must be a finite float > 0.0 and <= 1.0. Got 'auto' instead."),
        ("fit", "regression", "probit", "cep1", {"schedule": "block"}, ValueError,
         "The 'schedule' parameter of fit must be one of 'parallel', 'sequential'. Got 'block' instead."),
        ("fit", "regression", "logit", "cep1", {}, ValueError,
         "The 'model' parameter of fit must be one of 'probit', 'logistic', 'gaussian', 'poisson', 'negbin', "
         "'student_t', 'custom'. Got 'logit' instead."),
        ("fit", "regression", "probit", "cep1", {"max_iter": 0}, ValueError,
         "The 'max_iter' parameter of fit must be an int >= 1. Got 0 instead."),
        ("fit", "regression", "probit", "cep1", {"max_iter": 2.5}, TypeError,
         "The 'max_iter' parameter of fit must be an int >= 1. Got 2.5 instead."),
        ("fit", "regression", "probit", "cep1", {"n_nodes": 1}, ValueError,
         "The 'n_nodes' parameter of fit must be an int >= 2 and <= 200. Got 1 instead."),
        ("fit", "cp", "cp_gaussian", "vmp", {"rank": None}, TypeError,
         "The 'rank' parameter of fit must be an int >= 1. Got None instead."),
        ("fit", "regression", "probit", "cep1", {"verbose": "yes"}, TypeError,
         "The 'verbose' parameter of fit must be a bool. Got 'yes' instead."),
        ("fit", "regression", "probit", "cep1", {"callback": 3}, TypeError,
         "The 'callback' parameter of fit must be a callable or None. Got 3 instead."),
        ("stream", "stream", "cp_probit", "cep1", {"rank": 2, "batch_size": 0}, ValueError,
         "The 'batch_size' parameter of stream must be an int >= 1. Got 0 instead."),
        ("stream", "stream", "cp_probit", "cep1", {"rank": 2, "seed": None}, TypeError,
         "The 'seed' parameter of stream must be an int >= 0. Got None instead."),
        ("stream", "stream", "cp_probit", "cep1", {"rank": 2, "max_iter": 0}, ValueError,
         "The 'max_iter' parameter of stream must be an int >= 1. Got 0 instead."),
    ],
)  # fmt: skip
def test_constraints_give_the_one_error_form(func, family, model, method, given, exc, message):
    with pytest.raises(exc, match="^" + re.escape(message) + "$"):
        O.validate(func, family, model, method, given)


def test_the_public_calls_give_the_same_errors():
    with pytest.raises(ValueError, match=re.escape("The 'damping' parameter of fit must be a finite float")):
        fastcep.fit(X, Y, damping=0.0)
    with pytest.raises(
        ValueError, match=re.escape("The 'covariance' parameter of fit must be one of 'full'")
    ):
        fastcep.fit(COORDS, VALUES, model="cp_gaussian", rank=2, covariance="dense")
    with pytest.raises(
        ValueError, match=re.escape("The 'checkpoint_every' parameter of stream must be an int")
    ):
        fastcep.stream(COORDS, VALUES, model="cp_gaussian", rank=2, checkpoint_every=0)


@pytest.mark.parametrize(
    "family, model, method, given, message",
    [
        (
            "cp",
            "cp_gaussian",
            "vmp",
            {"rank": 2, "damping": 0.5},
            "the 'damping' option does not apply to method='vmp'",
        ),
        (
            "cp",
            "cp_gaussian",
            "cp_wopt",
            {"rank": 2, "a0": 1.0},
            "The 'a0' parameter of fit must be left unset with",
        ),
        (
            "stream",
            "cp_gaussian",
            "post",
            {"rank": 2, "schedule": "block"},
            "'schedule' option does not apply to method='post'",
        ),
        ("cp", "cp_gaussian", "vmp", {"rank": 2, "covariance": "diag"}, "must be 'full' for method='vmp'"),
        ("regression", "probit", "kjit", {}, "kjit is implemented for the logistic model"),
        ("cp", "cp_gaussian", "cep2", {"rank": 2}, "method='cep2' is not implemented"),
        ("cp", "cp_gaussian", "lp", {"rank": 2, "schedule": "sequential"}, "method='lp' supports schedule="),
        (
            "cp",
            "cp_gaussian",
            "cep1",
            {"rank": 2, "probit_curvature": "rank1"},
            "applies to model='cp_probit'",
        ),
        (
            "stream",
            "cp_probit",
            "cep1",
            {"rank": 2, "expect_under": "cavity", "covariance": "diag"},
            "covariance='full'",
        ),
        ("stream", "cp_probit", "cep1", {"rank": 2, "resume": True}, "resume=True needs a checkpoint path"),
    ],
)
def test_refusals_and_cross_option_rules(family, model, method, given, message):
    func = "stream" if family == "stream" else "fit"
    with pytest.raises(ValueError, match=re.escape(message)):
        O.validate(func, family, model, method, given)


def test_a_refused_option_left_at_none_is_accepted():
    o = O.validate("fit", "cp", "cp_gaussian", "vmp", {"rank": 2, "damping": None, "schedule": None})
    assert "damping" not in o and "schedule" not in o and o["covariance"] == "full"
    o = O.validate("stream", "stream", "cp_gaussian", "post", {"rank": 2, "damping": None})
    assert (o["damping"], o["schedule"]) == (1.0, "parallel")  # recorded in the trace and checkpoints


def test_fit_and_stream_share_names_and_defaults():
    for name in ("seed", "verbose", "progress", "callback", "n_threads", "tol", "damping", "max_iter"):
        for family in ("regression", "cp", "stream"):
            assert isinstance(O.spec(name, family, "cep1"), Spec), (name, family)
    for name in ("seed", "verbose", "progress", "callback", "n_threads"):
        values = {repr(O.spec(name, family, "cep1").default) for family in ("regression", "cp", "stream")}
        assert len(values) == 1, name
    # the exceptions: per batch (and per model) in a stream, with the reason in the table
    for name in ("tol", "damping", "max_iter"):
        note = O.spec(name, "stream", "cep1").note
        assert note.startswith("the exception to fit's default: per batch"), name
    assert "because" in O.spec("damping", "stream", "cep1").note
    assert "because" in O.spec("tol", "stream", "cep1").note


def _documented(doc):
    return set(re.findall(r"^    (\w+)$", doc, flags=re.M))


def test_the_docstrings_document_every_option():
    fit_names = {
        opt.name for opt in O.OPTIONS if any(k.split("/")[0] in ("regression", "cp") for k in opt.specs)
    }
    stream_names = {opt.name for opt in O.OPTIONS if any(k.split("/")[0] == "stream" for k in opt.specs)}
    assert "\n    Options\n    -------\n" in fastcep.fit.__doc__
    assert fit_names <= _documented(fastcep.fit.__doc__)
    assert {"lp_indefinite", "expect_under", "rank", "reg", "init_snr", "n_nodes"} <= fit_names
    assert stream_names <= _documented(fastcep.stream.__doc__)
    assert "batch_size" in stream_names and "n_nodes" not in _documented(fastcep.stream.__doc__)
    # the CP options' constraints and defaults are in help(fastcep.fit)
    doc = inspect.getdoc(fastcep.fit)
    assert (
        "cp (methods cep1, lp): {'posterior', 'cavity'} or None, default None; None: 'cavity' "
        "where it applies" in " ".join(doc.split())
    )


def test_the_estimators_take_the_table_defaults():
    """... and ``forget``, partial_fit's and not fit's, the default of ``RegressionResult.update``."""
    pytest.importorskip("sklearn")
    from fastcep.glm import online

    table = O.defaults("regression", "cep1")
    for cls in (fastcep.BayesianProbitClassifier, fastcep.BayesianLogisticClassifier):
        params = cls().get_params()
        assert params.pop("forget") == online.FORGET
        assert params == {name: table[name] for name in params}


def test_the_command_line_takes_choices_defaults_and_help_from_the_table():
    from fastcep.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "command").choices
    for command, family in (("fit", "cp"), ("stream", "stream")):
        flags = {a.dest: a for a in sub[command]._actions}
        for name in ("model", "covariance", "probit_curvature", "expect_under", "method"):
            assert tuple(flags[name].choices) == O.choices(name, family), (command, name)
        for name in ("damping", "tol", "max_iter", "prior_var", "a0", "b0", "prior_mean", "seed"):
            assert flags[name].help == O.cli_help(name, family), (command, name)
        assert flags["seed"].default == O.defaults(family, "cep1")["seed"]
    fit_flags = {a.dest: a for a in sub["fit"]._actions}
    assert tuple(fit_flags["schedule"].choices) == O.choices("schedule", "cp")
    assert tuple(fit_flags["init"].choices) == O.choices("init", "cp")
    stream_flags = {a.dest: a for a in sub["stream"]._actions}
    assert stream_flags["batch_size"].default == O.defaults("stream", "cep1")["batch_size"]


def test_the_engines_tables_agree_with_the_option_table():
    assert tuple(GLM_SCHEDULES) == O.choices("schedule", "regression")
    assert tuple(STOP_REASONS) == O.choices("stopping", "regression")
    assert tuple(LP_INDEFINITE) == O.choices("lp_indefinite", "cp")
    from fastcep.tensor.cp_wopt import NOT_APPLICABLE

    assert NOT_APPLICABLE == tuple(
        name for name in (opt.name for opt in O.OPTIONS) if isinstance(O.spec(name, "cp", "cp_wopt"), Refused)
    )
    assert "prior_var" in NOT_APPLICABLE and "reg" not in NOT_APPLICABLE
