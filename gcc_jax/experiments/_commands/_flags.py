"""The settings that several ``gcc-jax`` subcommands share, declared once: one flag name each.

A command's ``DEFAULTS`` (its run function's keywords) decides which of :data:`SETTINGS` it
gets: :func:`add_settings` adds the flag of every shared setting whose run keyword is among
them (``--workers/-N`` for ``workers`` or ``num_workers``), typed after its default (a tuple
of integers parses ``"20,40"``, an integer ``"20"``), with the default and the toy value in
its help. A ``search`` budget among the defaults gets the worst-case search flags
(:mod:`gcc_jax.experiments._commands._search`). :func:`settings_config` reads them back and
:func:`flag` names one in a rule. Old flag names are kept as aliases (:attr:`Setting.aliases`)
for one release.
"""

import argparse
import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from .._command import float_list, int_list, merge_config, str_list
from ._search import add_search_arguments, search_config

__all__ = [
    "MODELS",
    "SETTINGS",
    "Setting",
    "add_settings",
    "config_from",
    "flag",
    "settings_config",
    "shared_keys",
]

MODELS = ("mlp", "lenet5", "cnn", "vit")
"""The classifiers a command's ``--model`` offers (check it with
``choice("model", flag("model"), MODELS)``)."""


@dataclasses.dataclass(frozen=True)
class Setting:
    """One shared setting: its flag, short flag, old names, run keywords, type and help.

    Attributes:
        flag: the flag (``"--workers"``).
        short: its one-letter form (``"-N"``) or ``None``.
        aliases: older names accepted for one release (``("--num-workers",)``).
        keys: the run keywords it sets (``("workers", "num_workers")``): one per command.
        help: what it sets, without its default.
        type: the argparse type when the default does not tell (a ``None`` default).
    """

    flag: str
    short: str | None
    aliases: tuple[str, ...]
    keys: tuple[str, ...]
    help: str
    type: Callable[[str], Any] = str


def _s(flag, short, aliases, keys, text, kind=str) -> Setting:
    return Setting(flag, short, tuple(aliases), tuple(keys), text, kind)


SETTINGS = (
    _s("--workers", "-N", ["--num-workers"], ["workers", "num_workers"], "N workers", int_list),
    _s("--num-inputs", "-K", [], ["num_inputs"], "K inputs per coded computation", int),
    _s("--stragglers", "-S", [], ["stragglers"], "S stragglers", int_list),
    _s("--masks", "-M", ["--trials"], ["num_masks", "num_trials"], "random straggler sets", int),
    _s("--batches", None, [], ["num_batches"], "evaluation batches", int),
    _s("--cv-batches", None, [], ["num_cv_batches"], "held-out batches for GCC's λ CV", int),
    _s("--worst-case-batches", None, ["--worst-batches"], ["worst_case_batches"], "searched", int),
    _s("--epochs", None, [], ["epochs"], "classifier training epochs (cached)", int),
    _s("--parm-epochs", None, [], ["parm_epochs"], "ParM parity-model epochs (cached)", int),
    _s("--model", None, [], ["model"], f"classifier: {', '.join(MODELS)}"),
    _s("--dataset", None, [], ["dataset"], "data set: digits, fashion_mnist, mnist, cifar10"),
    _s("--data-path", None, [], ["data_path"], "directory of the data set's files"),
    _s("--functions", None, [], ["functions"], "worker functions", str_list),
    _s("--workloads", None, [], ["workloads"], "worker functions", str_list),
    _s("--lam-enc", None, [], ["lam_enc"], "GCC encoder smoothing λ_enc", float),
    _s("--lam-dec", None, [], ["lam_dec"], "GCC decoder smoothing λ_dec", float),
    _s("--lam-enc-grid", None, [], ["lam_enc_grid"], "GCC λ_enc candidates", float_list),
    _s("--lam-dec-grid", None, [], ["lam_dec_grid"], "GCC λ_dec candidates", float_list),
)
"""Every shared setting, in ``--help`` order."""

_BY_KEY = {key: s for s in SETTINGS for key in s.keys}


def flag(key: str) -> str:
    """The flag of the run keyword ``key`` as errors name it (``"--workers/-N"``).

    Example:
        >>> flag("num_workers"), flag("num_trials"), flag("epochs")
        ('--workers/-N', '--masks/-M', '--epochs')
    """
    s = _BY_KEY[key]
    return f"{s.flag}/{s.short}" if s.short else s.flag


def shared_keys(defaults: Mapping[str, Any]) -> tuple[str, ...]:
    """The run keywords of ``defaults`` that are shared settings."""
    return tuple(k for k in defaults if k in _BY_KEY)


def _show(value) -> str:
    if isinstance(value, list | tuple):
        return ",".join(_show(v) for v in value)
    return f"{value:g}" if isinstance(value, float) else str(value)


def _type(setting: Setting, value) -> Callable[[str], Any]:
    """The argparse type of a setting whose default is ``value``."""
    if isinstance(value, list | tuple) and value:
        item = value[0]
        return (
            str_list
            if isinstance(item, str)
            else int_list
            if isinstance(item, int)
            else (float_list)
        )
    if isinstance(value, bool) or value is None:
        return setting.type
    return type(value)


def add_settings(
    parser: argparse.ArgumentParser,
    defaults: Mapping[str, Any],
    toy: Mapping[str, Any] | None = None,
    **help: str,  # noqa: A002 (argparse's word)
) -> None:
    """Add the flag of every shared setting among ``defaults``' keys (dest: the run keyword,
    default ``None``), its help naming the default and the ``toy`` value; ``help`` replaces
    a setting's generic help for this command (``num_masks="iid patterns per draw"``)."""
    for key in shared_keys(defaults):
        s = _BY_KEY[key]
        value = defaults[key]
        text = help.get(key, s.help)
        shown = [f"default {_show(value)}"] if value is not None else []
        if toy and key in toy:
            shown.append(f"--toy: {_show(toy[key])}")
        if shown:
            text = f"{text} ({'; '.join(shown)})".strip()
        names = [s.flag, *([s.short] if s.short else []), *s.aliases]
        metavar = s.flag[2:].upper().replace("-", "_")
        parser.add_argument(
            *names, dest=key, type=_type(s, value), default=None, metavar=metavar, help=text
        )
    if isinstance(defaults.get("search"), Mapping):
        add_search_arguments(parser, defaults["search"])


def settings_config(
    args: argparse.Namespace,
    defaults: Mapping[str, Any],
    toy: Mapping[str, Any] | None,
    *extra: str,
) -> dict[str, Any]:
    """``defaults``, then ``toy`` (when given), then the shared flags and the flags ``extra``
    (dest names equal to run keywords) given explicitly; a ``search`` budget key by key."""
    keys = (*shared_keys(defaults), *extra)
    config = merge_config(defaults, toy, {k: getattr(args, k) for k in keys})
    if isinstance(defaults.get("search"), Mapping):
        config["search"] = search_config(args, config["search"])
    return config


def config_from(
    defaults: Mapping[str, Any], toy: Mapping[str, Any] | None, *extra: str
) -> Callable[[argparse.Namespace, bool], dict[str, Any]]:
    """A command's ``config(args, toy)``: :func:`settings_config` of ``defaults``, the ``toy``
    sizes when asked for, and the flags ``extra``."""

    def config(args: argparse.Namespace, is_toy: bool) -> dict[str, Any]:
        return settings_config(args, defaults, toy if is_toy else None, *extra)

    return config
