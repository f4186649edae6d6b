"""Codes: one module per code, all with ``encode(x)`` and ``decode(y, mask)``."""

from ._base import Decoded as Decoded
from .spline import SplineCode as SplineCode
