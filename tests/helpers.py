"""Every code in gcc_jax, built small in float64, with a worker function and inputs.

``ALL_CODES`` is the list the contract tests (``tests/test_contract.py``) run over, as lineax's
tests do with their solvers. A new code MUST be added here.

Each :class:`CodeCase` says how to build the code, which ``f`` its workers run, the inputs
``x``, how many stragglers it tolerates (``max_stragglers``: every pattern with at most that many
dead workers decodes with status OK), a pattern it cannot decode and the status flag that
pattern raises (``None`` for uncoded computation and replication, which report a fill value
with status OK and mark the missing inputs in ``available``), and how close its estimate is to
``f(x)`` with no stragglers (``tol_all_live``).
"""

import dataclasses
from collections.abc import Callable

import jax.numpy as jnp
import numpy as np

import gcc_jax as gcc
from gcc_jax.codes import GroupedParityCode

__all__ = ["ALL_CODES", "CodeCase", "garbage_wrong_answers", "random_mask", "robust_service_codes"]


@dataclasses.dataclass(frozen=True)
class CodeCase:
    name: str
    build: Callable[[], gcc.AbstractCode]
    f: Callable
    x: np.ndarray
    max_stragglers: int
    undecodable: np.ndarray  # a mask the code cannot decode
    flag: gcc.Status | None  # the status that mask gives (None: fill value, status OK)
    tol_all_live: float  # max |decode(worker_outputs) − f(x)| with every worker live

    def __repr__(self) -> str:  # pytest ids
        return self.name


def random_mask(rng: np.random.Generator, n: int, stragglers: int) -> np.ndarray:
    """A boolean mask with exactly ``stragglers`` random dead workers."""
    mask = np.ones(n, bool)
    mask[rng.choice(n, stragglers, replace=False)] = False
    return mask


def _only(n: int, live: list[int]) -> np.ndarray:
    mask = np.zeros(n, bool)
    mask[live] = True
    return mask


_RNG = np.random.default_rng(20261201)
_X = _RNG.uniform(-0.9, 0.9, size=(4, 3))  # four inputs of size d = 3
_W = _RNG.normal(size=(2, 3))  # a 3 → 2 linear map


def _smooth(v):
    """A smooth nonlinear ``R³ → R²`` worker function."""
    return jnp.stack([jnp.sin(v[0]) + v[1] * v[2], jnp.cos(v[1]) - 0.5 * v[2]])


def _quadratic(v):
    """A degree-2 polynomial ``R³ → R²`` (LCC recovers it exactly)."""
    return jnp.stack([v[0] * v[1] + 1.0, v[2] ** 2 - v[0]])


def _linear(v):
    return jnp.asarray(_W) @ v


def _tanh_linear(v):
    return jnp.tanh(jnp.asarray(_W) @ v)


def _matvec(params, v):  # ParM's parity model: the base model's architecture (linear)
    return params @ v


def _spline(solver: str) -> Callable[[], gcc.AbstractCode]:
    return lambda: gcc.SplineCode.chebyshev(
        num_inputs=4, num_workers=10, lam_enc=0.0, lam_dec=1e-6, solver=solver
    )


ALL_CODES: list[CodeCase] = [
    CodeCase(
        name="spline-kalman",
        build=_spline("kalman"),
        f=_smooth,
        x=_X,
        max_stragglers=4,
        undecodable=_only(10, [3]),
        flag=gcc.Status.TOO_FEW_LIVE,
        tol_all_live=0.05,
    ),
    CodeCase(
        name="spline-kernel",
        build=_spline("kernel"),
        f=_smooth,
        x=_X,
        max_stragglers=4,
        undecodable=_only(10, [3]),
        flag=gcc.Status.TOO_FEW_LIVE,
        tol_all_live=0.05,
    ),
    CodeCase(
        name="berrut",
        build=lambda: gcc.BerrutCode.chebyshev(num_inputs=4, num_workers=9),
        f=_smooth,
        x=_X,
        max_stragglers=8,
        undecodable=np.zeros(9, bool),
        flag=gcc.Status.TOO_FEW_LIVE,
        tol_all_live=0.3,
    ),
    CodeCase(
        name="lagrange",
        build=lambda: gcc.LagrangeCode.chebyshev(num_inputs=3, num_workers=8, degree=2),
        f=_quadratic,
        x=_X[:3],
        max_stragglers=3,  # recovery threshold (K − 1)·2 + 1 = 5 of 8
        undecodable=_only(8, [0, 2, 5, 7]),
        flag=gcc.Status.BELOW_RECOVERY_THRESHOLD,
        tol_all_live=1e-10,  # exact for a degree-2 polynomial
    ),
    CodeCase(
        name="uncoded",
        build=lambda: gcc.UncodedCode(num_inputs=4, fill="zero"),
        f=_smooth,
        x=_X,
        max_stragglers=0,
        undecodable=_only(4, [1]),
        flag=None,
        tol_all_live=0.0,
    ),
    CodeCase(
        name="replication",
        build=lambda: gcc.ReplicationCode(num_inputs=3, num_workers=6, fill="zero"),
        f=_smooth,
        x=_X[:3],
        max_stragglers=1,
        undecodable=_only(6, [0, 1, 3, 4]),  # both copies of input 2 (workers 2, 5) dead
        flag=None,
        tol_all_live=0.0,
    ),
    CodeCase(
        name="parity-model",
        build=lambda: gcc.ParityModelCode(jnp.asarray(_W), _matvec, num_inputs=3),
        f=_linear,
        x=_X[:3],
        max_stragglers=1,
        undecodable=_only(4, [0, 3]),
        flag=gcc.Status.TOO_MANY_ERASURES,
        tol_all_live=0.0,
    ),
    CodeCase(
        name="grouped-parity",  # two ParM groups of k = 2 (the regime map's ParM at N = K + K/k)
        build=lambda: GroupedParityCode(
            gcc.ParityModelCode(jnp.asarray(_W), _matvec, num_inputs=2), groups=2, fill="zero"
        ),
        f=_linear,
        x=_X,
        max_stragglers=1,
        undecodable=_only(6, [0, 3, 4, 5]),  # group 0 lost workers 1 and 2: input 1 missing
        flag=None,
        tol_all_live=0.0,
    ),
    CodeCase(
        name="learned",
        build=lambda: gcc.LearnedCode.init(
            key=0,
            num_inputs=2,
            input_shape=(3,),
            output_size=2,
            decoder_hidden=(8,),
            dtype=jnp.float64,
        ),
        f=_tanh_linear,
        x=_X[:2],
        max_stragglers=1,
        undecodable=_only(3, [2]),
        flag=gcc.Status.TOO_MANY_ERASURES,
        tol_all_live=0.0,
    ),
    # The two robust decoders have equal static fields (iterations, trim; Tukey ignores trim)
    # and the loss is an array leaf, so they share every compiled program of the contract tests.
    CodeCase(
        name="robust-tukey",
        build=lambda: gcc.RobustSplineCode.chebyshev(
            num_inputs=4, num_workers=10, lam_dec=1e-4, loss="tukey", iterations=4, trim=1
        ),
        f=_smooth,
        x=_X,
        max_stragglers=4,
        undecodable=_only(10, [3]),
        flag=gcc.Status.TOO_FEW_LIVE,
        tol_all_live=0.05,
    ),
    CodeCase(
        name="robust-trim",
        build=lambda: gcc.RobustSplineCode.chebyshev(
            num_inputs=4, num_workers=10, lam_dec=1e-4, loss="trim", iterations=4, trim=1
        ),
        f=_smooth,
        x=_X,
        max_stragglers=4,
        undecodable=_only(10, [3]),
        flag=gcc.Status.TOO_FEW_LIVE,
        tol_all_live=0.1,
    ),
    CodeCase(
        name="approxifer",
        build=lambda: gcc.ApproxIFERCode.chebyshev(num_inputs=3, num_workers=12, num_adversaries=1),
        f=_smooth,
        x=_X[:3],
        max_stragglers=5,  # location needs 2K + 2A − 1 = 7 live
        undecodable=_only(12, [0, 2, 4, 6, 8, 10]),
        flag=gcc.Status.BELOW_RECOVERY_THRESHOLD,
        tol_all_live=0.5,
    ),
    CodeCase(
        name="lagrange-ec",
        build=lambda: gcc.LagrangeECCode.chebyshev(
            num_inputs=3, num_workers=10, degree=2, num_adversaries=1
        ),
        f=_quadratic,
        x=_X[:3],
        max_stragglers=3,  # (K − 1)·2 + 2·1 + 1 = 7 live of 10
        undecodable=_only(10, [0, 2, 4, 5, 7, 9]),
        flag=gcc.Status.BELOW_RECOVERY_THRESHOLD,
        tol_all_live=1e-8,  # exact for a degree-2 polynomial
    ),
]


def garbage_wrong_answers(executor, code, model, *, stragglers: int, queries: int = 12) -> int:
    """Wrong answers of the coded inference service on ``executor`` (faults already injected).

    A wrong answer is a query whose answer's class (argmax) differs from ``model``'s own
    prediction on it, or that got no answer. Queries are uniform on ``[−1, 1]³`` with a top-2
    probability margin of at least 0.1 (a near-tie flips under any approximation, coded or not,
    and says nothing about adversaries). The executor must have no ``validate``: the garbage
    reaches the decoder as an ordinary result.
    """
    import jax

    from gcc_jax.distributed import CodedInferenceService

    x = np.random.default_rng(1).uniform(-1, 1, size=(16 * queries, 3))
    probs = np.sort(np.asarray(jax.vmap(model)(jnp.asarray(x))), axis=1)
    x = x[probs[:, -1] - probs[:, -2] >= 0.1][:queries]
    assert len(x) == queries
    truth = np.argmax(np.stack([np.asarray(model(jnp.asarray(v))) for v in x]), axis=1)
    with CodedInferenceService(executor, code, stragglers=stragglers, timeout_s=60.0) as svc:
        answers = svc.serve(x)
    pred = np.array([a.prediction if a.ok else -1 for a in answers])
    return int(np.sum(pred != truth))


def robust_service_codes(num_inputs: int, num_workers: int, gamma: int) -> dict:
    """The robust decoders the garbage-worker service tests use: Tukey and trimming ``γ``.

    ``λ_dec`` by the paper's rule with ``M = 1`` (probabilities) and ``c = 10⁻³``; the scale
    floor ``10⁻²`` (residuals below it do not matter for a class decision). With the decoder's
    least-trimmed-squares start the liars are removed before the fit, so the smaller ``λ_dec``
    costs nothing: on the 4-class softmax model of those tests (N = 12, K = 3) ``c = 10⁻²``
    smooths enough that even the oracle (liars known and dropped) answers one query wrong when
    the liars sit next to the middle input.
    """
    lam = gcc.adversarial_lam_dec(num_workers, gamma, 1.0, constant=1e-3)
    return {
        loss: gcc.RobustSplineCode.chebyshev(
            num_inputs=num_inputs,
            num_workers=num_workers,
            lam_dec=lam,
            loss=loss,
            trim=gamma,
            min_scale=1e-2,
        )
        for loss in ("tukey", "trim")
    }
