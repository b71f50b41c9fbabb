"""``python -m evolve train-drafter``: train an EAGLE-3-style head for a local target (:mod:`evolve.train.eagle`).

The head is written into ``--out`` in the published layout (``config.json``, ``model.safetensors``), which
``--draft-eagle OUT`` of ``harvest``, ``live`` and ``perf --write-costs`` loads. Progress lines go to stderr;
the same command resumes an interrupted run from ``OUT/train_state.pt``. Bad input gives one line
``error: ...`` and exit code 2.
"""
from __future__ import annotations

import click

from evolve.cli.bounds import MAX_BATCH, MAX_NEW_TOKENS, MAX_SEED, MAX_THREADS, MAX_TTT, MAX_VOCAB
from evolve.cli.errors import CliCommand
from evolve.cli.inventory import OutputPath
from evolve.cli.sampling import sampling_options
from evolve.train.eagle import MAX_STEPS


@click.command("train-drafter", cls=CliCommand, inputs=("target", "prompts"))
@click.option("--target", required=True, metavar="PATH",
              help="Target model: a local model directory (config.json, safetensors, tokenizer) or a .gguf file.")
@click.option("--prompts", required=True, metavar="FILE",
              help="Prompt file, one prompt per line: the target's responses to them are the training data.")
@click.option("--out", required=True, metavar="DIR", type=OutputPath(file_okay=False),
              help="Output directory (the head, its data, its checkpoint).")
@click.option("--max-new-tokens", default=128, show_default=True, type=click.IntRange(1, MAX_NEW_TOKENS),
              help="Tokens of each response.")
@sampling_options("the responses", truncation=False)
@click.option("--draft-vocab", default=4096, show_default=True, type=click.IntRange(1, MAX_VOCAB),
              help="Draft vocabulary size D: the D most frequent tokens of the responses.")
@click.option("--steps", default=2000, show_default=True, type=click.IntRange(1, MAX_STEPS),
              help="Optimiser steps (one text each).")
@click.option("--ttt", default=3, show_default=True, type=click.IntRange(1, MAX_TTT),
              help="Unrolled draft steps per position (training-time test).")
@click.option("--lr", default=1e-3, show_default=True, type=click.FloatRange(min=0.0, min_open=True),
              help="AdamW learning rate.")
@click.option("--seed", default=0, show_default=True, type=click.IntRange(0, MAX_SEED),
              help="Seed of the responses, the initial weights and the order of the texts.")
@click.option("--save-every", default=100, show_default=True, type=click.IntRange(1, MAX_STEPS),
              help="Steps between checkpoints (and progress lines).")
@click.option("--response-batch", default=1, show_default=True, type=click.IntRange(1, MAX_BATCH),
              help="Prompts per generate call when making the responses (left-padded; faster on a CPU).")
@click.option("--threads", default=None, type=click.IntRange(1, MAX_THREADS), metavar="N", help="Torch CPU threads.")
def train_drafter(**options) -> None:
    """Train an EAGLE-3-style draft head on the target's own responses to PROMPTS; write it into OUT."""
    from evolve.train.eagle import TrainSettings, train

    result = train(TrainSettings(**options), say=lambda msg: click.echo(msg, err=True))
    click.echo(f"wrote {result['out']} ({result['steps']} steps, loss {result['loss']:.4f}, top-1 agreement "
               f"{result['agreement']:.3f})")
