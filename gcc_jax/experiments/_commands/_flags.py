"""The flags of every ``gcc-jax`` subcommand: declared as data, added and read back by one
mechanism.

A :class:`Setting` is one flag: its name, short form, old names (aliases, kept for one
release), the run keyword it sets and its help. :data:`SETTINGS` declares once the settings
that several subcommands share (``--workers/-N`` wherever a command takes ``workers`` or
``num_workers``), :func:`own` a command's own, :data:`SEARCH_SETTINGS` the worst-case search
flags (one per key of a ``search`` budget, checked by
:data:`gcc_jax.experiments._checks.SEARCH`). A command's :class:`Flags` (its run function's
defaults, its toy sizes, its own settings) adds the shared settings among the defaults' keys,
its own, then the search flags, each typed after its default (a tuple of integers parses
``"20,40"``, an integer ``"20"``) with the default and the toy value in its help; it reads
them back as the defaults, then the toy sizes (``--toy``), then every flag given.
:func:`flag` names a shared setting in a rule as errors name it.
"""

import argparse
import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from .._checks import Rule, count, sizes
from .._command import float_list, int_list, merge_config, str_list

__all__ = [
    "Flags",
    "MODELS",
    "SCHEMES",
    "SEARCH_SETTINGS",
    "SETTINGS",
    "Setting",
    "flag",
    "own",
    "shared_counts",
    "shared_sizes",
]

MODELS = ("mlp", "lenet5", "cnn", "vit", "repvgg")
"""The classifiers a command's ``--model`` offers: the names
:func:`gcc_jax.nn.models.make_model` accepts."""

SCHEMES = ("uncoded", "equal", "replication", "parm", "gcc", "bacc")
"""The serving schemes of ``serve-bench`` and ``serve-sim``, in table order."""


@dataclasses.dataclass(frozen=True)
class Setting:
    """One setting: its flag, short flag, old names, run keywords, help and type.

    Attributes:
        flag: the flag (``"--workers"``).
        short: its one-letter form (``"-N"``) or ``None``.
        aliases: older names accepted for one release (``("--num-workers",)``).
        keys: the run keywords it sets (``("workers", "num_workers")``): one per command.
        help: what it sets, without its default.
        type: the argparse type when the default does not tell (a ``None`` default).
        choices: the values it accepts, checked by argparse (``None``: any).
        switch: for a flag without a value, the value it sets its keyword to (``False`` for
            ``--no-cache``); ``None`` for a flag that takes a value.
    """

    flag: str
    short: str | None
    aliases: tuple[str, ...]
    keys: tuple[str, ...]
    help: str
    type: Callable[[str], Any] = str
    choices: tuple[str, ...] | None = None
    switch: bool | None = None


def own(
    flag: str,
    text: str,
    kind: Callable[[str], Any] = str,
    *,
    key: str | None = None,
    aliases: tuple[str, ...] = (),
    choices: tuple[str, ...] | None = None,
    switch: bool | None = None,
) -> Setting:
    """A command's own setting: ``flag`` sets the run keyword ``key``, by default the flag's
    name with underscores (``--cv-draws`` sets ``cv_draws``).

    Example:
        >>> own("--cv-draws", "held-out input draws").keys
        ('cv_draws',)
    """
    key = key or flag[2:].replace("-", "_")
    return Setting(flag, None, aliases, (key,), text, kind, choices, switch)


def _s(flag, short, aliases, keys, text, kind=str) -> Setting:
    return Setting(flag, short, tuple(aliases), tuple(keys), text, kind)


SETTINGS = (
    _s("--workers", "-N", ["--num-workers"], ["workers", "num_workers"], "N workers", int_list),
    _s("--num-inputs", "-K", [], ["num_inputs"], "K inputs per coded computation", int),
    _s("--stragglers", "-S", [], ["stragglers"], "S stragglers", int_list),
    _s("--masks", "-M", ["--trials"], ["num_masks", "num_trials"], "random straggler sets", int),
    _s("--batches", None, [], ["num_batches"], "evaluation batches", int),
    _s("--cv-batches", None, [], ["num_cv_batches"], "held-out batches for GCC's λ CV", int),
    _s(
        "--worst-case-batches",
        None,
        ["--worst-batches"],
        ["worst_case_batches"],
        "batches searched for the worst case",
        int,
    ),
    _s("--codes", None, [], ["codes"], "codes compared", str_list),
    _s("--ks", "-k", [], ["ks"], "k queries per coding group", int_list),
    _s("--schemes", None, [], ["schemes"], f"serving schemes: {', '.join(SCHEMES)}", str_list),
    _s("--queries", None, [], ["num_queries"], "queries per scheme", int),
    _s("--slowdown", None, [], ["slowdown"], "how much slower a worker runs in an episode", float),
    _s("--episode-ms", None, [], ["episode_ms"], "mean background-episode length, ms", float),
    _s("--shift-ms", None, [], ["shift_ms"], "service time: shift, ms", float),
    _s("--scale-ms", None, [], ["scale_ms"], "service time: scale of its random part, ms", float),
    _s("--tail", None, [], ["tail"], "service-time tail: exponential or pareto"),
    _s("--deadline-ms", None, [], ["deadline_ms"], "GCC/BACC: N-S results or this deadline", float),
    _s(
        "--max-wait-ms",
        None,
        [],
        ["max_wait_ms"],
        "longest wait for a group's k queries, ms",
        float,
    ),
    _s("--epochs", None, [], ["epochs"], "classifier training epochs, cached", int),
    _s("--parm-epochs", None, [], ["parm_epochs"], "ParM parity-model epochs, cached", int),
    _s("--model", None, [], ["model"], f"classifier: {', '.join(MODELS)}"),
    _s("--dataset", None, [], ["dataset"], "data set: digits, fashion_mnist, mnist, cifar10"),
    _s("--data-path", None, [], ["data_path"], "directory of the data set's files"),
    _s("--functions", None, [], ["functions"], "worker functions", str_list),
    _s("--workloads", None, [], ["workloads"], "worker functions", str_list),
    _s("--lam-enc", None, [], ["lam_enc"], "GCC encoder smoothing λ_enc", float),
    _s("--lam-dec", None, [], ["lam_dec"], "GCC decoder smoothing λ_dec", float),
    _s("--lam-enc-grid", None, [], ["lam_enc_grid"], "GCC λ_enc candidates", float_list),
    _s("--lam-dec-grid", None, [], ["lam_dec_grid"], "GCC λ_dec candidates", float_list),
    own("--no-cache", "always train; write no checkpoint", key="use_cache", switch=False),
)
"""Every shared setting, in ``--help`` order."""

_BY_KEY = {key: s for s in SETTINGS for key in s.keys}

SEARCH_SETTINGS = (
    own("--restarts", "worst-case search chains", int),
    own("--proposals", "neighbours proposed per search step", int),
    own("--max-iters", "local-search steps", int),
    own("--patience", "search steps without gain before stopping", int),
)
"""The worst-case search flags: each sets its key of a command's ``search`` budget."""


def flag(key: str) -> str:
    """The flag of the shared run keyword ``key`` as errors name it (``"--workers/-N"``).

    Example:
        >>> flag("num_workers"), flag("num_trials"), flag("epochs")
        ('--workers/-N', '--masks/-M', '--epochs')
    """
    s = _BY_KEY[key]
    return f"{s.flag}/{s.short}" if s.short else s.flag


def shared_sizes(k: str, n: str, s: str | None = None) -> Rule:
    """The size rule (``2 <= K <= N``, ``0 <= S <= N - 2``) of the shared run keywords ``k``,
    ``n`` and ``s``, naming their flags."""
    return sizes((k, flag(k)), (n, flag(n)), (s, flag(s)) if s else None)


def shared_counts(*keys: str) -> tuple[Rule, ...]:
    """The rules ``>= 1`` of the shared run keywords ``keys``, naming their flags."""
    return tuple(count(key, flag(key)) for key in keys)


def _show(value) -> str:
    if isinstance(value, list | tuple):
        return ",".join(_show(v) for v in value)
    return f"{value:g}" if isinstance(value, float) else str(value)


def _type(setting: Setting, value) -> Callable[[str], Any]:
    """The argparse type of a setting whose default is ``value``."""
    if isinstance(value, list | tuple) and value:
        item = value[0]
        return (
            str_list if isinstance(item, str) else int_list if isinstance(item, int) else float_list
        )
    if isinstance(value, bool) or value is None:
        return setting.type
    return type(value)


def _add(parser: argparse.ArgumentParser, key: str, s: Setting, text: str, value, toy) -> None:
    """Add setting ``s`` (dest ``key``, default ``None``), its help naming ``value`` (the
    default) and the toy value."""
    names = [s.flag, *([s.short] if s.short else []), *s.aliases]
    if s.switch is not None:
        parser.add_argument(*names, dest=key, action="store_const", const=s.switch, help=text)
        return
    shown = [f"default {_show(value)}"] if value is not None else []
    if toy and key in toy:
        shown.append(f"--toy: {_show(toy[key])}")
    if shown:
        text = f"{text} ({'; '.join(shown)})".strip()
    metavar = None if s.choices else s.flag[2:].upper().replace("-", "_")
    parser.add_argument(
        *names, dest=key, type=_type(s, value), choices=s.choices, metavar=metavar, help=text
    )


@dataclasses.dataclass(frozen=True)
class Flags:
    """A command's flags: the shared settings among ``defaults``' keys, then its own.

    Attributes:
        defaults: the run function's keyword defaults (what runs without flags).
        toy: the toy sizes (``--toy``) over the defaults.
        own: the command's own settings (:func:`own`), in ``--help`` order.
        help: per run keyword, this command's help of a shared setting
            (``num_masks="iid patterns per draw"``).
        finish: ``finish(config, toy) -> config`` turns the values of own flags that are not
            run keywords into run keywords (``poly``'s ``--n-low`` into its ``settings``).
    """

    defaults: Mapping[str, Any]
    toy: Mapping[str, Any] | None = None
    own: tuple[Setting, ...] = ()
    help: Mapping[str, str] = dataclasses.field(default_factory=dict)
    finish: Callable[[dict[str, Any], bool], dict[str, Any]] | None = None

    def settings(self) -> list[tuple[str, Setting]]:
        """``(run keyword, setting)`` of every flag but the search flags: the shared settings
        among the defaults' keys, then the command's own."""
        shared = [(key, _BY_KEY[key]) for key in self.defaults if key in _BY_KEY]
        return shared + [(s.keys[0], s) for s in self.own]

    def search(self) -> list[tuple[str, Setting]]:
        """``(key, setting)`` of the search flags: one per key of a ``search`` budget among
        the defaults."""
        budget = self.defaults.get("search")
        keys = budget if isinstance(budget, Mapping) else ()
        return [(s.keys[0], s) for s in SEARCH_SETTINGS if s.keys[0] in keys]

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Add every flag (dest: its run keyword, or the key of the search budget it sets;
        default ``None`` so that a flag given can be told apart)."""
        for key, s in self.settings():
            _add(parser, key, s, self.help.get(key, s.help), self.defaults.get(key), self.toy)
        toy = (self.toy or {}).get("search")
        for key, s in self.search():
            _add(parser, key, s, s.help, self.defaults["search"][key], toy)

    def config(self, args: argparse.Namespace, toy: bool) -> dict[str, Any]:
        """The run keywords: the defaults, then the toy sizes when ``toy``, then the flags
        given; the ``search`` budget key by key."""
        given = {key: getattr(args, key) for key, _ in self.settings()}
        config = merge_config(self.defaults, self.toy if toy else None, given)
        if self.search():
            searched = {key: getattr(args, key) for key, _ in self.search()}
            config["search"] = merge_config(config["search"], None, searched)
        return self.finish(config, toy) if self.finish else config
