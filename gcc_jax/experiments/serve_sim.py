"""``gcc-jax serve-sim``: ParM's tail claim tested in a discrete-event model of a serving cluster.

ParM (Kosaian, Rashmi, Venkataraman, SOSP'19) claims its p99.9 − median latency gap is up to
3.5× smaller than that of the *equal-resources* baseline (the ``m/k`` parity instances spent
on more base-model instances) under background load. This experiment asks where, over
utilisation, background intensity and ``k``, that holds in :func:`gcc_jax.distributed.simulate`:
one frontend queue per pool, Poisson arrivals, shifted-exponential work, persistent
background-load episodes that slow an instance for many consecutive queries, and no
cancellation of running work. Every scheme sees the same arrivals, work and episodes for a
seed; each setting runs several seeds, and the gap ratio's 95% CI is Student's over seeds.

Before the map, the model is checked against queueing theory (M/M/1, M/M/c by Erlang C, M/G/1
by Pollaczek-Khinchine): the validation table of the record.

Accuracy: the model records where each answer came from (its own output; or decoded, from
which outputs of its group); each source's accuracy is measured on test queries with the real
decoders (ParM's :class:`gcc_jax.ParityModelCode` with a trained parity model; GCC's
:class:`gcc_jax.SplineCode`; BACC's :class:`gcc_jax.BerrutCode`), and a scheme's accuracy is
the answers' accuracy weighted by their sources; a missed query counts as wrong.

Tails are ranked only among schemes that answered at least 99% of their queries; the others
are listed with their misses.
"""

import functools
import math
import sys
import time
from collections.abc import Sequence

import numpy as np

from ..distributed import Background, ServiceTime, simulate
from ._command import StopOnInterrupt
from ._commands.serve import SCHEMES
from ._io import ExperimentResult, new_figure, save_report

__all__ = ["ANSWERED_MIN", "report", "run", "run_serve_sim", "save", "validation_table"]

PARM_GAP_CLAIM = 3.5
ANSWERED_MIN = 0.99
"""Tails are ranked only among schemes that answered at least this fraction of queries."""

METRICS = {
    "load": "utilisation of the m base instances by quiet work: rate · E[work] / m",
    "fraction": "long-run fraction of time an instance is under background load",
    "p50_ms/p999_ms": "median and 99.9th percentile of arrival → answer (misses at give-up)",
    "gap_ms": "p99.9 − median",
    "gap_ratio": "equal-resources gap / the scheme's gap, per seed; mean and 95% t-CI over seeds",
    "answered": "fraction of queries answered (the rest missed their deadline undecoded)",
    "accuracy": "answers weighted by the test accuracy of their source (own output or the "
    "decoder on the outputs in); a miss is wrong",
    "validation": "model mean latency against queueing theory, with a batch-means 95% CI",
}


def _say(progress: bool, text: str) -> None:
    if progress:
        print(text, file=sys.stderr, flush=True)


def _erlang_c_sojourn(c: int, lam: float, mu: float) -> float:
    a = lam / mu
    head = sum(a**n / math.factorial(n) for n in range(c))
    tail = a**c / (math.factorial(c) * (1.0 - a / c))
    return tail / (head + tail) / (c * mu - lam) + 1.0 / mu


def validation_table(num_queries: int, seed: int = 0) -> list[dict]:
    """The model's mean latency against queueing theory: M/M/1 at ρ = 0.5 and 0.8, M/M/4 at
    ρ = 0.7 (Erlang C), M/G/1 with shifted-exponential work at ρ = 0.6 (Pollaczek-Khinchine).

    Each row: ``system``, ``model_ms``, ``theory_ms``, ``rel_error``, ``ci95_rel`` (a
    batch-means half-width over 50 batches, relative to theory) and ``wall_s``.
    """
    rows = []
    mu = 100.0
    cases = [
        ("M/M/1", 1, 0.5, 0.0, 0.01),
        ("M/M/1", 1, 0.8, 0.0, 0.01),
        ("M/M/4", 4, 0.7, 0.0, 0.01),
    ]
    cases.append(("M/G/1 (4 + 2·Exp ms)", 1, 0.6, 0.004, 0.002))
    for name, c, rho, shift, scale in cases:
        es = shift + scale
        lam = rho * c / es
        t0 = time.perf_counter()
        r = simulate(
            "uncoded",
            instances=c,
            k=1,
            rate=lam,
            num_queries=num_queries,
            service=ServiceTime(shift, scale),
            seed=seed,
        )
        wall = time.perf_counter() - t0
        if shift == 0.0:
            theory = _erlang_c_sojourn(c, lam, mu)
        else:
            es2 = shift**2 + 2 * shift * scale + 2 * scale**2
            theory = es + lam * es2 / (2 * (1 - rho))
        lat = r.latency_s[num_queries // 20 :]
        means = lat[: len(lat) // 50 * 50].reshape(50, -1).mean(axis=1)
        rows.append(
            dict(
                system=f"{name}, rho={rho:g}",
                queries=num_queries,
                model_ms=float(lat.mean() * 1e3),
                theory_ms=theory * 1e3,
                rel_error=float(lat.mean() / theory - 1.0),
                ci95_rel=float(1.96 * means.std(ddof=1) / math.sqrt(50) / theory),
                busy=r.busy_fraction,
                wall_s=wall,
            )
        )
    return rows


def _stats(res) -> dict:
    """One scheme's run: latency percentiles, answers and where they came from."""
    lat = res.latency_s * 1e3
    p50, p999 = np.percentile(lat, [50, 99.9])
    decoded = res.source == 1  # the (outputs in, slot) pattern of each decoded answer
    dk, dc = np.unique((res.mask * 16 + res.slot)[decoded], return_counts=True)
    return dict(
        p50_ms=float(p50),
        p999_ms=float(p999),
        gap_ms=float(p999 - p50),
        mean_ms=float(lat.mean()),
        answered=float(res.answered.mean()),
        missed=int((~res.answered).sum()),
        own=int((res.source == 0).sum()),
        decoded_patterns={int(k): int(c) for k, c in zip(dk, dc, strict=True)},
        busy=res.busy_fraction,
    )


def _ci(values: np.ndarray) -> tuple[float, float, float]:
    """Mean and 95% Student-t interval over seeds."""
    from scipy import stats

    v = np.asarray(values, dtype=float)
    m = float(v.mean())
    if len(v) < 2:
        return m, math.nan, math.nan
    half = float(stats.t.ppf(0.975, len(v) - 1) * v.std(ddof=1) / math.sqrt(len(v)))
    return m, m - half, m + half


def _cell(cfg: dict, k: int, load: float, fraction: float, schemes, seeds) -> dict:
    """Every scheme at one setting over the seeds: per-seed stats and the gap ratios' CIs."""
    service = ServiceTime(cfg["shift_ms"] / 1e3, cfg["scale_ms"] / 1e3, cfg["tail"])
    bg = Background(fraction, cfg["slowdown"], cfg["episode_ms"] / 1e3)
    m = cfg["instances"]
    rate = load * m / service.mean_s
    deadline = None if cfg["deadline_ms"] is None else cfg["deadline_ms"] / 1e3
    runs: dict[str, list] = {s: [] for s in schemes}
    for seed in seeds:
        for s in schemes:
            res = simulate(
                s,
                instances=m,
                k=k,
                rate=rate,
                num_queries=cfg["num_queries"],
                service=service,
                background=bg,
                deadline_s=deadline,
                max_wait_s=cfg["max_wait_ms"] / 1e3,
                seed=seed,
                engine=cfg["engine"],
            )
            runs[s].append(_stats(res))
    cell = dict(k=k, load=load, fraction=fraction, rate=rate, schemes={})
    for s, rows in runs.items():
        summary = {key: float(np.mean([r[key] for r in rows])) for key in
                   ("p50_ms", "p999_ms", "gap_ms", "mean_ms", "answered", "busy")}  # fmt: skip
        summary["missed"] = int(sum(r["missed"] for r in rows))
        summary["own"] = int(sum(r["own"] for r in rows))
        patterns: dict[int, int] = {}
        for r in rows:
            for key, c in r["decoded_patterns"].items():
                patterns[key] = patterns.get(key, 0) + c
        summary["decoded_patterns"] = patterns
        summary["per_seed_gap_ms"] = [r["gap_ms"] for r in rows]
        if "equal" in runs:
            ratio = [e["gap_ms"] / r["gap_ms"] for e, r in zip(runs["equal"], rows, strict=True)]
            summary["gap_ratio"] = dict(
                zip(("mean", "lo", "hi"), _ci(np.array(ratio)), strict=True)
            )
        cell["schemes"][s] = summary
    return cell


def _accuracy_tables(cfg: dict, schemes, seed: int, progress: bool) -> dict:
    """Per ``k``: the base model's test accuracy and, per coded scheme, the accuracy of a
    decoded query for each ``(outputs in, slot)`` pattern (``{mask * 16 + slot: accuracy}``)."""
    import jax
    import jax.numpy as jnp

    from ..codes import BerrutCode, SplineCode
    from .serve import parm_scheme, query_stream

    num = cfg["accuracy_queries"]
    st = query_stream(cfg["model"], cfg["dataset"], cfg["epochs"], cfg.get("data_path"), num, 1.0,
                 seed, progress)  # fmt: skip
    tables: dict = dict(base=float(np.mean(st.base == st.labels)), notes=[])
    for k in cfg["ks"]:
        codes = {}
        if "parm" in schemes:
            code, _, note = parm_scheme(st.tm, st.ds, k, cfg["parm_epochs"], seed, progress)
            codes["parm"] = code
            tables["notes"].append(f"k={k} {note}")
        if "gcc" in schemes:
            codes["gcc"] = SplineCode.chebyshev(num_inputs=k, num_workers=k + 1,
                                                lam_dec=cfg["lam_dec"])  # fmt: skip
        if "bacc" in schemes:
            codes["bacc"] = BerrutCode.chebyshev(num_inputs=k, num_workers=k + 1)
        groups = num // k
        x = jnp.asarray(st.queries[: groups * k].reshape(groups, k, *st.queries.shape[1:]))
        labels = st.labels[: groups * k].reshape(groups, k)
        masks = (np.arange(2 ** (k + 1))[:, None] >> np.arange(k + 1)) & 1
        logits = functools.partial(st.tm.apply, st.tm.params)  # what the parity model fits
        for name, code in codes.items():
            f = logits if name == "parm" else st.f
            y = jax.vmap(lambda xs, c=code, f=f: c.worker_outputs(f, xs))(x)
            dec = jax.vmap(jax.vmap(code.decode_with_status, in_axes=(None, 0)), in_axes=(0, None))
            out = dec(y, jnp.asarray(masks, bool))
            pred = np.asarray(jnp.argmax(out.value, axis=-1))  # (groups, masks, k)
            ok = np.asarray(out.status)[..., None] == 0
            acc = ((pred == labels[:, None, :]) & ok).mean(axis=0)  # (masks, k)
            tables[f"{name}/k={k}"] = {int(mk * 16 + j): float(acc[mk, j])
                                       for mk in range(len(masks)) for j in range(k)}  # fmt: skip
    return tables


def _accuracy(summary: dict, name: str, k: int, tables: dict, total: int) -> float:
    """A scheme's expected accuracy from where its answers came from."""
    if not tables:
        return math.nan
    right = summary["own"] * tables["base"]
    table = tables.get(f"{name}/k={k}", {})
    for key, c in summary["decoded_patterns"].items():
        right += c * table.get(int(key), math.nan)
    return right / total


def run_serve_sim(
    *,
    instances: int = 12,
    ks: Sequence[int] = (2, 3, 4),
    loads: Sequence[float] = (0.2, 0.4, 0.6, 0.8),
    fractions: Sequence[float] = (0.02, 0.05, 0.1),
    slowdown: float = 5.0,
    episode_ms: float = 500.0,
    shift_ms: float = 4.0,
    scale_ms: float = 2.0,
    tail: str = "exponential",
    num_queries: int = 100_000,
    num_seeds: int = 5,
    schemes: Sequence[str] = SCHEMES,
    deadline_ms: float | None = 25.0,
    max_wait_ms: float = 5.0,
    validation_queries: int = 1_000_000,
    model: str = "mlp",
    dataset: str = "digits",
    epochs: int = 10,
    parm_epochs: int = 20,
    lam_dec: float = 1e-6,
    accuracy_queries: int = 2000,
    engine: str = "heap",
    data_path: str | None = None,
    seed: int = 0,
    progress: bool = True,
) -> ExperimentResult:
    """Validate the model, then map the schemes' tails over ``ks × loads × fractions``.

    Args:
        instances: ``m`` base model instances (a multiple of every ``k``).
        ks: coding group sizes.
        loads: utilisations of the ``m`` base instances by quiet work (the arrival rate is
            ``load · m / E[work]``).
        fractions: long-run fractions of time an instance is under background load.
        slowdown, episode_ms: how much slower an instance works in an episode, and the mean
            episode length (ms).
        shift_ms, scale_ms, tail: a query's work ``shift + scale · L`` (ms).
        num_queries, num_seeds: queries per run; runs (seeds) per setting.
        schemes: which of ``uncoded, equal, replication, parm, gcc, bacc``.
        deadline_ms, max_wait_ms: GCC/BACC's decoding deadline and group wait.
        validation_queries: queries per queueing-theory check (0: none).
        model, dataset, epochs, parm_epochs, lam_dec, data_path: the classifier, ParM's parity
            models and GCC's smoothing for the accuracies.
        accuracy_queries: test queries per accuracy table (0: no accuracies, no training).
        engine: ``"heap"`` or ``"simpy"`` (:func:`gcc_jax.distributed.simulate`).
        seed: the first seed (settings use ``seed .. seed + num_seeds − 1``).
        progress: messages on stderr.

    Returns:
        An :class:`~gcc_jax.experiments.ExperimentResult` whose ``results`` hold
        ``validation`` (:func:`validation_table`), ``cells`` (per setting: the rate and per
        scheme the mean p50/p99.9/gap, answered fraction, misses, gap ratio CI and accuracy),
        ``accuracy_tables`` and ``claim`` (where ParM's 3.5× is reached).
    """
    config = dict(locals())
    config.pop("progress")
    config.update(ks=list(ks), loads=list(loads), fractions=list(fractions), schemes=list(schemes))
    t_start = time.perf_counter()
    schemes = list(schemes)
    for k in ks:
        if instances % k:
            raise ValueError(f"`instances` ({instances}) must be a multiple of every k; got {k}")
    phases = {}
    validation = []
    if validation_queries > 0:
        _say(progress, f"validation: {validation_queries} queries per queueing check")
        validation = validation_table(int(validation_queries), seed)
        phases["validation"] = time.perf_counter() - t_start
    tables: dict = {}
    if accuracy_queries > 0 and set(schemes) & {"parm", "gcc", "bacc"}:
        t0 = time.perf_counter()
        tables = _accuracy_tables(config, schemes, seed, progress)
        phases["accuracy_tables"] = time.perf_counter() - t0
    cells = []
    seeds = range(seed, seed + int(num_seeds))
    t0 = time.perf_counter()
    with StopOnInterrupt() as stop:
        for k in ks:
            for fraction in fractions:
                for load in loads:
                    cell = _cell(config, int(k), float(load), float(fraction), schemes, seeds)
                    total = int(num_queries) * len(seeds)
                    for name, sm in cell["schemes"].items():
                        sm["accuracy"] = _accuracy(sm, name, int(k), tables, total)
                    cells.append(cell)
                    _say(progress, _cell_line(cell))
    phases["map"] = time.perf_counter() - t0
    config["interrupted"] = stop.interrupted
    results = dict(validation=validation, cells=cells, accuracy_tables=tables,
                   claim=_claim(cells))  # fmt: skip
    result = ExperimentResult.of_run(
        "serve_sim", config, seed, METRICS, results, t_start=t_start, phases=phases
    )
    return stop.finish(result)


run = run_serve_sim


def _cell_line(cell: dict) -> str:
    parm = cell["schemes"].get("parm", {}).get("gap_ratio")
    text = f"k={cell['k']} background {cell['fraction']:g} load {cell['load']:g}"
    if parm:
        text += f": parm gap ratio {parm['mean']:.2f} [{parm['lo']:.2f}, {parm['hi']:.2f}]"
    return text


def _claim(cells: list[dict]) -> dict:
    """Where ParM's gap ratio reaches 3.5 (mean, and the CI's lower end), and its largest."""
    rows = [(c["k"], c["fraction"], c["load"], c["schemes"]["parm"]["gap_ratio"])
            for c in cells if "gap_ratio" in c["schemes"].get("parm", {})]  # fmt: skip
    if not rows:
        return {}
    best = max(rows, key=lambda r: r[3]["mean"])

    def where(key: str) -> list[dict]:
        return [dict(k=k, fraction=f, load=ld) for k, f, ld, g in rows if g[key] >= PARM_GAP_CLAIM]

    return dict(
        reached_mean=where("mean"),
        reached_ci_lower=where("lo"),
        largest=dict(k=best[0], fraction=best[1], load=best[2], **best[3]),
        smallest_mean=min(r[3]["mean"] for r in rows),
    )


def _head(result: ExperimentResult) -> str:
    cfg = result.config
    return (
        f"serve-sim: m={cfg['instances']} base instances (one queue per pool), work "
        f"{cfg['shift_ms']:g}+{cfg['scale_ms']:g}·{cfg['tail']} ms, background episodes "
        f"x{cfg['slowdown']:g} slower, mean {cfg['episode_ms']:g} ms; {cfg['num_seeds']} seeds x "
        f"{cfg['num_queries']} queries per setting; GCC/BACC decode at N-S or "
        f"{cfg['deadline_ms']} ms; nothing cancelled"
    )


def _validation_lines(rows: list[dict]) -> list[str]:
    if not rows:
        return ["model validation: skipped (--validation-queries 0)"]
    lines = ["model validation: mean latency against queueing theory",
             f"  {'system':<28}{'queries':>9}{'model ms':>10}{'theory ms':>10}{'error':>8}"
             f"{'95% CI':>8}{'wall s':>8}"]  # fmt: skip
    for r in rows:
        lines.append(
            f"  {r['system']:<28}{r['queries']:>9}{r['model_ms']:>10.3f}{r['theory_ms']:>10.3f}"
            f"{r['rel_error']:>+8.2%}{r['ci95_rel']:>8.2%}{r['wall_s']:>8.1f}"
        )
    return lines


def _ratio_tables(cells: list[dict], scheme: str) -> list[str]:
    """Per k: the scheme's gap ratio (mean [95% CI]) by background fraction and load."""
    lines = []
    for k in sorted({c["k"] for c in cells}):
        mine = [c for c in cells if c["k"] == k and "gap_ratio" in c["schemes"].get(scheme, {})]
        if not mine:
            continue
        loads = sorted({c["load"] for c in mine})
        lines.append(f"  k={k}: {scheme} gap ratio by background fraction (rows) and load")
        lines.append("  " + f"{'':>10}" + "".join(f"{ld:>20g}" for ld in loads))
        for f in sorted({c["fraction"] for c in mine}):
            row = {c["load"]: c["schemes"][scheme]["gap_ratio"] for c in mine if c["fraction"] == f}
            cells_txt = "".join(
                f"{row[ld]['mean']:>7.2f} [{row[ld]['lo']:.2f},{row[ld]['hi']:.2f}]".rjust(20)
                if ld in row
                else f"{'':>20}"
                for ld in loads
            )
            lines.append(f"  {f:>10g}{cells_txt}")
    return lines


def _ranking(cell: dict) -> str:
    """The setting's tails ranked among schemes that answered >= 99%; the others listed."""
    sch = cell["schemes"]
    ok = sorted(
        (s for s in sch if sch[s]["answered"] >= ANSWERED_MIN), key=lambda s: sch[s]["p999_ms"]
    )

    def cell_text(s: str) -> str:
        acc = sch[s].get("accuracy", math.nan)
        return f"{s} {sch[s]['p999_ms']:.1f}" + (f" (acc {acc:.3f})" if math.isfinite(acc) else "")

    head = f"  k={cell['k']} bg={cell['fraction']:g} load={cell['load']:g}: "
    text = head + " < ".join(cell_text(s) for s in ok)
    left = [s for s in sch if s not in ok]
    if left:
        text += "; not ranked: " + ", ".join(
            f"{s} (answered {sch[s]['answered']:.1%}, {sch[s]['missed']} deadline misses)"
            for s in left
        )
    return text


def format_serve_sim(result: ExperimentResult) -> str:
    """The validation table, the gap-ratio map against ParM's claim, and the tails ranked."""
    res = result.results
    cells = res["cells"]
    lines = [_head(result)]
    if result.config.get("interrupted"):
        lines.append("INTERRUPTED (Ctrl-C): only the settings run in full are below.")
    lines += _validation_lines(res["validation"])
    lines.append("gap ratio = equal-resources (p99.9 - median) / the scheme's, mean [95% CI] "
                 f"over seeds; ParM claims up to {PARM_GAP_CLAIM:g}x")  # fmt: skip
    for scheme in ("parm", "replication", "gcc"):
        lines += _ratio_tables(cells, scheme)
    lines.append(f"p99.9 (ms), ranked among schemes that answered >= {ANSWERED_MIN:.0%}:")
    lines += [_ranking(c) for c in cells]
    lines.append(_plain(res))
    lines += [f"note: {n}" for n in (res.get("accuracy_tables") or {}).get("notes", [])]
    return "\n".join(lines)


report = format_serve_sim


def _plain(res: dict) -> str:
    claim = res.get("claim") or {}
    if not claim:
        return "In plain words: ParM or equal resources did not run; no gap ratio."
    big = claim["largest"]
    text = (
        f"In plain words: ParM's gap ratio against equal resources ranged from "
        f"{claim['smallest_mean']:.2f}x to {big['mean']:.2f}x [{big['lo']:.2f}, {big['hi']:.2f}] "
        f"(largest at k={big['k']}, background {big['fraction']:g}, load {big['load']:g}). "
    )
    if claim["reached_ci_lower"]:
        where = ", ".join(f"k={w['k']} bg={w['fraction']:g} load={w['load']:g}"
                          for w in claim["reached_ci_lower"])  # fmt: skip
        text += f"Its {PARM_GAP_CLAIM:g}x is reached, CI and all, at: {where}."
    elif claim["reached_mean"]:
        text += (
            f"Its {PARM_GAP_CLAIM:g}x is reached by the mean only, within the CI, at some settings."
        )
    else:
        text += f"Its {PARM_GAP_CLAIM:g}x is reached nowhere in this map."
    return text


def plot_serve_sim(result: ExperimentResult):
    """ParM's gap ratio against load, one panel per k, one line per background fraction."""
    cells = result.results["cells"]
    ks = sorted({c["k"] for c in cells}) or [0]
    fig, axes = new_figure(1, len(ks), figsize=(5 * len(ks), 4), squeeze=False)
    for ax, k in zip(axes[0], ks, strict=True):
        for f in sorted({c["fraction"] for c in cells if c["k"] == k}):
            mine = sorted((c for c in cells if c["k"] == k and c["fraction"] == f
                           and "gap_ratio" in c["schemes"].get("parm", {})),
                          key=lambda c: c["load"])  # fmt: skip
            if not mine:
                continue
            g = [c["schemes"]["parm"]["gap_ratio"] for c in mine]
            mean = np.array([v["mean"] for v in g])
            err = np.array([[v["mean"] - v["lo"] for v in g], [v["hi"] - v["mean"] for v in g]])
            ax.errorbar([c["load"] for c in mine], mean, yerr=np.nan_to_num(err), marker="o",
                        capsize=3, label=f"background {f:g}")  # fmt: skip
        ax.axhline(
            PARM_GAP_CLAIM, ls="--", color="k", lw=1, label=f"ParM's claim ({PARM_GAP_CLAIM:g}x)"
        )
        ax.axhline(1.0, ls=":", color="grey", lw=1)
        ax.set(xlabel="utilisation of the base instances", ylabel="equal gap / ParM gap",
               title=f"k = {k}")  # fmt: skip
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("ParM's p99.9 - median gap against equal resources (model; 95% CIs over seeds)")
    fig.tight_layout()
    return fig


save = save_report(format_serve_sim, plot_serve_sim)
"""Write ``serve_sim.json``, ``serve_sim.txt`` and ``serve_sim.png`` into ``out``."""
