"""Codes: one module per code, all with ``encode(x)`` and ``decode(y, mask)``."""

from ._base import Decoded as Decoded
from .berrut import BerrutCode as BerrutCode
from .lagrange import LagrangeCode as LagrangeCode
from .spline import SplineCode as SplineCode
from .uncoded import ReplicationCode as ReplicationCode
from .uncoded import UncodedCode as UncodedCode
