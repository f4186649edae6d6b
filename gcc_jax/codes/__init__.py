"""Codes: :class:`AbstractCode` and one module per code (spline, berrut, lagrange, uncoded,
parity, grouped_parity, learned; robust, approxifer, lagrange_ec for Byzantine workers)."""

from ._base import AbstractCode as AbstractCode
from ._base import AbstractErrorLocatingCode as AbstractErrorLocatingCode
from ._base import AbstractLinearCode as AbstractLinearCode
from ._base import AbstractNodeCode as AbstractNodeCode
from ._base import AbstractVar as AbstractVar
from ._base import Decoded as Decoded
from ._base import Encoded as Encoded
from ._base import check_code as check_code
from ._base import jit_method as jit_method
from ._base import pytree_dataclass as pytree_dataclass
from .approxifer import ApproxIFERCode as ApproxIFERCode
from .berrut import BerrutCode as BerrutCode
from .grouped_parity import GroupedParityCode as GroupedParityCode
from .lagrange import LagrangeCode as LagrangeCode
from .lagrange_ec import LagrangeECCode as LagrangeECCode
from .learned import LearnedCode as LearnedCode
from .learned import erasure_patterns as erasure_patterns
from .parity import ParityModelCode as ParityModelCode
from .parity import parity_input as parity_input
from .robust import RobustSplineCode as RobustSplineCode
from .robust import adversarial_lam_dec as adversarial_lam_dec
from .spline import SplineCode as SplineCode
from .uncoded import ReplicationCode as ReplicationCode
from .uncoded import UncodedCode as UncodedCode
