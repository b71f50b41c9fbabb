"""The sampling options, declared once: ``--temperature`` and, where the command truncates, ``--top-k`` and ``--top-p``.

``generate_data.py harvest`` and ``benchmark.py live`` sample the target and the drafter
(:class:`evolve.harvest.config.HarvestConfig` ``temperature``, ``top_k``, ``top_p``, applied by
:func:`evolve.engine.distributions.distributions` in Hugging Face transformers' and vLLM's order: temperature,
top-k, top-p); ``python -m evolve train-drafter`` samples the target's responses
(:class:`evolve.train.eagle.TrainSettings` ``temperature``). Each command says what it samples; the flags,
parameter names, types, bounds and defaults are the same everywhere.
"""
from __future__ import annotations

from typing import Callable

import click

from evolve.cli.bounds import MAX_VOCAB


def sampling_options(sampled: str, *, truncation: bool = True, note: str = "") -> Callable:
    """A decorator adding ``--temperature`` (float >= 0, default 1.0, 0 = greedy) and, with ``truncation``,
    ``--top-k`` (int in [0, :data:`evolve.cli.bounds.MAX_VOCAB`], default 0 = off) and ``--top-p`` (float in (0, 1], default 1.0 = off), in that order.

    Args:
        sampled: what the command samples, for the help (``"target and drafter"``, ``"the responses"``);
            the truncation options truncate both models' distributions.
        truncation: whether the command takes ``--top-k`` and ``--top-p``.
        note: the end of ``--top-k``'s help: what the truncation means for the command's output (e.g.
            ``"; the records describe the truncated distributions"``).
    """
    options = [click.option("--temperature", "temperature", default=1.0, show_default=True,
                            type=click.FloatRange(min=0.0), help=f"Sampling temperature of {sampled} (0 = greedy).")]
    if truncation:
        options += [
            click.option("--top-k", "top_k", default=0, show_default=True, type=click.IntRange(0, MAX_VOCAB),
                         help=f"Keep the K most likely tokens of both models' distributions after the temperature "
                              f"(0 = off){note}."),
            click.option("--top-p", "top_p", default=1.0, show_default=True,
                         type=click.FloatRange(0.0, 1.0, min_open=True),
                         help="Nucleus sampling: keep the smallest set of most likely tokens whose mass reaches P, "
                              "after the temperature and top-k (1 = off)."),
        ]

    def decorate(command: Callable) -> Callable:
        for option in reversed(options):
            command = option(command)
        return command

    return decorate


__all__ = ["sampling_options"]
