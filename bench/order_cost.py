"""Cost of `gcc_jax.input_order` per batch of K images, beside the cost of encoding the batch.

For K = 20 … 100 Fashion-MNIST test images (28×28, flattened to 784 numbers; scikit-learn's
digits when Fashion-MNIST is absent) and every method, the compile time and the best of
`--repeat` calls (wall and process CPU seconds, `jax.block_until_ready`), next to GCC's
encoder (`SplineCode.chebyshev(K, N = 3K/2).encode`) on the same batch. Writes JSON with
versions and device with `--out`.

    python bench/order_cost.py --repeat 20 --out bench/results/order_cost.json
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import best_of, environment  # noqa: E402


def _images(count: int):
    from gcc_jax.nn.data import DatasetNotFoundError, load_dataset

    try:
        ds = load_dataset("fashion_mnist")
    except DatasetNotFoundError:
        ds = load_dataset("digits")
    return ds.name, ds.x_test[:count]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="20,40,60,80,100", help="batch sizes K")
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--out", help="write the results JSON here")
    args = p.parse_args()

    import jax
    import jax.numpy as jnp

    import gcc_jax as gcc

    sizes = [int(s) for s in args.sizes.split(",")]
    name, images = _images(max(sizes))
    rows = []
    for k in sizes:
        x = jnp.asarray(images[:k], jnp.float32)
        code = gcc.SplineCode.chebyshev(num_inputs=k, num_workers=3 * k // 2)
        for method in ("given", "pca", "spectral", "greedy", "encode"):
            if method == "encode":
                call = lambda: jax.block_until_ready(code.encode(x))  # noqa: E731
            else:
                call = lambda m=method: jax.block_until_ready(gcc.input_order(x, m))  # noqa: E731
            t0 = time.perf_counter()
            call()
            compile_s = time.perf_counter() - t0
            wall, cpu = best_of(call, args.repeat)
            rows.append(
                {
                    "K": k,
                    "method": method,
                    "compile_s": compile_s,
                    "best_s": wall,
                    "best_cpu_s": cpu,
                }
            )
            print(f"K={k:4d} {method:9s} compile {compile_s:6.2f} s  best {1e3 * wall:8.3f} ms")
    out = {
        "script": "bench/order_cost.py",
        "dataset": name,
        "image_shape": list(images.shape[1:]),
        "dtype": "float32",
        "repeat": args.repeat,
        "rows": rows,
        "environment": environment(),
    }
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
