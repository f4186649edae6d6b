"""Coded computing on a real runtime: executors, straggler injection, a coded inference service.

- `Executor`: runs one round — coded input ``x~_n`` to worker ``n``, wait for ``N − S`` valid
  results or a timeout — and returns a `RoundResult` (outputs, the decoder's mask, what
  happened to each worker). Two backends, one interface:

  * `LocalExecutor`: in process, workers vmapped, latencies drawn from a `DelayModel`
    (shifted-exponential or Lomax tails, transient and persistent slow-downs, failures),
    reproducible by seed;
  * `RayExecutor`: ``N`` Ray actors each holding the worker model; the master decodes after
    ``ray.wait(num_returns=N − S, timeout=...)``, discards late results, restarts dead actors.

- `RoundRobinExecutor`: rounds spread over several groups of ``N`` workers in turn.
- `Fault`: injected faults (NaN, garbage, wrong shape, exceptions, hangs, crashes).
- `CodedInferenceService`: a stream of queries in a bounded queue (`Overloaded` past it),
  batched ``K`` at a time whenever a round may start, encoded, dispatched, decoded; each query
  released as soon as its own estimate is ready (or at the round's cut-off, by option), with
  deadline decoding; every query gets an `Answer` or an explicit error.
  It warns (`UncheckedResultsWarning`) when nothing protects its answers from workers that
  return wrong finite results: a code with ``max_liars = 0`` and an executor without ``validate``.
- `poisson_arrivals`, `init_local_ray`, `default_wait_for`, `probability_check`: helpers.
- `simulate`: a discrete-event model of a serving cluster in model time (one queue per pool of
  instances, Poisson arrivals, `ServiceTime` work, persistent `Background` load episodes, no
  cancellation) serving uncoded, equal resources, replication, ParM or approximate codes
  (`SIM_SCHEMES`); a `SimResult` per query. `cluster_sizes`: each scheme's instances.

These names live in ``gcc_jax.distributed`` only (not re-exported by ``gcc_jax``), so that
``import gcc_jax`` stays light; Ray is imported only when a `RayExecutor` is built.
"""

from ._delays import FAULT_KINDS as FAULT_KINDS
from ._delays import DelayModel as DelayModel
from ._delays import Fault as Fault
from ._executor import Executor as Executor
from ._executor import OnResult as OnResult
from ._executor import Outcome as Outcome
from ._executor import RoundResult as RoundResult
from ._executor import RoundRobinExecutor as RoundRobinExecutor
from ._executor import WaitFor as WaitFor
from ._executor import default_wait_for as default_wait_for
from ._executor import probability_check as probability_check
from ._local import LocalExecutor as LocalExecutor
from ._ray import RayExecutor as RayExecutor
from ._ray import init_local_ray as init_local_ray
from ._service import LIARS as LIARS
from ._service import RELEASES as RELEASES
from ._service import Answer as Answer
from ._service import CodedInferenceService as CodedInferenceService
from ._service import Overloaded as Overloaded
from ._service import UncheckedResultsWarning as UncheckedResultsWarning
from ._service import poisson_arrivals as poisson_arrivals
from ._sim import SIM_SCHEMES as SIM_SCHEMES
from ._sim import Background as Background
from ._sim import ServiceTime as ServiceTime
from ._sim import SimResult as SimResult
from ._sim import cluster_sizes as cluster_sizes
from ._sim import simulate as simulate

__all__ = [
    "FAULT_KINDS",
    "LIARS",
    "RELEASES",
    "SIM_SCHEMES",
    "Answer",
    "Background",
    "CodedInferenceService",
    "DelayModel",
    "Executor",
    "Fault",
    "LocalExecutor",
    "OnResult",
    "Outcome",
    "Overloaded",
    "RayExecutor",
    "RoundResult",
    "RoundRobinExecutor",
    "ServiceTime",
    "SimResult",
    "UncheckedResultsWarning",
    "WaitFor",
    "cluster_sizes",
    "default_wait_for",
    "init_local_ray",
    "poisson_arrivals",
    "probability_check",
    "simulate",
]
