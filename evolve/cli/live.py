"""``python benchmark.py live``: real speculative decoding with each rule on local models (:mod:`evolve.report.live`).

The drafter and sampling options are those of ``generate_data.py harvest`` (:mod:`evolve.cli.harvest`), and the
models are loaded the same way. torch and transformers (the optional extra ``models``) are imported only when the
command runs. Options: docs/tutorial/deploy.md.
"""
from __future__ import annotations

from pathlib import Path

import click

from evolve.harvest.config import DTYPES
from evolve.cli.drafters import DrafterCommand, backend_option, check_one_drafter, drafter_values
from evolve.cli.output import FORMAT_JSON_OR_TABLE, echo_outputs, output_options
from evolve.cli.types import CommaList
from evolve.report.live import FORMATS, LiveOptions, live_command


@click.command("live", cls=DrafterCommand, drafters_after="target", aliases={"champion": "champions"},
               inputs=("target", "prompts", "draft"))
@click.option("--target", required=True, metavar="PATH",
              help="Target model: a local model directory (config.json, safetensors, tokenizer) or a .gguf file.")
@click.option("--prompts", required=True, metavar="FILE",
              help="Text file, one prompt per line, or (a .jsonl file) Spec-Bench-style JSON Lines with 'turns' and "
                   "optional 'category' and 'question_id' (the tokenizer's chat template is applied when it has "
                   "one).")
@click.option("--categories", default=None, type=CommaList(unique_sorted=True), metavar="NAME,...",
              help="With a .jsonl prompts file: decode only the questions of these categories (with --data: the "
                   "categories it was harvested with).")
@click.option("--data", "data_dir", default=None, type=click.Path(file_okay=False, path_type=Path),
              help="Harvested dataset whose --split prompts to decode (the prompts file it was harvested from; "
                   "default: every prompt).")
@click.option("--split", default="test", show_default=True, type=click.Choice(["train", "valid", "test"]),
              help="With --data: the split whose prompts to decode.")
@click.option("--rule", "rules", multiple=True, metavar="NAME",
              help="Registered rule, family member FAMILY:VALUES (e.g. fuzzy_sd:T=0.1), promoted champion, or "
                   "block_verification (lossless block verification, Sun et al. 2024) to decode with (repeatable).")
@click.option("--champion", "champions", multiple=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Champion JSON file to decode with (repeatable; after the --rule rules).")
@click.option("--gamma", default=5, show_default=True, type=click.IntRange(min=1),
              help="Draft length (tokens per block).")
@click.option("--max-new-tokens", default=64, show_default=True, type=click.IntRange(min=2),
              help="Tokens generated per prompt.")
@click.option("--temperature", default=1.0, show_default=True, type=click.FloatRange(min=0.0),
              help="Sampling temperature of target and drafter (0 = greedy).")
@click.option("--top-k", default=0, show_default=True, type=click.IntRange(min=0),
              help="Top-k truncation of both models (0 = off).")
@click.option("--top-p", default=1.0, show_default=True, type=click.FloatRange(0.0, 1.0, min_open=True),
              help="Top-p truncation of both models (1 = off).")
@click.option("--seed", default=0, show_default=True, type=click.IntRange(min=0),
              help="Seed of every prompt's random stream.")
@click.option("--dtype", default="float32", show_default=True, type=click.Choice(DTYPES),
              help="Torch dtype the models run in (probabilities are always computed in float64).")
@click.option("--device", default="cpu", show_default=True, help="Torch device, e.g. cpu or cuda.")
@click.option("--threads", default=None, type=click.IntRange(min=1), metavar="N",
              help="Torch CPU threads (default: 1 on a machine with at most 2 cores, else torch's choice).")
@backend_option()
@output_options(FORMATS, FORMAT_JSON_OR_TABLE)
@click.option("--costs", type=click.Path(dir_okay=False, path_type=Path), default=None, metavar="FILE",
              help="Cost file (JSON, as `benchmark.py perf --write-costs` writes): print the cost model's predicted tokens/s "
                   "and speedup for the same run beside the measured ones.")
@click.option("--progress/--no-progress", default=True, show_default=True, help="Say on stderr when a prompt is done.")
def live(**options) -> None:
    """Decode the prompts by speculative decoding with every rule and by plain decoding of the target; report
    tokens per target call, wall-clock tokens/s and speedup, and the exact TV damage per emitted token."""
    progress = options.pop("progress")
    drafters = drafter_values(options)
    check_one_drafter(drafters)
    opts = LiveOptions.from_options(options, drafters)

    def on_text(done: int, total: int) -> None:
        if progress:
            click.echo(f"live: {done}/{total} prompts done", err=True)

    report, text = live_command(opts, on_text)
    echo_outputs(text, opts.output, f"{len(report.rows)} rows", None)
