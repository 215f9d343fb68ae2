"""Figures reported in the paper (Wang & Zhe, UAI 2019), for side-by-side tables.

Test log-likelihood: main paper Table 1 (logistic with KJIT, probit without); AUC: supplement
Table 1. Each entry is (mean, std) over 5 random 50/50 splits; None where the paper has none.
"""

UCI = ("australian", "breast", "crabs", "ionos", "pima", "sonar")
PAPER_METHODS = ("cep1", "cep2", "lp", "ep", "vb", "kjit")


def _rows(text):
    """'name m s m s ...' lines -> {name: {method: (mean, std)}} in PAPER_METHODS order."""
    out = {}
    for line in text.strip().splitlines():
        name, *nums = line.split()
        vals = [float(v) for v in nums]
        out[name] = {
            m: (vals[2 * k], vals[2 * k + 1]) if 2 * k + 1 < len(vals) else None
            for k, m in enumerate(PAPER_METHODS)
        }
    return out


PAPER_LL = {
    "logistic": _rows("""
australian -0.449 0.012 -0.450 0.015 -0.451 0.012 -0.450 0.015 -0.449 0.015 -0.451 0.013
breast -0.579 0.020 -0.565 0.020 -0.576 0.018 -0.585 0.024 -0.587 0.023 -0.576 0.017
crabs -0.316 0.004 -0.315 0.003 -0.349 0.012 -0.313 0.003 -0.277 0.004 -0.327 0.004
ionos -0.316 0.022 -0.302 0.023 -0.316 0.022 -0.309 0.025 -0.332 0.032 -0.339 0.018
pima -0.541 0.007 -0.540 0.006 -0.541 0.006 -0.541 0.007 -0.542 0.007 -0.608 0.014
sonar -0.522 0.017 -0.513 0.027 -0.519 0.016 -0.531 0.026 -0.578 0.026 -1.085 0.053
"""),
    "probit": _rows("""
australian -0.428 0.012 -0.431 0.015 -0.428 0.012 -0.435 0.015 -0.441 0.017
breast -0.583 0.018 -0.592 0.023 -0.594 0.023 -0.615 0.032 -0.621 0.035
crabs -0.228 0.009 -0.226 0.009 -0.231 0.009 -0.250 0.008 -0.197 0.010
ionos -0.286 0.012 -0.277 0.015 -0.319 0.009 -0.307 0.010 -0.458 0.036
pima -0.553 0.009 -0.554 0.009 -0.553 0.009 -0.554 0.009 -0.557 0.010
sonar -0.533 0.032 -0.528 0.032 -0.579 0.030 -0.553 0.039 -0.891 0.070
"""),
}

PAPER_AUC = {
    "probit": _rows("""
australian 0.883 0.009 0.883 0.009 0.883 0.009 0.880 0.009 0.878 0.010
breast 0.686 0.016 0.690 0.016 0.681 0.020 0.677 0.020 0.672 0.022
crabs 0.995 0.002 0.995 0.002 0.995 0.002 0.995 0.002 0.995 0.002
ionos 0.926 0.006 0.929 0.006 0.896 0.006 0.903 0.005 0.883 0.010
pima 0.825 0.004 0.825 0.004 0.825 0.004 0.825 0.004 0.825 0.004
sonar 0.813 0.023 0.831 0.022 0.804 0.020 0.813 0.022 0.797 0.021
"""),
    "logistic": _rows("""
australian 0.873 0.008 0.873 0.010 0.873 0.009 0.873 0.010 0.873 0.009
breast 0.675 0.021 0.683 0.020 0.675 0.021 0.677 0.020 0.676 0.019
crabs 0.993 0.001 0.992 0.001 0.993 0.001 0.993 0.001 0.993 0.001
ionos 0.912 0.011 0.925 0.010 0.912 0.012 0.914 0.010 0.908 0.010
pima 0.830 0.005 0.831 0.005 0.831 0.005 0.830 0.005 0.830 0.005
sonar 0.820 0.015 0.831 0.016 0.820 0.016 0.827 0.016 0.825 0.014
"""),
}

#: KJIT on the two logistic simulations (paper text, section 5.1): (seconds, KL)
PAPER_KJIT_SIMULATION = {"gaussian": (9595.4, 14.7), "mixture": (10150.3, 1.4e13)}
