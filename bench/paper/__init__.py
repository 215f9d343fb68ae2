"""Reproductions of the paper's experiments: ``python -m bench.paper.regression`` (section 5.1)
regenerates bench/paper/REPRODUCTION.md and its figures."""
