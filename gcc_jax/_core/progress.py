"""Progress bars: tqdm, imported when a bar is made.

tqdm comes with the ``experiments`` extra (``pip install 'gcc_jax[experiments]'``). Without it, a
disabled bar (``progress=False``) is a silent stand-in and messages are printed; asking for a
visible bar raises an ``ImportError`` naming the extra.
"""

import sys

__all__ = ["tqdm"]

_MISSING = (
    "progress bars need tqdm, which comes with the `experiments` extra: "
    "pip install 'gcc_jax[experiments]' (or pass progress=False)"
)


class _Silent:
    """What a disabled tqdm bar does: iterate, and ignore updates."""

    def __init__(self, iterable=None):
        self.iterable = iterable

    def __iter__(self):
        return iter(self.iterable if self.iterable is not None else ())

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> bool:
        return False

    def __getattr__(self, name):  # update, set_postfix, set_description, close, ...
        return lambda *args, **kwargs: None


def _load():
    try:
        from tqdm.auto import tqdm as bar
    except ImportError:
        return None
    return bar


def tqdm(iterable=None, *args, disable: bool = False, **kwargs):
    """``tqdm.auto.tqdm(iterable, *args, disable=disable, **kwargs)``.

    Raises:
        ImportError: tqdm is not installed and the bar is not disabled.
    """
    bar = _load()
    if bar is None:
        if disable:
            return _Silent(iterable)
        raise ImportError(_MISSING)
    return bar(iterable, *args, disable=disable, **kwargs)


def _write(text: str, file=None, end: str = "\n") -> None:
    """``tqdm.write``: print above any running bar (plain stdout without tqdm)."""
    bar = _load()
    if bar is None:
        print(text, file=file if file is not None else sys.stdout, end=end)
    else:
        bar.write(text, file=file, end=end)


tqdm.write = _write
