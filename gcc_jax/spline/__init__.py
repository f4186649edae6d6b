"""Cubic smoothing splines: fits, the `Spline` pytree, smoother matrices, degrees of freedom and
λ rules, and worker/input nodes.

The solvers sit side by side behind one objective (the O(n) Kalman smoother, the
parallel-in-time smoother, the kernel (Gram) form), with the batched downdate decoder."""

from ._fit import Spline as Spline
from ._fit import fit_smoothing_spline as fit_smoothing_spline
from ._fit import fit_smoothing_spline_with_status as fit_smoothing_spline_with_status
from ._fit import resolve_solver as resolve_solver
from ._fit import smoother_matrix as smoother_matrix
from ._fit import smoother_matrix_with_status as smoother_matrix_with_status
from ._nodes import chebyshev_nodes as chebyshev_nodes
from ._nodes import equispaced_nodes as equispaced_nodes
from ._smoothing import effective_dof as effective_dof
from ._smoothing import lam_from_dof as lam_from_dof
