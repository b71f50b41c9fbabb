"""``python benchmark.py live``: real speculative decoding with each rule on local models (:mod:`evolve.report.live`).

The drafter and sampling options are those of ``generate_data.py harvest`` (:mod:`evolve.cli.harvest`), and the
models are loaded the same way. torch and transformers (the optional extra ``models``) are imported only when the
command runs. Options: docs/tutorial/deploy.md.
"""
from __future__ import annotations

from pathlib import Path

import click

from evolve.harvest.config import DTYPES, HarvestConfig
from evolve.cli.errors import CliCommand
from evolve.cli.drafters import check_one_drafter, new_drafter_options
from evolve.cli.harvest import BACKEND_HELP
from evolve.engine.backends import BACKEND_NAMES
from evolve.cli.output import FORMAT_JSON_OR_TABLE, echo_outputs, output_options
from evolve.cli.types import LAYER_LIST, WINDOW
from evolve.report.live import FORMATS, LiveOptions, live_command


@click.command("live", cls=CliCommand, aliases={"champion": "champions"})
@click.option("--target", required=True, metavar="PATH",
              help="Target model: a local model directory (config.json, safetensors, tokenizer) or a .gguf file.")
@click.option("--draft", default=None, metavar="PATH",
              help="Draft model (directory or .gguf) sharing the target's tokenizer.")
@click.option("--draft-skip-layers", "skip_layers", type=LAYER_LIST, default=None, metavar="LIST",
              help="Self-speculation: the target skipping these 0-based decoder layers, e.g. '2,4,6-9'.")
@click.option("--draft-window", "window", type=WINDOW, default=None, metavar="SINK,RECENT",
              help="Self-speculation: the target attending only to the first SINK and the RECENT last tokens.")
@new_drafter_options
@click.option("--prompts", required=True, metavar="FILE",
              help="Text file, one prompt per line (the tokenizer's chat template is applied when it has one).")
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
@click.option("--backend", default="torch", show_default=True, type=click.Choice(BACKEND_NAMES), help=BACKEND_HELP)
@output_options(FORMATS, FORMAT_JSON_OR_TABLE)
@click.option("--costs", type=click.Path(dir_okay=False, path_type=Path), default=None, metavar="FILE",
              help="Cost file (JSON, as `benchmark.py perf --write-costs` writes): print the cost model's predicted tokens/s "
                   "and speedup for the same run beside the measured ones.")
@click.option("--progress/--no-progress", default=True, show_default=True, help="Say on stderr when a prompt is done.")
def live(target, draft, skip_layers, window, ngram, exit_layer, prompts, data_dir, split, rules, champions, gamma,
         max_new_tokens, temperature, top_k,
         top_p, seed, dtype, device, threads, backend, fmt, output, costs, progress) -> None:
    """Decode the prompts by speculative decoding with every rule and by plain decoding of the target; report
    tokens per target call, wall-clock tokens/s and speedup, and the exact TV damage per emitted token."""
    check_one_drafter(draft=draft, skip_layers=skip_layers, window=window, ngram=ngram,
                      exit_layer=exit_layer)
    config = HarvestConfig(
        target=target, prompts=prompts, draft=draft, skip_layers=skip_layers, window=window, ngram=ngram,
        exit_layer=exit_layer, gamma=gamma,
        max_new_tokens=max_new_tokens, temperature=temperature, seed=seed, dtype=dtype, device=device,
        threads=threads, top_k=top_k, top_p=top_p, backend=backend)

    def on_text(done: int, total: int) -> None:
        if progress:
            click.echo(f"live: {done}/{total} prompts done", err=True)

    report, text = live_command(LiveOptions(config=config, rules=rules, champions=champions, data_dir=data_dir,
                                            split=split, fmt=fmt, output=output, costs=costs), on_text)
    echo_outputs(text, output, f"{len(report.rows)} rows", None)
