"""Codes: :class:`AbstractCode` and one module per code (spline, berrut, lagrange, uncoded,
parity, learned)."""

from ._base import AbstractCode as AbstractCode
from ._base import AbstractLinearCode as AbstractLinearCode
from ._base import Decoded as Decoded
from ._base import Encoded as Encoded
from .berrut import BerrutCode as BerrutCode
from .lagrange import LagrangeCode as LagrangeCode
from .learned import LearnedCode as LearnedCode
from .learned import erasure_patterns as erasure_patterns
from .parity import ParityModelCode as ParityModelCode
from .parity import parity_input as parity_input
from .spline import SplineCode as SplineCode
from .uncoded import ReplicationCode as ReplicationCode
from .uncoded import UncodedCode as UncodedCode
