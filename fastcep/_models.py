"""The one home of the models' and methods' names, and of the rule that maps a CP model and a
likelihood to the model that runs (``resolve``).

The regression models are the likelihoods by name (``REGRESSION_LIKELIHOODS``; "custom": a
``Custom`` object). The CP models: the hand-written ones (``CP_FAST_PATHS``, their own kernels),
the generic "cp_<name>" of every other likelihood of the seam's registry (``CP_GENERIC``: CEP-1
through its tilted moments, ``fastcep.tensor.likelihoods``), and "cp", whose likelihood comes
from the ``likelihood`` option. The option table (``fastcep._options``), the CP engine and the
model files (``fastcep.io``) all take them from here.
"""

from . import _validation as V
from .kernels.likelihoods import REGISTRY
from .likelihoods import SHORTHANDS, Bernoulli, Gaussian, Likelihood

#: the regression likelihoods by name (``fastcep.likelihoods``; "custom": a ``Custom`` object)
REGRESSION_LIKELIHOODS = ("probit", "logistic", "gaussian", "poisson", "negbin", "student_t", "custom")
#: the regression methods; the methods of every likelihood; the others are the binary ones'
REGRESSION_METHODS = ("cep1", "cep2", "ep", "lp", "is", "vb", "kjit")
GENERIC_METHODS = ("cep1", "cep2", "ep")
#: the hand-written CP models (their own kernels); every other likelihood of the seam's registry
#: is the generic model "cp_<name>"
CP_FAST_PATHS = ("cp_gaussian", "cp_probit")
CP_GENERIC = tuple(f"cp_{name}" for name in REGISTRY if f"cp_{name}" not in CP_FAST_PATHS)
#: every CP model: "cp" takes its likelihood from the ``likelihood`` option (``resolve``)
CP_MODELS = ("cp", *CP_FAST_PATHS, *CP_GENERIC)

#: the likelihood each hand-written model fits: ``model="cp"`` with a likelihood equal to one of
#: these runs that model (cp_gaussian's Gamma posterior of the noise precision is the Gaussian's
#: learned variance; a Gaussian of known variance goes the generic way)
HAND_WRITTEN = {"cp_gaussian": Gaussian, "cp_probit": lambda: Bernoulli("probit")}


def registry_name(model):
    """The registry name of a CP model's likelihood: "cp_logistic" -> "logistic"."""
    return model[3:] if model.startswith("cp_") else model


def names():
    """The likelihood names a CP model takes: the shorthands with compiled leaves in the seam's
    registry."""
    return tuple(name for name in SHORTHANDS if name in REGISTRY)


def shorthand(model):
    """The likelihood (a public object, its defaults) of a CP model named by its likelihood:
    "cp_gaussian" -> Gaussian(var=None), "cp_logistic" -> Bernoulli("logistic")."""
    name = registry_name(model)
    return SHORTHANDS[name]()


def is_generic(model):
    """Whether a CP model goes through the seam's generic messages (not a fast path)."""
    return model not in CP_FAST_PATHS


def _refuse(func, what, value, exc=ValueError):
    return V.param_error("likelihood", func, what, value, exc)


def resolve(model, likelihood, func="fit"):
    """(the model that runs, its likelihood object) from a CP call's ``model`` (checked: "cp" or
    "cp_<name>") and ``likelihood`` (None, a name or a ``fastcep.likelihoods`` object): the
    model/likelihood consistency rule of the option table (``fastcep._options.validate``).

    "cp_<name>" takes no likelihood (it names one: its shorthand's defaults); "cp" needs one,
    which runs the hand-written model it equals (``HAND_WRITTEN``), else the generic shorthand it
    equals (defaults included), else the generic model "cp"."""
    known = ", ".join(repr(n) for n in names())
    if likelihood is None:
        if model == "cp":
            raise ValueError(
                f"{func}: model='cp' needs a likelihood: likelihood= a fastcep.likelihoods object "
                f"(e.g. Gaussian(var=0.1)) or one of {known}; or name it in the model ('cp_gaussian')."
            )
        return model, shorthand(model)
    if model != "cp":
        raise ValueError(
            f"{func}: model={model!r} names its likelihood ({shorthand(model)!r}); a likelihood "
            f"object or name goes with model='cp' (got likelihood={likelihood!r}). Use "
            f"model='cp', likelihood=... or model={model!r} alone."
        )
    if isinstance(likelihood, str):
        if likelihood not in SHORTHANDS or likelihood not in REGISTRY:
            why = (
                f" ({likelihood!r} has no compiled leaves in the seam's registry yet)"
                if likelihood in SHORTHANDS
                else ""
            )
            what = f"a likelihood object (fastcep.likelihoods) or one of {known}{why}"
            raise _refuse(func, what, likelihood)
        likelihood = SHORTHANDS[likelihood]()
    elif not isinstance(likelihood, Likelihood):
        what = f"a likelihood object (fastcep.likelihoods) or one of {known}"
        raise _refuse(func, what, likelihood, TypeError)
    elif likelihood.name != "custom" and likelihood.name not in REGISTRY:
        raise _refuse(
            func,
            f"a likelihood whose compiled leaves are in the seam's registry ({known})",
            f"{likelihood!r} (no leaves registered for {likelihood.name!r})",
        )
    for fast, default in HAND_WRITTEN.items():
        if likelihood == default():
            return fast, likelihood
    name = likelihood.name
    if name in SHORTHANDS and f"cp_{name}" in CP_GENERIC and likelihood == SHORTHANDS[name]():
        return f"cp_{name}", likelihood
    return "cp", likelihood
