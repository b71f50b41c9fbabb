"""``python generate_data.py harvest``: trace datasets from local language models (:mod:`evolve.harvest.loop`).

The command object :data:`harvest` is added to the group of :mod:`evolve.cli.generate`. It
builds a :class:`evolve.harvest.config.HarvestConfig` from the options, runs the harvest and prints
the per-split statistics. torch and transformers (the optional extra ``models``) are imported only
when the command runs. Exit codes: 0 when every prompt is done, 130 after Ctrl-C (the finished
texts are kept and the same command resumes), 2 for bad input. Options and files:
docs/reference/commands-data.md and docs/reference/schema.md.
"""
from __future__ import annotations

import click

from evolve.cli.bounds import (MAX_BATCH, MAX_HARVEST_GAMMA, MAX_NEW_TOKENS, MAX_SEED, MAX_SHARDS, MAX_THREADS,
                               MAX_TREE_NODES)
from evolve.cli.inventory import OutputPath
from evolve.cli.types import CommaList
from evolve.cli.drafters import DrafterCommand, backend_option, check_one_drafter, drafter_values, tree_width_option
from evolve.cli.sampling import sampling_options
from evolve.traces.synth.generate import format_stats
from evolve.harvest.config import DTYPES, HarvestConfig
from evolve.errors import InputError

EXIT_INTERRUPTED = 130


@click.command("harvest", cls=DrafterCommand, drafters_after="target", inputs=("target", "prompts"))
@click.option("--target", "target", required=True, metavar="PATH",
              help="Target model: a local model directory (config.json, safetensors, tokenizer) or a .gguf file.")
@click.option("--prompts", "prompts", required=True, metavar="FILE",
              help="Text file, one prompt per line, or (a .jsonl file) Spec-Bench-style JSON Lines: one object per "
                   "line with 'turns' (list of user turns) and optional 'category' and 'question_id'; later turns "
                   "follow the model's answers. The tokenizer's chat template is applied when it has one. A prompt "
                   "(with its question's earlier turns and answers) longer than the target's context leaves beside "
                   "--max-new-tokens and one call's drafts is refused, naming its line; nothing is truncated.")
@click.option("--categories", default=None, type=CommaList(unique_sorted=True), metavar="NAME,...",
              help="With a .jsonl prompts file: harvest only the questions of these categories.")
@click.option("--gamma", default=5, show_default=True, type=click.IntRange(1, MAX_HARVEST_GAMMA),
              help="Draft length (tokens per block).")
@click.option("--max-new-tokens", default=128, show_default=True, type=click.IntRange(2, MAX_NEW_TOKENS),
              help="Tokens generated per prompt.")
@sampling_options("target and drafter", note="; the records describe the truncated distributions")
@click.option("--batch-size", "batch_size", default=1, show_default=True, type=click.IntRange(1, MAX_BATCH),
              help="Texts decoded together (padded batch; a free row takes the next prompt at once). "
                   "A text's records do not depend on it beyond float round-off.")
@click.option("--seed", default=0, show_default=True, type=click.IntRange(0, MAX_SEED),
              help="Seed of the split assignment and of every text's random stream.")
@click.option("--out", default="data/harvested", show_default=True, metavar="DIR", type=OutputPath(),
              help="Dataset directory; running the same command again resumes an interrupted harvest.")
@click.option("--dtype", default="float32", show_default=True, type=click.Choice(DTYPES),
              help="Torch dtype the models run in (probabilities are always computed in float64).")
@click.option("--device", default="cpu", show_default=True, help="Torch device, e.g. cpu or cuda.")
@click.option("--threads", default=None, type=click.IntRange(1, MAX_THREADS), metavar="N",
              help="Torch CPU threads (default: 1 on a machine with at most 2 cores, else torch's choice); fix it "
                   "for bit-identical reruns.")
@click.option("--shards", default=None, type=click.IntRange(1, MAX_SHARDS), metavar="S",
              help="Split the prompts into S shards harvested as Dask tasks (each worker loads the models once); "
                   "the dataset equals a one-process harvest's. Without it: one process.")
@click.option("--scheduler", default="local", show_default=True, envvar="DASK_SCHEDULER_ADDRESS",
              metavar="ADDRESS|local",
              help="With --shards: the Dask scheduler (e.g. tcp://host:8786; also $DASK_SCHEDULER_ADDRESS), or "
                   "local for a cluster on this machine.")
@click.option("--tree-nodes", "tree_nodes", default=None, type=click.IntRange(1, MAX_TREE_NODES), metavar="N",
              help="Draft trees instead of chains: every target call verifies a tree of at most N drafted nodes, "
                   "grown best-first (EAGLE-2 style, children drawn i.i.d. from the drafter), and the text advances "
                   "by SpecInfer's lossless tree verification. Writes {split}.trees.parquet (one row per node) "
                   "besides the records of each tree's first path; --gamma is not used. Torch backend, batch "
                   "size 1, temperature > 0, the --draft, --draft-skip-layers, --draft-exit-layer or --draft-eagle drafter; "
                   "or --draft-suffix, whose trees are arctic-inference's own (distinct children, any temperature) "
                   "(docs/reference/trees.md).")
@tree_width_option()
@backend_option()
@click.option("--progress/--no-progress", default=True, show_default=True, help="Show the progress bar.")
def harvest(**options):
    """Harvest genuine speculative-decoding traces from a local target model and a drafter.

    One record per drafted token (all gamma drafts of every block, also past the first
    rejection); the text advances by the standard rule, so it is distributed as the target's.
    With --tree-nodes: draft trees verified by SpecInfer (also lossless), one record per node of
    each tree's first path and one row per node in {split}.trees.parquet.
    Splits are by question, within each category when the prompts have categories. Ctrl-C keeps every finished text; the same command resumes.
    """
    shards, scheduler, progress = options.pop("shards"), options.pop("scheduler"), options.pop("progress")
    drafters = drafter_values(options)
    check_one_drafter(drafters)
    if options["tree_width"] is None:
        options["tree_width"] = 2
    elif options["tree_nodes"] is None:
        raise InputError("only with --tree-nodes (a tree harvest)", param="tree_width")
    return run_harvest(HarvestConfig(**options, **drafters), shards, scheduler, progress)


def run_harvest(config: HarvestConfig, shards: int | None, scheduler: str | None, progress: bool) -> int:
    """Check ``config``, run the harvest (in ``shards`` Dask tasks on ``scheduler`` when ``shards`` is given) and
    print its statistics; returns the exit code (0, or :data:`EXIT_INTERRUPTED` after Ctrl-C).
    Raises InputError naming the field of a bad setting."""
    from evolve.engine.backends import get_backend
    from evolve.harvest.loop import harvest as run

    config.check()
    get_backend(config.backend).check(config)
    if shards is not None:
        from evolve.cluster import ClusterOptions
        from evolve.harvest.shards import harvest_sharded

        where = ClusterOptions(scheduler=None if scheduler in (None, "", "local") else scheduler)
        result = harvest_sharded(config, shards, where, progress=progress)
    else:
        result = run(config, progress=progress)
    if result.consolidated:
        click.echo(format_stats(result.stats))
        click.echo(format_harvest_stats(result.stats))
    if result.interrupted:
        saved = "consolidated" if result.consolidated else "kept (not every split has a finished text yet)"
        click.echo(f"interrupted: {result.texts_done}/{result.texts_total} texts done and {saved} in {result.out}; "
                   f"run the same command again to resume", err=True)
        return EXIT_INTERRUPTED
    click.echo(f"{result.texts_done}/{result.texts_total} texts done, {result.tokens_generated} tokens generated "
               f"in this run "
               f"({result.tokens_generated / result.seconds if result.seconds > 0 else 0.0:.1f} tok/s)")
    click.echo(str(result.out))
    return 0


def format_harvest_stats(stats: dict[str, dict]) -> str:
    """Per-split harvest figures: texts, generated tokens, tokens per target call (mean acceptance length),
    texts ended by EOS; for a tree harvest also trees, mean nodes and deepest depth per tree, and the mean exact expected tokens per call."""
    rows = [f"{'split':<6} {'texts':>6} {'generated':>9} {'mean acc. len':>13} {'ended by EOS':>12}"]
    for name, s in stats.items():
        rows.append(f"{name:<6} {s['texts']:>6d} {s['generated_tokens']:>9d} {s['tokens_per_target_call']:>13.3f} "
                    f"{s['eos_finished']:>12d}")
    if all("trees" in s for s in stats.values()) and stats:
        rows.append(f"{'split':<6} {'trees':>6} {'nodes/tree':>10} {'max depth':>9} {'E[acc. len] SpecInfer':>21} "
                    f"{'E[acc. len] traversal':>21}")
        for name, s in stats.items():
            t = s["trees"]
            rows.append(f"{name:<6} {t['trees']:>6d} {t['mean_nodes']:>10.2f} {t['mean_max_depth']:>9.2f} "
                        f"{t['mean_specinfer_tokens']:>21.3f} {t['mean_traversal_tokens']:>21.3f}")
    return "\n".join(rows)
