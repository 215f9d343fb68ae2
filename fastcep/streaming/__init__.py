"""Streaming CP decomposition (ADF-CEP and POST): data sources and the batch loop."""

from .adf import stream

__all__ = ["stream"]
