"""The fuzz campaign's case families, re-run: every code, both dtypes, eager and jit; splines,
weights, λ, query points and degrees of freedom; the end-to-end API; the service.

Each case is a call with its expected kind of answer, classified as one of

* ``clear error``: a ``TypeError``/``ValueError`` (``GCCValueError`` included) whose message
  names the argument at fault in backquotes;
* ``status flag``: a returned status that is not OK (a ``*_with_status`` form, ``Decoded``,
  ``Spline.status``, an ``Answer``'s error), or a warning of the service's;
* ``correct``: a value within tolerance of its reference (the same call with the problem
  removed: clean straggler rows, λ as a Python float, float64, eager);
* ``silent wrong``, ``unflagged NaN``, ``unclear error`` (any other exception, or an error that
  does not name the argument): the defects.

Usage: ``python bench/fuzz.py [--families codes,splines,api,service,robust] [--json out.json]``.
Prints a table per family and a total; exits 1 if any case is a defect.
"""

import argparse
import collections
import json
import os
import sys
import time
import warnings

os.environ.setdefault("JAX_PLATFORMS", "cpu")

OUTCOMES = (
    "clear error",
    "status flag",
    "correct",
    "silent wrong",
    "unflagged NaN",
    "unclear error",
)
DEFECTS = ("silent wrong", "unflagged NaN", "unclear error")
FAMILIES = ("codes", "splines", "api", "service", "robust")


class Case:
    """One fuzz case: ``call()`` and how to judge what it returns.

    ``names``: the arguments a clear error may name. ``status(result)`` → the status (or
    ``None``: no status to read). ``value(result)`` → the value; ``ref`` the reference value
    (``None``: any finite value is correct).
    """

    def __init__(self, family, label, call, names, *, status=None, value=None, ref=None, tol=1e-6):
        self.family, self.label, self.call, self.names = family, label, call, names
        self.status, self.value, self.ref, self.tol = status, value, ref, tol


def classify(case: Case) -> tuple[str, str]:
    import numpy as np

    import gcc_jax as gcc
    from gcc_jax.distributed import UncheckedResultsWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = case.call()
        except (TypeError, ValueError) as err:
            msg = str(err)
            named = any(f"`{n}`" in msg for n in case.names)
            return ("clear error" if named else "unclear error"), f"{type(err).__name__}: {msg}"
        except Exception as err:  # noqa: BLE001 - any other exception is a defect
            return "unclear error", f"{type(err).__name__}: {err}"
    if any(issubclass(w.category, UncheckedResultsWarning) for w in caught):
        return "status flag", "UncheckedResultsWarning"
    if case.status is not None:
        status = case.status(result)
        if status is not None and int(np.max(np.asarray(status))) != 0:
            return "status flag", gcc.describe_status(int(np.max(np.asarray(status))))
    value = case.value(result) if case.value is not None else result
    arr = np.asarray(value, dtype=float)
    if not np.all(np.isfinite(arr)):
        return "unflagged NaN", f"{np.sum(~np.isfinite(arr))} non-finite entries, status 0"
    if case.ref is not None:
        ref = np.asarray(case.ref() if callable(case.ref) else case.ref, dtype=float)
        err = float(np.max(np.abs(arr - ref))) if arr.size else 0.0
        scale = max(1.0, float(np.max(np.abs(ref)))) if ref.size else 1.0
        if arr.shape != ref.shape or err > case.tol * scale:
            return "silent wrong", f"max error {err:.3g} (shape {arr.shape} vs {ref.shape})"
    return "correct", ""


# -- families ------------------------------------------------------------------------------------


def _codes():
    """The codes of the campaign, small, float64 leaves; each with f and inputs."""
    import jax.numpy as jnp
    import numpy as np

    import gcc_jax as gcc
    from gcc_jax.codes import GroupedParityCode

    rng = np.random.default_rng(20261204)
    x = rng.uniform(-0.9, 0.9, size=(4, 3))
    w = rng.normal(size=(2, 3))

    def smooth(v):
        return jnp.stack([jnp.sin(v[0]) + v[1] * v[2], jnp.cos(v[1]) - 0.5 * v[2]])

    def quad(v):
        return jnp.stack([v[0] * v[1] + 1.0, v[2] ** 2 - v[0]])

    def lin(v):
        return jnp.asarray(w, v.dtype) @ v

    def matvec(p, v):
        return p @ v

    return {
        "SplineCode": (gcc.SplineCode.chebyshev(num_inputs=4, num_workers=10, lam_dec=1e-6),
                       smooth, x),
        "BerrutCode": (gcc.BerrutCode.chebyshev(num_inputs=4, num_workers=9), smooth, x),
        "LagrangeCode": (gcc.LagrangeCode.chebyshev(num_inputs=3, num_workers=8, degree=2),
                         quad, x[:3]),
        "UncodedCode": (gcc.UncodedCode(num_inputs=4), smooth, x),
        "ReplicationCode": (gcc.ReplicationCode(num_inputs=3, num_workers=6), smooth, x[:3]),
        "ParityModelCode": (gcc.ParityModelCode(jnp.asarray(w), matvec, num_inputs=3), lin,
                            x[:3]),
        "GroupedParityCode": (GroupedParityCode(gcc.ParityModelCode(jnp.asarray(w), matvec,
                                                                    num_inputs=2), groups=2),
                              lin, x),
        "LearnedCode": (gcc.LearnedCode.init(key=0, num_inputs=2, input_shape=(3,),
                                             output_size=2, decoder_hidden=(8,),
                                             dtype=jnp.float64), lin, x[:2]),
        "RobustSplineCode": (gcc.RobustSplineCode.chebyshev(num_inputs=4, num_workers=10,
                                                            lam_dec=1e-4, loss="tukey", trim=1),
                             smooth, x),
        "ApproxIFERCode": (gcc.ApproxIFERCode.chebyshev(num_inputs=3, num_workers=12,
                                                        num_adversaries=1), smooth, x[:3]),
        "LagrangeECCode": (gcc.LagrangeECCode.chebyshev(num_inputs=3, num_workers=10, degree=2,
                                                        num_adversaries=1), quad, x[:3]),
    }  # fmt: skip


def family_codes():
    import jax
    import jax.numpy as jnp
    import numpy as np

    dec_jit = jax.jit(lambda c, y, m: c.decode_with_status(y, m))
    enc_jit = jax.jit(lambda c, x: c.encode_with_status(x))
    status = lambda out: out.status  # noqa: E731
    value = lambda out: out.value  # noqa: E731
    cases = []
    for name, (code, f, x) in _codes().items():
        n = code.num_workers
        y64 = np.asarray(code.worker_outputs(f, jnp.asarray(x)), float)
        full = np.ones(n, bool)
        one_dead = full.copy()
        one_dead[n // 2] = False
        for dtype in (np.float32, np.float64):
            tol = 1e-4 if dtype == np.float32 else 1e-9
            for mode in ("eager", "jit"):
                dec = code.decode_with_status if mode == "eager" else (
                    lambda y, m, c=code: dec_jit(c, y, m))  # fmt: skip
                enc = code.encode if mode == "eager" else (
                    lambda x, c=code: enc_jit(c, x))  # fmt: skip
                enc_status = None if mode == "eager" else status
                enc_value = None if mode == "eager" else value
                y = y64.astype(dtype)
                ref_full = np.asarray(code.decode_with_status(y64, full).value)
                ref_dead = np.asarray(code.decode_with_status(y64, one_dead).value)
                tag = f"{name} {np.dtype(dtype).name} {mode}"

                def add(label, call, names, **kw):
                    cases.append(Case("codes", f"{tag}: {label}", call, names, **kw))

                add(
                    "decode, all live",
                    lambda d=dec, y=y, m=full: d(y, m),
                    ("y",),
                    status=status,
                    value=value,
                    ref=ref_full,
                    tol=tol,
                )
                for fill in (np.nan, np.inf, -np.inf, float(np.finfo(dtype).max)):
                    bad = y.copy()
                    bad[n // 2] = fill
                    add(
                        f"decode, straggler returns {fill}",
                        lambda d=dec, b=bad, m=one_dead: d(b, m),
                        ("y",),
                        status=status,
                        value=value,
                        ref=ref_dead,
                        tol=tol,
                    )
                    if np.isfinite(fill):
                        continue  # a live worker's finite lie: the robust family's and the
                        # service's business (max_liars), not a value problem
                    add(
                        f"decode, live worker returns {fill}",
                        lambda d=dec, b=bad, m=full: d(b, m),
                        ("y",),
                        status=status,
                        value=value,
                        ref=ref_full,
                        tol=tol,
                    )
                # fill-value codes (uncoded, replication, grouped ParM) answer with their fill
                # rule and status OK, marking the inputs unavailable: any finite value
                add(
                    "decode, every worker dead",
                    lambda d=dec, y=y, n=n: d(y, np.zeros(n, bool)),
                    ("mask",),
                    status=status,
                    value=value,
                )
                add(
                    "decode, integer mask",
                    lambda d=dec, y=y, m=full: d(y, m.astype(int)),
                    ("mask",),
                )
                add(
                    "decode, mask of n+1",
                    lambda d=dec, y=y, n=n: d(y, np.ones(n + 1, bool)),
                    ("mask",),
                )
                add("decode, y of n-1 rows", lambda d=dec, y=y, m=full: d(y[:-1], m), ("y",))
                add("decode, complex y", lambda d=dec, y=y, m=full: d(y.astype(complex), m), ("y",))
                xb = np.asarray(x, dtype).copy()
                xb[0, 0] = np.nan
                add(
                    "encode, NaN in x",
                    lambda e=enc, xb=xb: e(xb),
                    ("x",),
                    status=enc_status,
                    value=enc_value,
                )
                add(
                    "encode, x of k+1 rows",
                    lambda e=enc, x=x: e(np.zeros((len(x) + 1, 3), dtype)),
                    ("x",),
                )
                add("encode, complex x", lambda e=enc, x=x: e(np.asarray(x, complex)), ("x",))
    return cases


def family_splines():
    import jax
    import jax.numpy as jnp
    import numpy as np

    import gcc_jax as gcc

    t = np.linspace(-1, 1, 8)
    y = np.sin(3 * t)
    beta = gcc.chebyshev_nodes(16, kind=2)
    ref = gcc.fit_smoothing_spline(t, y, 1e-3)
    vals = lambda s: s.values  # noqa: E731
    st = lambda s: s.status  # noqa: E731
    cases = []

    def add(label, call, names, **kw):
        cases.append(Case("splines", label, call, names, **kw))

    for lam in (None, "0.1", 1j, [1e-3], True, object()):
        add(f"fit, lam={lam!r}", lambda lam=lam: gcc.fit_smoothing_spline(t, y, lam), ("lam",))
    for lam in (-1.0, np.nan, np.inf):
        add(f"fit, lam={lam}", lambda lam=lam: gcc.fit_smoothing_spline(t, y, lam), ("lam",))
        add(f"fit under jit, lam={lam}",
            lambda lam=lam: jax.jit(gcc.fit_smoothing_spline_with_status)(t, y, lam),
            ("lam",), status=st, value=vals)  # fmt: skip
    for lam in (np.float32(1e-3), np.array(1e-3), jnp.asarray(1e-3), 0):
        add(
            f"fit, lam of type {type(lam).__name__}",
            lambda lam=lam: gcc.fit_smoothing_spline(t, y, lam),
            ("lam",),
            status=st,
            value=vals,
            ref=lambda lam=lam: gcc.fit_smoothing_spline(t, y, float(lam)).values,
        )
    for w, label in ((-np.ones(8), "negative"), (np.full(8, np.nan), "NaN"), (np.ones(7), "7")):
        add(
            f"fit, {label} weights",
            lambda w=w: gcc.fit_smoothing_spline(t, y, 1e-3, weights=w),
            ("weights",),
        )
        add(f"fit under jit, {label} weights",
            lambda w=w: jax.jit(gcc.fit_smoothing_spline_with_status)(t, y, 1e-3, weights=w),
            ("weights",), status=st, value=vals)  # fmt: skip
    add("fit, unsorted t", lambda: gcc.fit_smoothing_spline(t[::-1], y, 1e-3), ("t",))
    add("fit, duplicate t", lambda: gcc.fit_smoothing_spline(np.r_[t[:1], t[:-1]], y, 1e-3),
        ("t",))  # fmt: skip
    add("fit under jit, unsorted t",
        lambda: jax.jit(gcc.fit_smoothing_spline_with_status)(t[::-1], y, 1e-3), ("t",),
        status=st, value=vals)  # fmt: skip
    ynan = y.copy()
    ynan[3] = np.nan
    dead = np.ones(8, bool)
    dead[3] = False
    add("fit, NaN at a dead point", lambda: gcc.fit_smoothing_spline(t, ynan, 1e-3, dead),
        ("y",), status=st, value=vals,
        ref=lambda: gcc.fit_smoothing_spline(t, y, 1e-3, dead).values)  # fmt: skip
    add("fit, NaN at a live point", lambda: gcc.fit_smoothing_spline(t, ynan, 1e-3), ("y",))
    add("fit, 1 live point", lambda: gcc.fit_smoothing_spline(t, y, 1e-3, np.arange(8) < 1),
        ("mask",))  # fmt: skip
    add("fit, y of 7 rows", lambda: gcc.fit_smoothing_spline(t, y[:7], 1e-3), ("y",))
    add("fit, complex y", lambda: gcc.fit_smoothing_spline(t, y + 0j, 1e-3), ("y",))
    add("fit, integer mask", lambda: gcc.fit_smoothing_spline(t, y, 1e-3, np.ones(8, int)),
        ("mask",))  # fmt: skip
    for tq in ([np.nan, 0.0], [np.inf], np.zeros((2, 2)), [1j]):
        add(f"spline(tq={tq!r})", lambda tq=tq: ref(np.asarray(tq)), ("tq",))
        add(f"spline.evaluate_with_status(tq={tq!r}) under jit",
            lambda tq=tq: jax.jit(lambda s, q: s.evaluate_with_status(q))(ref, np.asarray(tq)),
            ("tq",), status=lambda out: out[1], value=lambda out: out[0])  # fmt: skip
    add(
        "spline(tq), finite",
        lambda: ref(np.array([-2.0, 0.3, 2.0])),
        ("tq",),
        ref=np.asarray(gcc.smoother_matrix(t, np.array([-2.0, 0.3, 2.0]), 1e-3) @ y),
    )
    add("smoother_matrix, NaN tq", lambda: gcc.smoother_matrix(t, np.array([np.nan]), 1e-3),
        ("tq",))  # fmt: skip
    dof_st = lambda out: out[1]  # noqa: E731
    dof_val = lambda out: out[0]  # noqa: E731
    for dof in (1.0, 2.0, 16.5, np.nan, np.inf):
        add(f"lam_from_dof, dof={dof}", lambda dof=dof: gcc.lam_from_dof(beta, dof), ("dof",))
        add(f"lam_from_dof under jit, dof={dof}",
            lambda dof=dof: jax.jit(gcc.lam_from_dof_with_status)(beta, dof), ("dof",),
            status=dof_st, value=dof_val)  # fmt: skip
    add("lam_from_dof under jit, dof=12",
        lambda: jax.jit(gcc.lam_from_dof_with_status)(beta, 12.0), ("dof",), status=dof_st,
        value=dof_val, ref=lambda: gcc.lam_from_dof(beta, 12.0))  # fmt: skip
    add("effective_dof, dead mask", lambda: gcc.effective_dof(beta, 1e-3, np.zeros(16, bool)),
        ("mask",))  # fmt: skip
    for lam in (-1.0, np.nan):
        add(f"effective_dof, lam={lam}", lambda lam=lam: gcc.effective_dof(beta, lam), ("lam",))
        add(f"effective_dof under jit, lam={lam}",
            lambda lam=lam: jax.jit(gcc.effective_dof_with_status)(beta, lam), ("lam",),
            status=dof_st, value=dof_val)  # fmt: skip
    add("effective_dof under jit, dead mask",
        lambda: jax.jit(gcc.effective_dof_with_status)(beta, 1e-3, jnp.zeros(16, bool)),
        ("mask",), status=dof_st, value=dof_val)  # fmt: skip
    add("effective_dof, lam=None", lambda: gcc.effective_dof(beta, None), ("lam",))
    return cases


def family_api():
    import jax
    import jax.numpy as jnp
    import numpy as np

    import gcc_jax as gcc

    code = gcc.SplineCode.chebyshev(num_inputs=3, num_workers=8)
    x = jnp.linspace(-1.0, 1.0, 3)[:, None]
    masks = gcc.sample_masks(jax.random.key(0), 8, num=4, stragglers=2)
    nan_f = lambda v: v * jnp.nan  # noqa: E731
    jit_loss = jax.jit(gcc.expected_loss_with_status, static_argnums=1)
    pair = dict(status=lambda out: out[1], value=lambda out: out[0])
    cases = []

    def add(label, call, names, **kw):
        cases.append(Case("api", label, call, names, **kw))

    add("expected_loss(None, ...)", lambda: gcc.expected_loss(None, jnp.sin, x, masks),
        ("params",))  # fmt: skip
    add(
        "expected_loss, all-dead masks",
        lambda: gcc.expected_loss(code, jnp.sin, x, np.zeros((4, 8), bool)),
        ("masks",),
    )
    add("expected_loss, NaN f", lambda: gcc.expected_loss(code, nan_f, x, masks), ("f",))
    add(
        "expected_loss under jit, all-dead masks",
        lambda: jit_loss(code, jnp.sin, x, jnp.zeros((4, 8), bool)),
        ("masks",),
        **pair,
    )
    add("expected_loss under jit, NaN f", lambda: jit_loss(code, nan_f, x, masks), ("f",),
        **pair)  # fmt: skip
    add(
        "expected_loss under jit",
        lambda: jit_loss(code, jnp.sin, x, masks),
        ("masks",),
        ref=lambda: gcc.expected_loss(code, jnp.sin, x, masks),
        tol=1e-9,
        **pair,
    )
    add(
        "monte_carlo_loss, integer masks",
        lambda: gcc.monte_carlo_loss(code, jnp.sin, x, np.ones((4, 8), int)),
        ("masks",),
    )
    add(
        "monte_carlo_loss, NaN in x",
        lambda: gcc.monte_carlo_loss(code, jnp.sin, x.at[0, 0].set(jnp.nan), masks),
        ("x",),
    )
    add(
        "coded_apply, not a code",
        lambda: gcc.coded_apply("gcc", jnp.sin, x, np.ones(8, bool)),
        ("code",),
    )
    add(
        "sample_masks, stragglers > N",
        lambda: gcc.sample_masks(jax.random.key(0), 8, num=4, stragglers=9),
        ("stragglers",),
    )
    add("sample_masks, p = 1.5", lambda: gcc.sample_masks(jax.random.key(0), 8, num=4, p=1.5),
        ("p",))  # fmt: skip
    add(
        "SplineCode.chebyshev(num_workers=1)",
        lambda: gcc.SplineCode.chebyshev(num_inputs=3, num_workers=1),
        ("num_workers",),
    )
    add("SplineCode(lam_dec=1+1j)",
        lambda: gcc.SplineCode.chebyshev(num_inputs=3, num_workers=8, lam_dec=1 + 1j),
        ("lam_dec",))  # fmt: skip
    return cases


def family_service():
    import jax.numpy as jnp
    import numpy as np

    import gcc_jax as gcc
    from gcc_jax.distributed import CodedInferenceService, Fault, LocalExecutor

    def f(v):
        return jnp.tanh(v[:2])

    code = gcc.SplineCode.chebyshev(num_inputs=2, num_workers=6)
    cases = []

    def add(label, call, names, **kw):
        cases.append(Case("service", label, call, names, **kw))

    answer_status = lambda a: 0 if a.ok else 1  # noqa: E731 - an Answer's error is its flag
    answer_value = lambda a: a.value  # noqa: E731

    def submit(query):
        ex = LocalExecutor(f, num_workers=6)
        with CodedInferenceService(ex, code, stragglers=1, input_shape=(3,),
                                   on_liars="ignore") as svc:  # fmt: skip
            return svc.submit(query).result(timeout=60)

    for label, q in (
        ("complex query", np.array([1 + 1j, 0, 0])),
        ("NaN query", np.array([np.nan, 0, 0])),
        ("query of shape (2,)", np.zeros(2)),
        ("string query", np.array(["a", "b", "c"])),
        ("boolean query", np.ones(3, bool)),
    ):
        add(label, lambda q=q: submit(q), ("x",), status=answer_status, value=answer_value)
    q = np.array([0.3, -0.2, 0.1])
    add("a good query", lambda: submit(q), ("x",), status=answer_status, value=answer_value,
        ref=np.asarray(gcc.coded_apply(code, f, np.stack([q, q]), np.r_[True, True, True,
                                                                       True, True, False]))[0],
        tol=0.05)  # fmt: skip
    ex = LocalExecutor(f, num_workers=6, faults=[Fault(2, "garbage")])
    add(
        "plain SplineCode, a garbage worker, no validate",
        lambda: CodedInferenceService(ex, code, stragglers=1).close(),
        ("validate",),
    )
    add("not an executor", lambda: CodedInferenceService(object(), code), ("executor",))
    add("on_liars='maybe'", lambda: CodedInferenceService(ex, code, on_liars="maybe"),
        ("on_liars",))  # fmt: skip
    return cases


def family_robust():
    import jax
    import jax.numpy as jnp
    import numpy as np

    import gcc_jax as gcc

    cases = []

    def add(label, call, names, **kw):
        cases.append(Case("robust", label, call, names, **kw))

    alpha, beta = gcc.chebyshev_nodes(3, kind=1), gcc.chebyshev_nodes(12, kind=2)
    add("RobustSplineCode(lam_dec=1+1j)",
        lambda: gcc.RobustSplineCode(alpha=alpha, beta=beta, lam_enc=0.0, lam_dec=1 + 1j),
        ("lam_dec",))  # fmt: skip
    add("RobustSplineCode.chebyshev(tuning=-1)",
        lambda: gcc.RobustSplineCode.chebyshev(num_inputs=3, num_workers=12, tuning=-1.0),
        ("tuning",))  # fmt: skip
    mask = jnp.ones(12, bool)
    for loss in ("huber", "tukey", "trim"):
        code = gcc.RobustSplineCode.chebyshev(num_inputs=3, num_workers=12, lam_dec=1e-4,
                                              loss=loss, trim=2)  # fmt: skip
        for scale in (0.0, 1e-160, 1e180):
            y = jnp.full((12, 4), scale)
            add(f"{loss}: decode of outputs all {scale:g}",
                lambda c=code, y=y: c.decode_with_status(y, mask), ("y",),
                status=lambda out: out.status, value=lambda out: out.value,
                ref=np.full((3, 4), scale), tol=1e-6)  # fmt: skip
            grad = jax.jit(jax.grad(lambda y, c: c.decode_with_status(y, mask).value.sum()))
            add(
                f"{loss}: gradient at outputs all {scale:g}",
                lambda c=code, y=y, g=grad: g(y, c),
                ("y",),
            )
    return cases


# -- main ----------------------------------------------------------------------------------------


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--json", default=None, help="write every case's outcome here")
    parser.add_argument("--show", type=int, default=20, help="defects to list in full")
    args = parser.parse_args(argv)
    import jax

    jax.config.update("jax_enable_x64", True)
    families = [f.strip() for f in args.families.split(",") if f.strip()]
    unknown = set(families) - set(FAMILIES)
    if unknown:
        parser.error(f"unknown families {sorted(unknown)}; choose from {FAMILIES}")
    builders = dict(codes=family_codes, splines=family_splines, api=family_api,
                    service=family_service, robust=family_robust)  # fmt: skip
    t0 = time.perf_counter()
    rows, counts = [], collections.OrderedDict()
    for fam in families:
        counts[fam] = collections.Counter()
        for case in builders[fam]():
            outcome, detail = classify(case)
            counts[fam][outcome] += 1
            rows.append(dict(family=fam, case=case.label, outcome=outcome, detail=detail[:300]))
    total = collections.Counter()
    for c in counts.values():
        total.update(c)
    width = max(len(o) for o in OUTCOMES)
    header = f"{'family':<10}{'cases':>7}" + "".join(f"{o:>{width + 2}}" for o in OUTCOMES)
    print(header)
    print("-" * len(header))
    for fam, c in list(counts.items()) + [("total", total)]:
        line = f"{fam:<10}{sum(c.values()):>7}" + "".join(f"{c[o]:>{width + 2}}" for o in OUTCOMES)
        print(line)
    defects = [r for r in rows if r["outcome"] in DEFECTS]
    print(f"\n{len(rows)} cases in {time.perf_counter() - t0:.0f} s; {len(defects)} defects")
    for r in defects[: args.show]:
        print(f"  [{r['outcome']}] {r['family']}: {r['case']}: {r['detail']}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(dict(counts={k: dict(v) for k, v in counts.items()}, cases=rows), fh,
                      indent=1)  # fmt: skip
    return 1 if defects else 0


if __name__ == "__main__":
    sys.exit(main())
