"""Cubic smoothing splines: fits, the `Spline` pytree, smoother matrices, degrees of freedom and
λ rules, and worker/input nodes.

The solvers sit side by side behind one objective (the O(n) Kalman smoother, the
parallel-in-time smoother, the kernel (Gram) form), with the batched decoders that codes use:
:func:`smooth_batch_with_status` (the Kalman pass over many masks), :func:`smooth_chunks` (chunks
of masks, each mask's fit a rank-S downdate of one full fit where that applies) and
:func:`downdate_plan` (the downdate's work that does not depend on the outputs, a
:class:`DowndatePlan`). :func:`decode_path` is the one place that chooses among them
(:class:`DecodePath`).
"""

from ._decode import MAX_STRAGGLERS as MAX_STRAGGLERS
from ._decode import MAX_WORKERS as MAX_WORKERS
from ._decode import MIN_MASKS as MIN_MASKS
from ._decode import MIN_WORKERS as MIN_WORKERS
from ._decode import DecodePath as DecodePath
from ._decode import decode_path as decode_path
from ._downdate import DowndatePlan as DowndatePlan
from ._downdate import downdate_plan as downdate_plan
from ._downdate import smooth_chunks as smooth_chunks
from ._fit import AUTO_PARALLEL_MAX_N_CPU as AUTO_PARALLEL_MAX_N_CPU
from ._fit import Spline as Spline
from ._fit import as_solver as as_solver
from ._fit import fit_smoothing_spline as fit_smoothing_spline
from ._fit import fit_smoothing_spline_with_status as fit_smoothing_spline_with_status
from ._fit import resolve_solver as resolve_solver
from ._fit import smoother_matrix as smoother_matrix
from ._fit import smoother_matrix_with_status as smoother_matrix_with_status
from ._kalman import smooth_batch_with_status as smooth_batch_with_status
from ._nodes import chebyshev_nodes as chebyshev_nodes
from ._nodes import check_chebyshev_count as check_chebyshev_count
from ._nodes import equispaced_nodes as equispaced_nodes
from ._nodes import max_chebyshev_nodes as max_chebyshev_nodes
from ._smoothing import effective_dof as effective_dof
from ._smoothing import effective_dof_with_status as effective_dof_with_status
from ._smoothing import lam_from_dof as lam_from_dof
from ._smoothing import lam_from_dof_with_status as lam_from_dof_with_status
