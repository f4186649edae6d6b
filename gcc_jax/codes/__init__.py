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
from .learned import train_learned_code as train_learned_code
from .parity import ParityModelCode as ParityModelCode
from .parity import TrainedCode as TrainedCode
from .parity import parity_input as parity_input
from .parity import train_parity_model as train_parity_model
from .spline import SplineCode as SplineCode
from .uncoded import ReplicationCode as ReplicationCode
from .uncoded import UncodedCode as UncodedCode
