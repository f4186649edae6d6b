"""The small private core every gcc_jax subpackage shares: statuses and errors (`status`), the
one validation module (`checks`), jaxtyping aliases (`types`), an identity-keyed cache (`cache`),
float32 round-off warnings (`precision`) and host-memory release (`memory`)."""
