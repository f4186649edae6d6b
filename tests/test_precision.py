"""Every float32 program of gcc_jax multiplies at full precision (STYLE 26).

Accelerators run a float32 matmul of default precision at reduced precision (TF32 on an NVIDIA
GPU: float32 decodes 3.9e-4 off a float64 reference on an H200, against 3e-7 at full precision;
``bench/results/gpu/baseline-238d227``). So every ``dot_general`` (``dot``, ``einsum``, ``@``)
in the programs gcc_jax builds must state ``Precision.HIGHEST``, either itself or through
``jax.default_matmul_precision("highest")`` around it: both are recorded in the traced program,
which is what these tests read, on the CPU (the precision a program asks for does not depend on
the backend it is traced for).

For every code of the contract list (``tests/helpers.py``), plus a spline code large enough for
the downdate decoder and one with the parallel-in-time solver, in float32 (JAX's default, x64
off): ``encode_with_status``, ``decode_batch_with_status`` on 32 masks, ``gcc.mask_losses``,
``gcc.tuning.expected_loss`` (and its gradient, for the spline codes' tuning parameters) are
traced and every nested jaxpr is walked; the mask evaluator is checked in what it compiles
(``gcc.monte_carlo_loss``, whose blocks run through ``gcc.MaskEvaluator``): every program XLA is
given during the call is dumped as StableHLO (JAX's ``jax_dump_ir_to``) and read. A failure
names each offending multiplication with gcc_jax's innermost source line that issued it.
Products of integer or boolean operands are exempt (no precision to lose).
"""

import pathlib
import re

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import ALL_CODES, CodeCase, random_mask

import gcc_jax as gcc

#: primitives that carry a ``precision`` parameter for their float multiplications
PRODUCTS = ("dot_general", "conv_general_dilated")
#: explicit dot algorithms with full-precision inputs (``precision=DotAlgorithmPreset...``)
FULL_ALGORITHMS = ("F32_F32_F32", "F64_F64_F64")
#: the products checked are those whose innermost source line (outside installed packages) is in
#: a file under this folder
LIBRARY = "/gcc_jax/"
NUM_MASKS = 32  # the spline's downdate decoder needs at least 32 masks of one straggler count


# -- the jaxpr walker --------------------------------------------------------------------------


def _full_precision(precision) -> bool:
    """Whether a ``precision`` parameter asks for full precision on both operands."""
    if precision is None:
        return False
    parts = precision if isinstance(precision, tuple | list) else (precision,)
    for p in parts:
        if p == jax.lax.Precision.HIGHEST:
            continue
        if getattr(p, "name", None) in FULL_ALGORITHMS:
            continue
        return False
    return True


def _sub_jaxprs(params: dict):
    """The jaxprs nested in an equation's parameters (pjit, scan, while, cond branches,
    custom_jvp/vjp calls, closed_call, shard_map, remat, …)."""
    for value in params.values():
        yield from _jaxprs_in(value)


def _jaxprs_in(value):
    if isinstance(value, jax.extend.core.ClosedJaxpr):
        yield value.jaxpr
    elif isinstance(value, jax.extend.core.Jaxpr):
        yield value
    elif isinstance(value, tuple | list):
        for item in value:
            yield from _jaxprs_in(item)


def _owner(frames: list[tuple[str, int, str]], library: str) -> tuple[str, int, str] | None:
    """The frame that issued a product, if it is ``library``'s: the innermost frame outside
    installed packages and the standard library (JAX, Flax, jaxtyping, …), when its file is
    under ``library``. A product issued by a caller's function (a worker function ``f``, a
    parity model: tests/helpers.py) is the caller's to set, not the library's."""
    for file, line, fn in frames:  # innermost first
        if library in file:
            return file, line, fn
        if re.search(r"/(site|dist)-packages/|/lib/python3[.\d]*/|^<", file):
            continue
        return None
    return None


def _frames(eqn) -> list[tuple[str, int, str]]:
    traceback = getattr(eqn.source_info, "traceback", None)
    if traceback is None:
        return []
    return [(f.file_name.replace("\\", "/"), f.line_num, f.function_name) for f in traceback.frames]


def _short(file: str, library: str) -> str:
    """``file`` from the library's top folder on (``gcc_jax/spline/_kernel.py``)."""
    if library.endswith("/"):
        return library.strip("/") + "/" + file.rsplit(library, 1)[1]
    return file.rsplit("/", 1)[-1]


def low_precision_products(jaxpr, library: str = LIBRARY) -> list[str]:
    """Every float product that ``library`` issued in ``jaxpr`` (a ``ClosedJaxpr``/``Jaxpr``) and
    the jaxprs nested in it whose precision is below HIGHEST, with its source line; one entry
    per equation (an equation met again through a shared sub-jaxpr counts once)."""
    found: dict[int, str] = {}
    seen: set[int] = set()
    stack = list(_jaxprs_in(jaxpr))
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        for eqn in current.eqns:
            stack.extend(_sub_jaxprs(eqn.params))
            if eqn.primitive.name not in PRODUCTS:
                continue
            dtypes = [getattr(v.aval, "dtype", None) for v in eqn.invars[:2]]
            if not any(d is not None and jnp.issubdtype(d, jnp.inexact) for d in dtypes):
                continue
            precision = eqn.params.get("precision")
            owner = _owner(_frames(eqn), library)
            if owner is not None and not _full_precision(precision):
                names = ", ".join(str(d) for d in dtypes)
                file, line, fn = owner
                found[id(eqn)] = (
                    f"{eqn.primitive.name}({names}) precision={precision}: "
                    f"{_short(file, library)}:{line} ({fn}) [{eqn.source_info.name_stack}]"
                )
    return sorted(set(found.values()))


# -- the StableHLO reader (what the evaluator compiles) ----------------------------------------

_OP = re.compile(r"stablehlo\.(dot_general|dot|convolution)\b(.*)$")
_LOC_DEF = re.compile(r"^(#loc\d*) = loc\((.*)\)\s*$")
_LOC_REF = re.compile(r"#loc\d*")
_FILE_LOC = re.compile(r'"([^"]+\.py)":(\d+)')
_ELEMENT = re.compile(r"tensor<(?:[0-9?]+x)*([a-z]+\d*)>")


def _source_of(loc: str, defs: dict[str, str], depth: int = 0) -> list[tuple[str, int, str]]:
    """``(file, line, "")`` frames reachable from a location, innermost first (callee before
    caller)."""
    if depth > 64:
        return []
    out = [(f, int(line), "") for f, line in _FILE_LOC.findall(loc)]
    for ref in _LOC_REF.findall(loc):
        if ref in defs:
            out += _source_of(defs[ref], defs, depth + 1)
    return out


def low_precision_ops(module_text: str, library: str = LIBRARY) -> list[str]:
    """Every float ``dot_general``/``dot``/``convolution`` that ``library`` issued in a StableHLO
    module (text, with its locations) and that does not ask for ``precision = [HIGHEST,
    HIGHEST]``, with its source line."""
    lines = module_text.splitlines()
    defs = {}
    for line in lines:
        m = _LOC_DEF.match(line.strip())
        if m:
            defs[m.group(1)] = m.group(2)
    bad = []
    for line in lines:
        m = _OP.search(line)
        if not m:
            continue
        rest = m.group(2)
        signature = rest.rsplit(" : ", 1)[-1]
        elements = _ELEMENT.findall(signature.split("->")[0])
        if elements and not any(e.startswith(("f", "bf", "complex")) for e in elements):
            continue  # an integer or boolean product
        if "precision = [HIGHEST, HIGHEST]" in rest:
            continue
        precision = re.search(r"precision = \[[A-Z, ]*\]", rest)
        loc = rest.rsplit("loc(", 1)[-1] if "loc(" in rest else ""
        owner = _owner(_source_of(loc, defs), library)
        if owner is None:
            continue
        name = re.findall(r'"([^"]*)"', defs.get(loc.strip(") "), "")) or [""]
        bad.append(
            f"{m.group(1)}({', '.join(elements)}) "
            f"{precision.group(0) if precision else 'no precision'}: "
            f"{_short(owner[0], library)}:{owner[1]} [{name[0]}]"
        )
    return bad


class CompiledPrograms:
    """Every program XLA compiles inside the ``with`` block, as StableHLO text (file → text).

    JAX's own caches are cleared first, so programs compiled earlier in this process are
    compiled (and dumped) again. Source locations (up to 40 frames) are attached meanwhile.
    """

    def __init__(self, directory):
        self.directory = directory
        self.modules: dict[str, str] = {}

    def __enter__(self):
        self._saved = {
            "jax_dump_ir_to": jax.config.read("jax_dump_ir_to"),
            "jax_dump_ir_modes": jax.config.read("jax_dump_ir_modes"),
            "jax_traceback_in_locations_limit": jax.config.jax_traceback_in_locations_limit,
        }
        jax.clear_caches()
        jax.config.update("jax_dump_ir_to", str(self.directory))
        jax.config.update("jax_dump_ir_modes", "stablehlo")
        jax.config.update("jax_traceback_in_locations_limit", 40)
        return self

    def __exit__(self, *exc):
        for name, value in self._saved.items():
            jax.config.update(name, value)
        jax.clear_caches()  # later tests compile without locations again
        self.modules = {p.name: p.read_text() for p in sorted(self.directory.glob("*.mlir"))}
        return False

    def low_precision_ops(self, library: str = LIBRARY) -> list[str]:
        return sorted(
            {
                f"{op} (in {name})"
                for name, text in self.modules.items()
                for op in low_precision_ops(text, library)
            }
        )


# -- the programs of every code ----------------------------------------------------------------


def _spline_case(name: str, num_workers: int, solver: str, max_stragglers: int) -> CodeCase:
    return CodeCase(
        name=name,
        build=lambda: gcc.SplineCode.chebyshev(
            num_inputs=4, num_workers=num_workers, lam_dec=1e-6, solver=solver
        ),
        f=ALL_CODES[0].f,
        x=ALL_CODES[0].x,
        max_stragglers=max_stragglers,
        undecodable=np.zeros(num_workers, bool),
        flag=gcc.Status.TOO_FEW_LIVE,
        tol_all_live=0.05,
    )


CASES = [
    *ALL_CODES,
    # N = 64, 32 masks of S = 6: the rank-S downdate decoder of the spline (64 <= N <= 1024)
    _spline_case("spline-downdate", 64, "kalman", 6),
    _spline_case("spline-parallel", 10, "parallel", 4),
]
SPLINES = ("spline-kalman", "spline-kernel", "spline-downdate", "spline-parallel")


def _float32_setup(case: CodeCase):
    """The code, inputs, worker outputs, targets and 32 masks of one straggler count, in float32
    (built with x64 off: every float is JAX's default float32)."""
    code = case.build()
    x = jnp.asarray(case.x)
    yt = code.worker_outputs(case.f, x)
    fx = jax.vmap(case.f)(x)
    rng = np.random.default_rng(0)
    masks = jnp.asarray(
        np.stack(
            [random_mask(rng, code.num_workers, case.max_stragglers) for _ in range(NUM_MASKS)]
        )
    )
    return code, x, yt, fx, masks


def _programs(case: CodeCase):
    """``{name: jaxpr}`` of the float32 programs of ``case``'s code."""
    code, x, yt, fx, masks = _float32_setup(case)
    assert yt.dtype == jnp.float32, yt.dtype
    out = {
        "encode_with_status": jax.make_jaxpr(lambda c, x: c.encode_with_status(x))(code, x),
        "decode_batch_with_status": jax.make_jaxpr(
            lambda c, y, m: c.decode_batch_with_status(y, m)
        )(code, yt, masks),
        "mask_losses": jax.make_jaxpr(gcc.mask_losses)(code, yt, fx, masks),
        # expected_loss takes concrete masks (it checks them on the host)
        "expected_loss": jax.make_jaxpr(lambda c, x: gcc.tuning.expected_loss(c, case.f, x, masks))(
            code, x
        ),
    }
    if case.name in SPLINES:
        params = gcc.tuning.params_from_code(code)
        out["grad(expected_loss)"] = jax.make_jaxpr(
            jax.grad(lambda p, x: gcc.tuning.expected_loss(p, case.f, x, masks))
        )(params, x)
    return out


@pytest.mark.filterwarnings("ignore:Explicitly requested dtype float64:UserWarning")
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_traced_programs_multiply_at_full_precision(case):
    with jax.enable_x64(False):
        programs = _programs(case)
    report = [
        f"{name}: {op}" for name, jaxpr in programs.items() for op in low_precision_products(jaxpr)
    ]
    assert not report, (
        f"{case.name}: {len(report)} float products below Precision.HIGHEST (STYLE 26):\n  "
        + "\n  ".join(report)
    )


#: the codes whose evaluator blocks differ: the spline's own chunk decoders (Kalman pass,
#: downdate, kernel, parallel), the robust decoder and the default path (``lax.map`` over
#: ``decode_batch_with_status``, whose products the traced test reads for every code)
#: ``make test`` compiles two of them (the kernel decoder's chunks and the default path); the
#: others are marked slow (`make test-integration`)
EVALUATED = [
    c if c.name in ("spline-kernel", "berrut") else pytest.param(c, marks=pytest.mark.slow)
    for c in CASES
    if c.name in (*SPLINES, "robust-tukey", "berrut")
]


@pytest.mark.filterwarnings("ignore:Explicitly requested dtype float64:UserWarning")
@pytest.mark.parametrize("case", EVALUATED, ids=lambda c: getattr(c, "name", None))
def test_evaluator_compiles_full_precision(case, tmp_path):
    """``monte_carlo_loss`` (encode, worker outputs, the evaluator's blocks, the decode plan):
    every program it compiles asks for HIGHEST in every float product."""
    with jax.enable_x64(False):
        code, x, _, _, masks = _float32_setup(case)
        with CompiledPrograms(tmp_path) as compiled:
            gcc.monte_carlo_loss(code, case.f, x, np.asarray(masks), return_status=True)
    assert compiled.modules, "nothing was compiled: the dump of compiled programs is not working"
    bad = compiled.low_precision_ops()
    assert not bad, (
        f"{case.name}: {len(bad)} float products below HIGHEST in what monte_carlo_loss "
        "compiles (STYLE 26):\n  " + "\n  ".join(bad)
    )


# -- the checks can fail -----------------------------------------------------------------------

HERE = "/tests/test_precision.py"  # the "library" of the planted products


def _planted(precision):
    """A float product buried in jit → custom_jvp → cond → scan, at ``precision``."""

    @jax.custom_jvp
    def inner(a, b):
        def body(c, _):
            return jnp.dot(c, b, precision=precision), None  # PLANTED_LINE

        return jax.lax.cond(
            a[0, 0] > 0, lambda: jax.lax.scan(body, a, None, length=2)[0], lambda: a
        )

    inner.defjvp(lambda p, t: (inner(*p), t[0]))
    return jax.jit(lambda a, b: inner(a, b) + jnp.ones(()))


PLANTED_LINE = next(
    i
    for i, line in enumerate(pathlib.Path(__file__).read_text("utf-8").splitlines(), 1)
    if line.endswith("# PLANTED_LINE")
)


def test_walker_finds_a_buried_default_precision_product():
    a = jnp.ones((3, 3), jnp.float32)

    def found(precision, operands=(a, a), library=HERE):
        return low_precision_products(jax.make_jaxpr(_planted(precision))(*operands), library)

    planted = found(None)
    assert len(planted) == 1 and "dot_general" in planted[0] and "precision=None" in planted[0]
    assert f"test_precision.py:{PLANTED_LINE}" in planted[0], planted
    assert found(None, library=LIBRARY) == []  # not gcc_jax's: a caller's function
    assert len(found("default")) == 1 and len(found("high")) == 1
    assert found("highest") == []
    with jax.default_matmul_precision("highest"):  # the context is recorded in the jaxpr
        assert found(None) == []
    ints = jnp.ones((3, 3), jnp.int32)  # integer products are exempt
    assert found(None, (ints, ints)) == []


def test_compiled_reader_finds_a_buried_default_precision_product(tmp_path):
    a = jnp.ones((3, 3), jnp.float32)
    with CompiledPrograms(tmp_path / "default") as default:
        jax.block_until_ready(_planted(None)(a, a))
    with CompiledPrograms(tmp_path / "highest") as highest:
        jax.block_until_ready(_planted("highest")(a, a))
    found = default.low_precision_ops(HERE)
    assert len(found) == 1 and "dot_general(f32, f32)" in found[0], found
    assert f"test_precision.py:{PLANTED_LINE}" in found[0], found  # from the module's locations
    assert default.low_precision_ops() == []  # not gcc_jax's
    assert highest.modules and highest.low_precision_ops(HERE) == []
