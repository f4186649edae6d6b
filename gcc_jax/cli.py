"""The ``gcc-jax`` command line: ``gcc-jax run`` and the experiment subcommands."""

from __future__ import annotations

import argparse
import sys


def _int_list(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError as err:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers; got {text!r}"
        ) from err
    if not values:
        raise argparse.ArgumentTypeError("expected at least one integer")
    return values


def _add_run_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "run",
        help="the main job (for now: the synthetic GCC demo)",
        description="GCC on a smooth vector-valued function: mean and worst loss versus the "
        "number of stragglers S over random straggler sets.",
    )
    p.add_argument("--num-inputs", "-K", type=int, default=20, help="K (default 20)")
    p.add_argument("--num-workers", "-N", type=int, default=100, help="N (default 100)")
    p.add_argument(
        "--stragglers",
        "-S",
        type=_int_list,
        default=(0, 5, 10, 20, 30, 40),
        help="comma-separated S values (default 0,5,10,20,30,40)",
    )
    p.add_argument("--masks", "-M", type=int, default=1000, help="straggler sets per S")
    p.add_argument("--dim", type=int, default=4, help="input dimension d (default 4)")
    p.add_argument("--lam-enc", type=float, default=0.0, help="encoder smoothing (default 0)")
    p.add_argument("--lam-dec", type=float, default=0.0, help="decoder smoothing (default 0)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--float32", action="store_true", help="run in float32 (default float64)")
    p.add_argument("--out", default="gcc-results", help="output folder (default ./gcc-results)")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    p.set_defaults(func=_cmd_run)


def _cmd_run(args) -> int:
    import jax

    jax.config.update("jax_enable_x64", not args.float32)
    from .experiments.demo import format_table, run_demo, save

    for name in ("num_inputs", "num_workers", "masks", "dim"):
        if getattr(args, name) < (2 if name != "masks" and name != "dim" else 1):
            raise SystemExit(f"gcc-jax run: --{name.replace('_', '-')} is too small")
    result = run_demo(
        num_inputs=args.num_inputs,
        num_workers=args.num_workers,
        stragglers=args.stragglers,
        num_masks=args.masks,
        dim=args.dim,
        lam_enc=args.lam_enc,
        lam_dec=args.lam_dec,
        seed=args.seed,
        progress=not args.no_progress,
    )
    print(format_table(result))
    path = save(result, args.out)
    print(f"wrote {path}")
    return 0


def _str_list(text: str) -> tuple[str, ...]:
    values = tuple(v.strip() for v in text.split(",") if v.strip())
    if not values:
        raise argparse.ArgumentTypeError("expected at least one name")
    return values


def _add_rates_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "rates",
        help="convergence rates of GCC vs BACC in N (worst case and iid stragglers)",
        description="Loss of GCC and BACC versus the number of workers N (log-spaced), for "
        "x·sin(x) and a smooth map R²→R³: worst case at fixed S (exhaustive or local search) "
        "and iid stragglers with probability p. Prints a table with fitted log-log slopes and "
        "writes rates.json, rates.txt and rates.png (with the theory lines).",
    )
    p.add_argument(
        "--workers",
        "-N",
        type=_int_list,
        default=(20, 40, 80, 160, 320, 640),
        help="comma-separated N values (default 20,40,80,160,320,640)",
    )
    p.add_argument("--num-inputs", "-K", type=int, default=10, help="K (default 10)")
    p.add_argument("--stragglers", "-S", type=int, default=3, help="worst-case S (default 3)")
    p.add_argument("--p", type=float, default=0.1, help="iid straggling probability (0.1)")
    p.add_argument("--masks", "-M", type=int, default=200, help="iid patterns per N (200)")
    p.add_argument(
        "--functions",
        type=_str_list,
        default=("xsinx", "vector_map"),
        help="comma-separated worker functions (default xsinx,vector_map)",
    )
    p.add_argument("--lam-enc", type=float, default=0.0, help="GCC encoder smoothing (0)")
    p.add_argument("--lam-dec", type=float, default=0.0, help="GCC decoder smoothing (0)")
    p.add_argument("--solver", choices=("auto", "banded", "kernel"), default="auto")
    p.add_argument("--restarts", type=int, default=8, help="worst-case search chains (8)")
    p.add_argument("--proposals", type=int, default=128, help="neighbours per step (128)")
    p.add_argument("--max-iters", type=int, default=25, help="local-search steps (25)")
    p.add_argument("--toy", action="store_true", help="tiny sizes (seconds): a smoke test")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--float32", action="store_true", help="run in float32 (default float64)")
    p.add_argument("--out", default="gcc-results", help="output folder (default ./gcc-results)")
    p.add_argument("--no-progress", action="store_true", help="no per-measurement lines")
    p.set_defaults(func=_cmd_rates)


def _cmd_rates(args) -> int:
    import jax

    jax.config.update("jax_enable_x64", not args.float32)
    from .experiments.rates import format_rates_table, run_rates, save_rates

    search = dict(restarts=args.restarts, proposals=args.proposals, max_iters=args.max_iters)
    config = dict(
        workers=args.workers,
        num_inputs=args.num_inputs,
        stragglers=args.stragglers,
        num_masks=args.masks,
    )
    if args.toy:
        config = dict(workers=(12, 24), num_inputs=4, stragglers=2, num_masks=16)
        search = dict(restarts=2, proposals=16, max_iters=3)
    result = run_rates(
        **config,
        p=args.p,
        functions=args.functions,
        lam_enc=args.lam_enc,
        lam_dec=args.lam_dec,
        solver=args.solver,
        search=search,
        seed=args.seed,
        progress=not args.no_progress,
    )
    print(format_rates_table(result))
    paths = save_rates(result, args.out)
    print("wrote " + ", ".join(str(v) for v in paths.values()))
    return 0


def _add_poly_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "poly",
        help="GCC vs BACC vs LCC on polynomial f (loss versus S)",
        description="LeTCC App. D: polynomial worker functions (deg 3 with K=5, deg 15 with "
        "K=10), loss versus the number of stragglers S for GCC, BACC and LCC over random "
        "straggler sets. Writes poly.json, poly.txt and poly.png.",
    )
    p.add_argument("--trials", type=int, default=20, help="straggler sets per S (20)")
    p.add_argument("--n-low", type=int, default=20, help="N for deg 3, K=5 (default 20)")
    p.add_argument("--n-high", type=int, default=40, help="N for deg 15, K=10 (default 40)")
    p.add_argument("--toy", action="store_true", help="tiny sizes (seconds): a smoke test")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="gcc-results", help="output folder (default ./gcc-results)")
    p.add_argument("--no-progress", action="store_true", help="no per-S lines")
    p.set_defaults(func=_cmd_poly)


def _cmd_poly(args) -> int:
    import jax

    jax.config.update("jax_enable_x64", True)
    from .experiments.poly import format_poly_table, run_poly, save_poly

    config = dict(settings=((3, 5, args.n_low), (15, 10, args.n_high)), num_trials=args.trials)
    if args.toy:
        config = dict(settings=((3, 5, 20),), stragglers=(0, 7, 9), num_trials=3)
    result = run_poly(**config, seed=args.seed, progress=not args.no_progress)
    print(format_poly_table(result))
    paths = save_poly(result, args.out)
    print("wrote " + ", ".join(str(v) for v in paths.values()))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gcc-jax", description="General coded computing in JAX (GCC and its rivals)."
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_run_parser(subparsers)
    _add_rates_parser(subparsers)
    _add_poly_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except ValueError as err:  # bad input: a clear message, not a traceback
        print(f"gcc-jax {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
