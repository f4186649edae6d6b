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


def _str_list(text: str) -> tuple[str, ...]:
    values = tuple(v.strip() for v in text.split(",") if v.strip())
    if not values:
        raise argparse.ArgumentTypeError("expected at least one name")
    return values


def _float_list(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers; got {text!r}") from err
    if not values:
        raise argparse.ArgumentTypeError("expected at least one number")
    return values


def _json_dict(text: str) -> dict:
    import json

    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise argparse.ArgumentTypeError(f"expected a JSON object; got {text!r}") from err
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object; got {text!r}")
    return value


#: `gcc-jax run` flag (argparse dest) -> `run_dnn` keyword, for the sizing flags that --toy sets
_RUN_SIZES = {
    "num_workers": "num_workers",
    "num_inputs": "num_inputs",
    "stragglers": "stragglers",
    "trials": "num_trials",
    "batches": "num_batches",
    "cv_batches": "num_cv_batches",
    "lam_enc_grid": "lam_enc_grid",
    "lam_dec_grid": "lam_dec_grid",
    "epochs": "epochs",
}


def _add_run_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "run",
        help="the main job: coded inference of a trained classifier, GCC vs BACC vs uncoded",
        description="Trains (or loads from the cache) a classifier, then measures coded "
        "inference as in LeTCC §5: K test images per coded batch over N workers, random "
        "straggler sets per S (and the worst case), GCC with (lam_enc, lam_dec) chosen by grid "
        "cross-validation on held-out batches, BACC, uncoded and replication. Prints tables "
        "(rows: codes, columns: S) of RMSE, MSE, accuracy and RelAcc with 95% CIs and writes "
        "results.json (schema: gcc_jax.experiments.dnn), results.txt, results.png and cv.png "
        "into --out. Defaults: LeNet-5 on scikit-learn's digits, N=40, K=20, S=0..10 (under a "
        "minute on 2 CPU cores). --toy switches to tiny sizes; explicit flags still win.",
    )
    p.add_argument(
        "--dataset", default="digits", help="digits (default), fashion_mnist, mnist, cifar10"
    )
    p.add_argument("--data-path", default=None, help="directory of the data files")
    p.add_argument("--model", default="lenet5", help="lenet5 (default), mlp, cnn, vit")
    p.add_argument(
        "--model-kwargs",
        type=_json_dict,
        default=None,
        help="architecture options as JSON, e.g. '{\"dim\": 32}' for the ViT",
    )
    p.add_argument("--num-workers", "-N", type=int, help="N (default 40)")
    p.add_argument("--num-inputs", "-K", type=int, help="K images per batch (default 20)")
    p.add_argument(
        "--stragglers", "-S", type=_int_list, help="comma-separated S values (default 0,2,...,10)"
    )
    p.add_argument("--trials", type=int, help="straggler sets per batch and S (default 20)")
    p.add_argument("--batches", type=int, help="evaluation batches (default 10)")
    p.add_argument("--cv-batches", type=int, help="held-out batches for the λ CV (default 2)")
    p.add_argument(
        "--codes",
        type=_str_list,
        default=("gcc", "bacc", "uncoded", "replication"),
        help="comma-separated codes (default gcc,bacc,uncoded,replication)",
    )
    p.add_argument(
        "--lam-enc-grid", type=_float_list, help="GCC encoder λ candidates (default 0,1e-11..1e-6)"
    )
    p.add_argument(
        "--lam-dec-grid", type=_float_list, help="GCC decoder λ candidates (default 0,1e-13..1e-7)"
    )
    p.add_argument("--no-worst-case", action="store_true", help="skip the worst-case search")
    p.add_argument("--worst-case-batches", type=int, default=3, help="batches searched (3)")
    p.add_argument("--restarts", type=int, help="worst-case search chains (default 8)")
    p.add_argument("--proposals", type=int, help="neighbours per search step (default 128)")
    p.add_argument("--max-iters", type=int, help="local-search steps (default 25)")
    p.add_argument("--epochs", type=int, help="training epochs (default 20)")
    p.add_argument("--batch-size", type=int, default=64, help="training batch size (64)")
    p.add_argument("--lr", type=float, default=1e-3, help="learning rate (1e-3)")
    p.add_argument("--no-cache", action="store_true", help="always train; write no checkpoint")
    p.add_argument("--toy", action="store_true", help="tiny sizes (seconds): a smoke test")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="gcc-results", help="output folder (default ./gcc-results)")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    p.set_defaults(func=_cmd_run)


def _cmd_run(args) -> int:
    import jax

    jax.config.update("jax_enable_x64", True)  # spline solves with lam > 0 need float64
    from .data import DatasetError
    from .experiments.dnn import DEFAULT_SEARCH, format_dnn_table, run_dnn, save_dnn, toy_config

    config = toy_config() if args.toy else {}
    config.update(
        {kw: getattr(args, a) for a, kw in _RUN_SIZES.items() if getattr(args, a) is not None}
    )
    search = dict(config.get("search", DEFAULT_SEARCH))
    search.update(
        {
            a: getattr(args, a)
            for a in ("restarts", "proposals", "max_iters")
            if getattr(args, a) is not None
        }
    )
    config["search"] = search
    try:
        result = run_dnn(
            **config,
            dataset=args.dataset,
            model=args.model,
            model_kwargs=args.model_kwargs,
            data_path=args.data_path,
            codes=args.codes,
            worst_case=not args.no_worst_case,
            worst_case_batches=args.worst_case_batches,
            batch_size=args.batch_size,
            lr=args.lr,
            use_cache=not args.no_cache,
            seed=args.seed,
            progress=not args.no_progress,
        )
    except DatasetError as err:  # a missing or corrupt data set: the loader's message says why
        print(f"gcc-jax run: error: {err}", file=sys.stderr)
        return 2
    print(format_dnn_table(result))
    paths = save_dnn(result, args.out)
    total = result["timing_s"]["total"]
    print(f"total {total:.1f} s; wrote " + ", ".join(str(v) for v in paths.values()))
    return 0


def _add_demo_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "demo",
        help="synthetic GCC demo: loss versus S on a smooth vector-valued function",
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
    p.set_defaults(func=_cmd_demo)


def _cmd_demo(args) -> int:
    import jax

    jax.config.update("jax_enable_x64", not args.float32)
    from .experiments.demo import format_table, run_demo, save

    for name in ("num_inputs", "num_workers", "masks", "dim"):
        if getattr(args, name) < (2 if name != "masks" and name != "dim" else 1):
            raise SystemExit(f"gcc-jax demo: --{name.replace('_', '-')} is too small")
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
    p.add_argument("--solver", choices=("auto", "kalman", "banded", "kernel"), default="auto")
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


def _add_serve_bench_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "serve-bench",
        help="coded inference on a local Ray cluster: latency tails and accuracy per scheme",
        description="Serves one Poisson stream of test images with a trained classifier on Ray "
        "actors (a local cluster on the loopback interface), with injected stragglers, once per "
        "scheme: uncoded (K workers, wait for all), replication (N workers, wait for one copy "
        "of each query), GCC and BACC (N workers, wait for N-S), ParM when gcc_jax.codes has "
        "it. Prints median, p99 and p99.9 latency and accuracy; writes serve_bench.json, "
        "serve_bench.txt and serve_bench.png (latency CDFs) into --out. Bounded by --queries "
        "and --max-seconds; stops by itself.",
    )
    p.add_argument("--model", default="mlp", help="classifier: mlp (default), lenet5, cnn, vit")
    p.add_argument("--dataset", default="digits", help="digits (default), fashion_mnist, ...")
    p.add_argument("--data-path", default=None, help="directory of the data files")
    p.add_argument("--epochs", type=int, default=10, help="training epochs (10; cached)")
    p.add_argument("--parm-epochs", type=int, default=20, help="ParM parity-model epochs (20)")
    p.add_argument("--queries", type=int, default=1000, help="queries per scheme (1000)")
    p.add_argument("--rate", type=float, default=50.0, help="arrival rate, queries/s (50)")
    p.add_argument("--num-inputs", "-K", type=int, default=4, help="K queries per batch (4)")
    p.add_argument("--num-workers", "-N", type=int, default=8, help="N workers (8)")
    p.add_argument("--stragglers", "-S", type=int, default=2, help="codes wait for N-S (S=2)")
    p.add_argument("--shift-ms", type=float, default=5.0, help="injected delay shift (5 ms)")
    p.add_argument("--scale-ms", type=float, default=5.0, help="injected delay scale (5 ms)")
    p.add_argument("--tail", choices=("exponential", "pareto"), default="exponential")
    p.add_argument(
        "--straggle-prob", type=float, default=0.05, help="P(task slowed --slowdown x) (0.05)"
    )
    p.add_argument("--slowdown", type=float, default=10.0, help="straggler slow-down (10)")
    p.add_argument("--slow-workers", type=int, default=0, help="workers slowed in every round (0)")
    p.add_argument("--fail-prob", type=float, default=0.0, help="P(task never answers) (0)")
    p.add_argument("--lam-dec", type=float, default=1e-6, help="GCC decoder smoothing (1e-6)")
    p.add_argument("--max-wait-ms", type=float, default=20.0, help="batch fill wait (20 ms)")
    p.add_argument("--timeout", type=float, default=1.0, help="round deadline, s (1.0)")
    p.add_argument("--max-in-flight", type=int, default=4, help="rounds in flight (4)")
    p.add_argument("--max-seconds", type=float, default=600.0, help="stream time budget (600)")
    p.add_argument(
        "--schemes",
        type=_str_list,
        default=("uncoded", "replication", "gcc", "bacc", "parm"),
        help="comma-separated schemes (default uncoded,replication,gcc,bacc,parm)",
    )
    p.add_argument("--num-cpus", type=int, default=2, help="CPUs of the local Ray cluster (2)")
    p.add_argument("--toy", action="store_true", help="tiny sizes (also with GCC_JAX_TOY=1)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="gcc-results", help="output folder (default ./gcc-results)")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    p.set_defaults(func=_cmd_serve_bench)


def _cmd_serve_bench(args) -> int:
    import os

    from .experiments.serve import format_serve_table, run_serve_bench, save_serve

    config = dict(
        model=args.model,
        dataset=args.dataset,
        data_path=args.data_path,
        epochs=args.epochs,
        parm_epochs=args.parm_epochs,
        num_queries=args.queries,
        rate=args.rate,
        num_inputs=args.num_inputs,
        num_workers=args.num_workers,
        stragglers=args.stragglers,
        shift_ms=args.shift_ms,
        scale_ms=args.scale_ms,
        tail=args.tail,
        straggle_prob=args.straggle_prob,
        slowdown=args.slowdown,
        slow_workers=args.slow_workers,
        fail_prob=args.fail_prob,
        lam_dec=args.lam_dec,
        max_wait_ms=args.max_wait_ms,
        timeout_s=args.timeout,
        max_in_flight=args.max_in_flight,
        max_seconds=args.max_seconds,
        schemes=args.schemes,
        num_cpus=args.num_cpus,
        seed=args.seed,
    )
    if args.toy or os.environ.get("GCC_JAX_TOY", "") not in ("", "0"):
        config.update(
            num_queries=min(args.queries, 40),
            rate=100.0,
            num_inputs=2,
            num_workers=4,
            stragglers=1,
            epochs=min(args.epochs, 1),
            parm_epochs=min(args.parm_epochs, 1),
            max_seconds=min(args.max_seconds, 60.0),
        )
    result = run_serve_bench(**config, progress=not args.no_progress)
    print(format_serve_table(result))
    paths = save_serve(result, args.out)
    print("wrote " + ", ".join(str(v) for v in paths.values()))
    return 0


def _add_compare_learned_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "compare-learned",
        help="ParM and a learned code vs GCC and BACC in degraded mode (one unavailable output)",
        description="Trains (or loads from the cache) MLP and LeNet-5 base models on "
        "Fashion-MNIST (scikit-learn's digits when its files are absent), then for k = 2, 3, 4: "
        "ParM parity models (sum encoder; concatenation for k = 2, 4) and a learned "
        "encoder/decoder (r = 1), and GCC and BACC both at N = k+1, S = 1 and at their natural "
        "operating point K = g·k, N = g·(k+1), S = g (the same extra workers per input). "
        "Reports degraded-mode reconstruction and overall accuracy on the unavailable outputs, "
        "the gap to the base model (ParM published 1.79 points on Fashion-MNIST, k = 2) and "
        "each code's training time; writes compare_learned.json, .txt and .png into --out. "
        "Defaults take a few minutes on 2 CPU cores (cached reruns: seconds); --toy is tiny.",
    )
    p.add_argument("--dataset", default="fashion_mnist", help="fashion_mnist (default), digits")
    p.add_argument("--data-path", default=None, help="directory of the data files")
    p.add_argument("--models", type=_str_list, default=None, help="base models (mlp,lenet5)")
    p.add_argument("--ks", "-k", type=_int_list, default=None, help="values of k (2,3,4)")
    p.add_argument("--base-epochs", type=int, default=None, help="base epochs (mlp 10, lenet5 3)")
    p.add_argument("--code-epochs", type=int, default=None, help="code training epochs (4)")
    p.add_argument(
        "--code-train-size", type=int, default=None, help="training images for the codes (12000)"
    )
    p.add_argument("--all-train", action="store_true", help="train the codes on every image")
    p.add_argument("--eval-images", type=int, default=None, help="test images (10000)")
    p.add_argument("--no-concat", action="store_true", help="skip ParM's concatenation encoder")
    p.add_argument("--learned-encoder", choices=("mlp", "conv"), default=None, help="(mlp)")
    p.add_argument(
        "--learned-hidden", type=int, default=None, help="MLP encoder width / conv channels (256)"
    )
    p.add_argument("--gcc-groups", type=int, default=None, help="g of GCC's natural point (10)")
    p.add_argument("--gcc-trials", type=int, default=None, help="patterns per batch there (10)")
    p.add_argument("--cv-images", type=int, default=None, help="images for GCC's λ CV (1000)")
    p.add_argument("--lam-dec-grid", type=_float_list, default=None, help="GCC λ_dec candidates")
    p.add_argument("--no-cache", action="store_true", help="always train; write no checkpoint")
    p.add_argument("--toy", action="store_true", help="tiny sizes (also with GCC_JAX_TOY=1)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="gcc-results", help="output folder (default ./gcc-results)")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    p.set_defaults(func=_cmd_compare_learned)


def _cmd_compare_learned(args) -> int:
    import os

    import jax

    jax.config.update("jax_enable_x64", True)  # GCC's spline solves
    from .data import DatasetError
    from .experiments.learned import (
        format_compare_table,
        run_compare_learned,
        save_compare,
        toy_config,
    )

    toy = args.toy or os.environ.get("GCC_JAX_TOY", "") not in ("", "0")
    config = toy_config() if toy else {"dataset": args.dataset}
    flags = {
        "models": args.models,
        "ks": args.ks,
        "base_epochs": args.base_epochs,
        "code_epochs": args.code_epochs,
        "code_train_size": args.code_train_size,
        "eval_images": args.eval_images,
        "learned_encoder": args.learned_encoder,
        "learned_hidden": args.learned_hidden,
        "gcc_groups": args.gcc_groups,
        "gcc_trials": args.gcc_trials,
        "cv_images": args.cv_images,
        "lam_dec_grid": args.lam_dec_grid,
    }
    config.update({key: v for key, v in flags.items() if v is not None})
    if args.all_train:
        config["code_train_size"] = None
    try:
        result = run_compare_learned(
            **config,
            data_path=args.data_path,
            concat=not args.no_concat,
            use_cache=not args.no_cache,
            seed=args.seed,
            progress=not args.no_progress,
        )
    except DatasetError as err:
        print(f"gcc-jax compare-learned: error: {err}", file=sys.stderr)
        return 2
    print(format_compare_table(result))
    paths = save_compare(result, args.out)
    print("wrote " + ", ".join(str(v) for v in paths.values()))
    return 0


def _add_tune_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "tune",
        help="choose GCC's λs and nodes: defaults vs grid CV vs GCV vs gradient tuning",
        description="For x·sin(x), a smooth map R²→R³ and LeNet-5 on the digits, and for "
        "worst-case and iid stragglers: held-out loss of GCC with default λs, grid-CV λs, "
        "per-pattern GCV and CV choices of λ_dec, Adam-tuned λs and Adam-tuned λs and nodes "
        "(gcc_jax.tuning). Tuning sees training jobs only; evaluation uses held-out jobs and "
        "patterns. Writes tune.json, tune.txt and tune.png into --out.",
    )
    p.add_argument(
        "--workloads",
        type=_str_list,
        default=("xsinx", "vector_map", "lenet5"),
        help="comma-separated workloads (default xsinx,vector_map,lenet5)",
    )
    p.add_argument(
        "--regimes", type=_str_list, default=("worst", "iid"), help="worst,iid (default both)"
    )
    p.add_argument("--steps", type=int, default=None, help="maximum tuning steps (500)")
    p.add_argument("--toy", action="store_true", help="tiny sizes (also with GCC_JAX_TOY=1)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="gcc-results", help="output folder (default ./gcc-results)")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    p.set_defaults(func=_cmd_tune)


def _cmd_tune(args) -> int:
    import os

    import jax

    jax.config.update("jax_enable_x64", True)  # smoothing with λ > 0 needs float64
    from .experiments.tune import format_tune_table, run_tune, save_tune

    if args.steps is not None and args.steps < 0:
        raise SystemExit("gcc-jax tune: --steps must be >= 0")
    toy = args.toy or os.environ.get("GCC_JAX_TOY", "") not in ("", "0")
    result = run_tune(
        workloads=args.workloads,
        regimes=args.regimes,
        toy=toy,
        steps=args.steps,
        seed=args.seed,
        progress=not args.no_progress,
    )
    print(format_tune_table(result))
    paths = save_tune(result, args.out)
    print("wrote " + ", ".join(str(v) for v in paths.values()))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gcc-jax", description="General coded computing in JAX (GCC and its rivals)."
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_run_parser(subparsers)
    _add_demo_parser(subparsers)
    _add_rates_parser(subparsers)
    _add_poly_parser(subparsers)
    _add_serve_bench_parser(subparsers)
    _add_compare_learned_parser(subparsers)
    _add_tune_parser(subparsers)
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
