"""``python benchmark.py live``: real speculative decoding with each rule on local models (:mod:`evolve.commands.live`).

The drafter and sampling options are those of ``generate_data.py harvest`` (:mod:`evolve.cli.harvest`), and the
models are loaded the same way. torch and transformers (the optional extra ``models``) are imported only when the
command runs. Options: docs/tutorial/deploy.md.
"""
from __future__ import annotations

from pathlib import Path

import click

from evolve.harvest.config import DTYPES
from evolve.cli.drafters import DrafterCommand, backend_option, check_one_drafter, drafter_values, tree_width_option
from evolve.cli.output import FORMAT_JSON_OR_TABLE, echo_outputs, output_options
from evolve.cli.sampling import sampling_options
from evolve.cli.types import CommaList
from evolve.commands.run_context import contexts, resolve_costs, resolve_data, resolve_gamma
from evolve.errors import InputError, counted
from evolve.live.peers import PEERS
from evolve.commands.live import DEFAULT_REPLICATES, LiveOptions, live_command
from evolve.report.live import FORMATS
from evolve.cli.bounds import (MAX_HARVEST_GAMMA, MAX_LIVE_REPEATS, MAX_LOOKUP, MAX_NEW_TOKENS, MAX_REPLICATES,
                               MAX_SEED, MAX_THREADS, MAX_TREE_NODES)



#: Draft length of ``benchmark.py live`` when neither --gamma nor a champion's run gives one.
DEFAULT_GAMMA = 5


def _run_context(ctx: click.Context, options: dict) -> None:
    """Put the --champion files' run context into ``options`` (:mod:`evolve.commands.run_context`): their gamma and
    cost file where none is given; refused in one line naming both for another gamma, another cost file, or a --data
    dataset that is not a champion's (nor a subset of it)."""
    from evolve.commands.compare.table import champion_from_file

    files = [f for f in options["champions"] if Path(f).is_file()]  # a missing one is named where it is read
    for f in files:
        champion_from_file(f)
    found = contexts(files)
    given = ctx.get_parameter_source("gamma") is not click.core.ParameterSource.DEFAULT
    options["gamma"] = resolve_gamma(options["gamma"] if given else None, found) or options["gamma"]
    options["costs"] = resolve_costs(options["costs"], found)
    if options["data_dir"] is not None:
        resolve_data(options["data_dir"], found, options["data_dir"])


def _peer_k(text: str) -> tuple[str, int]:
    """(peer, K) of ``PEER=K``; InputError (one line) otherwise."""
    name, _, value = text.partition("=")
    if not value.isdigit() or not 1 <= int(value) <= MAX_LOOKUP:
        raise InputError(f"expected PEER=K with K a whole number in [1, {MAX_LOOKUP}] (value {text!r})",
                         param="peer_k")
    return name, int(value)


def _once(names, param: str) -> None:
    """Refuse a peer named twice (InputError naming ``param``): one would be kept silently."""
    seen: set = set()
    for name in names:
        if name in seen:
            raise InputError(f"names the peer {name!r} twice; give each peer once", param=param)
        seen.add(name)


@click.command("live", cls=DrafterCommand, drafters_after="target", aliases={"champion": "champions"},
               inputs=("target", "prompts"))
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
@click.option("--gamma", default=DEFAULT_GAMMA, type=click.IntRange(1, MAX_HARVEST_GAMMA),
              help=f"Draft length (tokens per block) [default: the --champion files' run's gamma where their run read "
                   f"one, else {DEFAULT_GAMMA}].")
@click.option("--tree-nodes", "tree_nodes", default=None, type=click.IntRange(1, MAX_TREE_NODES), metavar="N",
              help="Add draft-tree rows: eagle2_full (every call verifies a tree of at most N drafted nodes grown as "
                   "the tree harvest grows it, by SpecInfer) and a row per tree-shape --champion (the same tree pruned "
                   "by the shape). Torch backend; the --draft, --draft-skip-layers, --draft-exit-layer, --draft-eagle "
                   "or --draft-suffix drafter.")
@tree_width_option()
@click.option("--max-new-tokens", default=64, show_default=True, type=click.IntRange(2, MAX_NEW_TOKENS),
              help="Tokens generated per prompt.")
@sampling_options("target and drafter")
@click.option("--seed", default=0, show_default=True, type=click.IntRange(0, MAX_SEED),
              help="Seed of every prompt's random stream.")
@click.option("--dtype", default="float32", show_default=True, type=click.Choice(DTYPES),
              help="Torch dtype the models run in (probabilities are always computed in float64).")
@click.option("--device", default="cpu", show_default=True, help="Torch device, e.g. cpu or cuda.")
@click.option("--threads", default=None, type=click.IntRange(1, MAX_THREADS), metavar="N",
              help="Torch CPU threads (default: 1 on a machine with at most 2 cores, else torch's choice).")
@backend_option()
@output_options(FORMATS, FORMAT_JSON_OR_TABLE)
@click.option("--costs", type=click.Path(dir_okay=False, path_type=Path), default=None, metavar="FILE",
              help="Cost file (JSON, as `benchmark.py perf --write-costs` writes): print the cost model's predicted tokens/s "
                   "and speedup for the same run beside the measured ones [default: the cost file the --champion files "
                   "were evolved under, if any]. A file timed in an engine's own loop (perf --write-costs --engine "
                   "NAME) predicts that engine's rows instead (plain, its own prompt lookup and exported, each from "
                   "the calls it made there), and needs --peers NAME.")
@click.option("--repeats", default=1, show_default=True, type=click.IntRange(1, MAX_LIVE_REPEATS),
              help="Decode every prompt this many times with every row (the rows' order rotated by one per repeat); "
                   "report the median tokens/s with its min-max and a paired bootstrap interval of each speedup.")
@click.option("--peers", default="", metavar="NAMES",
              help=f"Comma-separated libraries whose shipped speculation is decoded beside the rules, greedily, each "
                   f"against its own plain decoding: {', '.join(PEERS)}.")
@click.option("--peer-k", "peer_k", multiple=True, metavar="PEER=K",
              help="A peer's tuned prompt-lookup draft length, e.g. transformers=3 (repeatable; default: tuned on "
                   "--tune-prompts).")
@click.option("--tune-prompts", default=None, type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
              help="Prompts (not the measured ones) on which each peer's prompt-lookup draft length is tuned.")
@click.option("--engine-plain/--no-engine-plain", "engine_plain", default=True, show_default=True,
              help="Decode, beside ours, the plain decoding of the engine the backend stands for (torch: transformers' "
                   "generate(); llama_cpp: llama-cpp-python's Llama.generate), so every speedup is printed beside the "
                   "engine's own baseline in tokens/s (decoded greedily whatever --temperature; on with --peers of that "
                   "engine anyway).")
@click.option("--bootstrap", default=DEFAULT_REPLICATES, show_default=True, type=click.IntRange(max=MAX_REPLICATES),
              metavar="N",
              help="Bootstrap replicates of the speedup intervals (at least 40).")
@click.option("--progress/--no-progress", default=True, show_default=True, help="Say on stderr when a prompt is done.")
@click.pass_context
def live(ctx: click.Context, **options) -> None:
    """Decode the prompts by speculative decoding with every rule and by plain decoding of the target; report
    tokens per target call, wall-clock tokens/s and speedup, and the exact TV damage per emitted token.

    A --champion file decodes in its run's context: at its run's gamma and, for the predicted figures, under its
    run's cost file, each taken from its provenance when not given; a --data dataset must be its own (or a subset
    of it), so its test prompts are held out. A different one given is refused naming both."""
    progress = options.pop("progress")
    _run_context(ctx, options)
    drafters = drafter_values(options)
    check_one_drafter(drafters)
    if options["tree_width"] is None:
        options["tree_width"] = 2
    elif options["tree_nodes"] is None:
        raise InputError("only with --tree-nodes (draft trees)", param="tree_width")
    options["peers"] = tuple(p.strip() for p in options["peers"].split(",") if p.strip())
    _once(options["peers"], "peers")
    options["peer_k"] = tuple(_peer_k(v) for v in options["peer_k"])
    _once([name for name, _ in options["peer_k"]], "peer_k")
    opts = LiveOptions.from_options(options, drafters)

    def on_text(done: int, total: int) -> None:
        if progress:
            click.echo(f"live: {done}/{total} prompts done", err=True)

    report, text = live_command(opts, on_text)
    echo_outputs(text, opts.output, counted(len(report.rows), "row"), None)
