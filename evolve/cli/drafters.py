"""The drafter options of ``harvest``, ``live`` and ``perf --write-costs``, and the one-drafter check.

Every option's parameter is the :class:`evolve.harvest.config.HarvestConfig` field of its
drafter (:data:`evolve.engine.drafters.DRAFTERS`, each class's ``field``); :func:`check_one_drafter`
names the options through the command's own parameters (:func:`evolve.cli.errors.flag_of`), so a
new drafter needs its option here and its class in the registry, nothing else.
"""
from __future__ import annotations

import click

from evolve.cli.errors import flag_of
from evolve.cli.types import LAYER_LIST, WINDOW, CommaList
from evolve.engine.drafters import DRAFTER_FIELDS, chosen_drafters
from evolve.errors import InputError

#: ``--draft-ngram``: ``MAX`` or ``MAX,MIN`` (n-gram sizes, MIN defaults to 1 as vLLM's prompt_lookup_min).
NGRAM = CommaList(click.IntRange(min=1), metavar="MAX[,MIN]")

NGRAM_OPTION = click.option(
    "--draft-ngram", "ngram", type=NGRAM, default=None,
    help="Prompt lookup (vLLM's ngram method): the draft continues the latest earlier occurrence of the "
         "last n tokens, n from MAX down to MIN (default 1); no match, no draft. E.g. '3,1'.")
EXIT_LAYER_OPTION = click.option(
    "--draft-exit-layer", "exit_layer", type=click.IntRange(min=1), default=None, metavar="K",
    help="Early exit (LayerSkip): the target's first K decoder layers, final norm and LM head, on the "
         "target's KV cache (Llama-like models).")


def new_drafter_options(f):
    """``--draft-ngram`` and ``--draft-exit-layer`` (harvest and live declare the other three themselves)."""
    return NGRAM_OPTION(EXIT_LAYER_OPTION(f))


def drafter_options(f):
    """All five drafter options (``--draft``, ``--draft-skip-layers``, ``--draft-window``, ``--draft-ngram``,
    ``--draft-exit-layer``)."""
    f = new_drafter_options(f)
    f = click.option("--draft-window", "window", type=WINDOW, default=None, metavar="SINK,RECENT",
                     help="Self-speculation: the target attending only to the first SINK and the RECENT last "
                          "tokens.")(f)
    f = click.option("--draft-skip-layers", "skip_layers", type=LAYER_LIST, default=None, metavar="LIST",
                     help="Self-speculation: the target skipping these 0-based decoder layers, e.g. '10,15,20'.")(f)
    return click.option("--draft", "draft", default=None, metavar="PATH",
                        help="Draft model (directory or .gguf) sharing the target's tokenizer.")(f)


def check_one_drafter(**values) -> None:
    """Refuse anything but exactly one drafter option (``values``: drafter field -> option value), in one
    line naming the options of the running command."""
    ctx = click.get_current_context(silent=True)

    def flag(field: str) -> str:
        return (flag_of(ctx.command, field) if ctx is not None else None) or field

    chosen = [flag(d.field) for d in chosen_drafters(values)]
    if len(chosen) != 1:
        what = "none was given" if not chosen else f"got {' and '.join(chosen)}"
        names = ", ".join(f"'{flag(f)}'" for f in DRAFTER_FIELDS)
        raise InputError(f"options {names}: choose exactly one drafter ({what})")


__all__ = ["EXIT_LAYER_OPTION", "NGRAM", "NGRAM_OPTION", "check_one_drafter", "drafter_options",
           "new_drafter_options"]
