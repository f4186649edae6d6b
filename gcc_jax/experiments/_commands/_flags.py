"""The flags of every ``gcc-jax`` subcommand: declared as data, added, read back and checked by
one mechanism.

A :class:`Setting` is one flag: its name, short form, old names (aliases, kept for one
release), the run keyword it sets, its help and its check. :data:`SETTINGS` declares once the
settings that several subcommands share (``--workers/-N`` wherever a command takes
``workers`` or ``num_workers``), :func:`own` a command's own, :data:`SEARCH_SETTINGS` the
worst-case search flags (one per key of a ``search`` budget). A command's :class:`Flags` (its
run function's defaults, its toy sizes, its own settings) adds the shared settings among the
defaults' keys, its own, then the search flags, each typed after its default (a tuple of
integers parses ``"20,40"``, an integer ``"20"``) with the default and the toy value in its
help; it reads them back as the defaults, then the toy sizes (``--toy``), then every flag
given; and its rules are every setting's check (:func:`at_least`, :func:`within`,
:func:`one_of`) naming the flag as errors do (:func:`flag`), then the rules across settings.
"""

import argparse
import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .._checks import Rule, choice, count, lam, nested, real, sizes
from .._command import float_list, int_list, merge_config, str_list

__all__ = [
    "Check",
    "Flags",
    "MODELS",
    "SCHEMES",
    "SEARCH_SETTINGS",
    "SETTINGS",
    "Setting",
    "at_least",
    "flag",
    "one_of",
    "own",
    "shared_sizes",
    "within",
]

MODELS = ("mlp", "lenet5", "cnn", "vit", "repvgg")
"""The classifiers a command's ``--model`` offers: the names
:func:`gcc_jax.nn.models.make_model` accepts."""

SCHEMES = ("uncoded", "equal", "replication", "parm", "gcc", "bacc")
"""The serving schemes of ``serve-bench`` and ``serve-sim``, in table order."""

Check = Callable[[str, str], Rule]
"""A setting's check: ``check(key, flag)`` is the :class:`~gcc_jax.experiments._checks.Rule`
of run keyword ``key`` set by ``flag`` (:func:`~gcc_jax.experiments._checks.count` and
:func:`~gcc_jax.experiments._checks.lam` are checks; :func:`at_least`, :func:`within` and
:func:`one_of` make others)."""


def at_least(lo: int, *, optional: bool = False) -> Check:
    """Each value an integer ``>= lo`` (``None`` allowed when ``optional``)."""
    return functools.partial(count, lo=lo, optional=optional)


def within(lo: float | None = None, hi: float | None = None, **bounds: bool) -> Check:
    """Each value a finite number between ``lo`` and ``hi``; ``bounds`` are the keywords of
    :func:`~gcc_jax.experiments._checks.real` (``lo_open``, ``hi_open``, ``optional``)."""
    return functools.partial(real, lo=lo, hi=hi, **bounds)


def one_of(allowed: Sequence[str], *, case: bool = True) -> Check:
    """Each value one of ``allowed`` (in any case unless ``case``)."""
    return functools.partial(choice, allowed=allowed, case=case)


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
        check: its rule, checked before any compute (``None``: none of its own).
    """

    flag: str
    short: str | None
    aliases: tuple[str, ...]
    keys: tuple[str, ...]
    help: str
    type: Callable[[str], Any] = str
    choices: tuple[str, ...] | None = None
    switch: bool | None = None
    check: Check | None = None


def own(
    flag: str,
    text: str,
    kind: Callable[[str], Any] = str,
    *,
    key: str | None = None,
    aliases: tuple[str, ...] = (),
    choices: tuple[str, ...] | None = None,
    switch: bool | None = None,
    check: Check | None = None,
) -> Setting:
    """A command's own setting: ``flag`` sets the run keyword ``key``, by default the flag's
    name with underscores (``--cv-draws`` sets ``cv_draws``).

    Example:
        >>> own("--cv-draws", "held-out input draws").keys
        ('cv_draws',)
    """
    key = key or flag[2:].replace("-", "_")
    return Setting(flag, None, aliases, (key,), text, kind, choices, switch, check)


def _shared(flag, keys, text, kind=str, *, short=None, aliases=(), check=None) -> Setting:
    return Setting(flag, short, aliases, keys, text, kind, check=check)


SETTINGS = (
    _shared("--workers", ("workers", "num_workers"), "N workers", int_list, short="-N",
            aliases=("--num-workers",)),
    _shared("--num-inputs", ("num_inputs",), "K inputs per coded computation", int, short="-K"),
    _shared("--stragglers", ("stragglers",), "S stragglers", int_list, short="-S"),
    _shared("--masks", ("num_masks", "num_trials"), "random straggler sets", int, short="-M",
            aliases=("--trials",), check=count),
    _shared("--batches", ("num_batches",), "evaluation batches", int, check=count),
    _shared("--cv-batches", ("num_cv_batches",), "held-out batches for GCC's λ CV", int,
            check=count),
    _shared("--worst-case-batches", ("worst_case_batches",), "batches searched for the worst case",
            int, aliases=("--worst-batches",), check=count),
    _shared("--codes", ("codes",), "codes compared", str_list),
    _shared("--ks", ("ks",), "k queries per coding group", int_list, short="-k", check=at_least(2)),
    _shared("--schemes", ("schemes",), f"serving schemes: {', '.join(SCHEMES)}", str_list,
            check=one_of(SCHEMES)),
    _shared("--queries", ("num_queries",), "queries per scheme", int),
    _shared("--slowdown", ("slowdown",), "how much slower a worker runs in an episode", float,
            check=within(1.0)),
    _shared("--episode-ms", ("episode_ms",), "mean background-episode length, ms", float),
    _shared("--shift-ms", ("shift_ms",), "service time: shift, ms", float, check=within(0.0)),
    _shared("--scale-ms", ("scale_ms",), "service time: scale of its random part, ms", float,
            check=within(0.0, lo_open=True)),
    _shared("--tail", ("tail",), "service-time tail: exponential or pareto",
            check=one_of(("exponential", "pareto"))),
    _shared("--deadline-ms", ("deadline_ms",), "GCC/BACC: N-S results or this deadline", float,
            check=within(0.0, lo_open=True, optional=True)),
    _shared("--max-wait-ms", ("max_wait_ms",), "longest wait for a group's k queries, ms", float,
            check=within(0.0)),
    _shared("--epochs", ("epochs",), "classifier training epochs, cached", int, check=count),
    _shared("--parm-epochs", ("parm_epochs",), "ParM parity-model epochs, cached", int,
            check=count),
    _shared("--model", ("model",), f"classifier: {', '.join(MODELS)}"),
    _shared("--dataset", ("dataset",), "data set: digits, fashion_mnist, mnist, cifar10 "
            "(run also takes localization, a regression workload)"),
    _shared("--data-path", ("data_path",), "directory of the data set's files"),
    _shared("--functions", ("functions",), "worker functions", str_list),
    _shared("--workloads", ("workloads",), "worker functions", str_list),
    _shared("--lam-enc", ("lam_enc",), "GCC encoder smoothing λ_enc", float, check=lam),
    _shared("--lam-dec", ("lam_dec",), "GCC decoder smoothing λ_dec", float, check=lam),
    _shared("--lam-enc-grid", ("lam_enc_grid",), "GCC λ_enc candidates", float_list,
            check=functools.partial(lam, optional=True)),
    _shared("--lam-dec-grid", ("lam_dec_grid",), "GCC λ_dec candidates", float_list,
            check=functools.partial(lam, optional=True)),
    own("--no-cache", "always train; write no checkpoint", key="use_cache", switch=False),
)  # fmt: skip
"""Every shared setting, in ``--help`` order."""

_BY_KEY = {key: s for s in SETTINGS for key in s.keys}

SEARCH_SETTINGS = (
    own("--restarts", "worst-case search chains", int, check=count),
    own("--proposals", "neighbours proposed per search step", int, check=count),
    own("--max-iters", "local-search steps", int, check=count),
    own("--patience", "search steps without gain before stopping", int, check=count),
)
"""The worst-case search flags: each sets its key of a command's ``search`` budget."""


def flag(key: str) -> str:
    """The flag of the shared run keyword ``key`` as errors name it (``"--workers/-N"``).

    Example:
        >>> flag("num_workers"), flag("num_trials"), flag("epochs")
        ('--workers/-N', '--masks/-M', '--epochs')
    """
    return _label(_BY_KEY[key])


def _label(s: Setting) -> str:
    return f"{s.flag}/{s.short}" if s.short else s.flag


def shared_sizes(k: str, n: str, s: str | None = None) -> Rule:
    """The size rule (``2 <= K <= N``, ``0 <= S <= N - 2``) of the shared run keywords ``k``,
    ``n`` and ``s``, naming their flags."""
    return sizes((k, flag(k)), (n, flag(n)), (s, flag(s)) if s else None)


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
        text = f"{text} ({'; '.join(shown)})"
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
        rules: the rules beyond each setting's own check: across settings (``2 <= K <= N``)
            or where a command restricts a shared setting its own way (its ``--codes``).
        finish: ``finish(config, toy) -> config`` turns the values of own flags that are not
            run keywords into run keywords (``poly``'s ``--n-low`` into its ``settings``).
    """

    defaults: Mapping[str, Any]
    toy: Mapping[str, Any] | None = None
    own: tuple[Setting, ...] = ()
    help: Mapping[str, str] = dataclasses.field(default_factory=dict)
    rules: tuple[Rule, ...] = ()
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

    def checks(self) -> tuple[Rule, ...]:
        """Every rule of the settings: each setting's own check (naming its flag as errors
        do), those of the search budget, then :attr:`rules`."""
        own = [s.check(key, _label(s)) for key, s in self.settings() if s.check]
        search = [s.check(key, s.flag) for key, s in self.search()]
        return (*own, *([nested("search", search)] if search else []), *self.rules)

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
