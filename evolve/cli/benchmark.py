"""``python benchmark.py``: the comparison table and its subcommands ``simulate``, ``perf`` and ``pareto``.

With no subcommand it scores every registered rule and every champion on a
split (:mod:`evolve.commands.compare.table`), per question category too on data with categories
(:mod:`evolve.commands.compare.categories`).
"""
from __future__ import annotations

from pathlib import Path

import click

from evolve.cli.bounds import MAX_CONCURRENCY, MAX_GAMMA, MAX_REPEATS
from evolve.cli.types import CommaList
from evolve.cli.errors import CliGroup
from evolve.cli.output import FORMAT_BY_SUFFIX, echo_outputs, output_options
from evolve.cli.live import live
from evolve.cli.pareto import pareto
from evolve.cli.perf import perf
from evolve.cli.simulate import simulate
from evolve.cli.groups import groups
from evolve.cli.trees import trees
from evolve.eval.costs import DEFAULT_COST_RATIO
from evolve.report.compare.rows import DEFAULT_REPEATS, FORMATS, SPLIT_CHOICES
from evolve.commands.compare.categories import category_benchmark
from evolve.commands.compare.table import DEFAULT_DATA, BenchmarkOptions
from evolve.report.compare.format import printed_verdict
from evolve.report.compare.verdict import compute_verdict
from evolve.report.output import resolve_format
from evolve.errors import counted


@click.group(cls=CliGroup, invoke_without_command=True, aliases={"champion": "champions"})
@click.option("--data", "data_dir", type=click.Path(file_okay=False, path_type=Path), default=DEFAULT_DATA,
              help="Dataset directory (written by `python generate_data.py`) [default: the one the --champion files "
                   "were evolved on (their provenance), else data]; a champion's own dataset or a subset of it "
                   "(generate_data.py subset), checked by its splits' digests.")
@click.option("--split", type=click.Choice(SPLIT_CHOICES), default="test", show_default=True,
              help="Split to score; `all` scores train, valid and test.")
@click.option("--champion", "champions", type=click.Path(dir_okay=False, path_type=Path), multiple=True,
              help="Champion JSON file to compare as well (repeatable).")
@click.option("--champions-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Directory of promoted champions (*.json) [default: heuristics/champions/, or "
                   "$SPECDEC_CHAMPIONS_DIR].")
@output_options(FORMATS, FORMAT_BY_SUFFIX)
@click.option("--repeats", type=click.IntRange(1, MAX_REPEATS), default=DEFAULT_REPEATS, show_default=True,
              help="Timed evaluations per rule after one warm-up; Time is the best of them.")
@click.option("--gamma", type=click.IntRange(1, MAX_GAMMA), default=None,
              help="Draft length for tokens per target call, speedup and TV per token [default: the --champion "
                   "files' run's gamma where their run read one, else the split's block length when it has "
                   "draft_index]; another gamma than a champion's run's is refused.")
@click.option("--cost-ratio", type=click.FloatRange(min=0.0), default=None,
              help="Draft/target cost ratio c of the speedup without --costs: speedup = tokens per call / (gamma c + 1) "
                   f"(Leviathan et al. 2023) [default: {DEFAULT_COST_RATIO}]; refused beside --costs, which prices "
                   "every figure, and beside a --champion evolved under a cost file, whatever its value.")
@click.option("--costs", type=click.Path(dir_okay=False, path_type=Path), default=None, metavar="FILE",
              help="Cost file (JSON: target_forward_s per T = 1, 2, ..., draft_token_s, plain_token_s; "
                   "`benchmark.py perf --write-costs` measures one): adds tokens per second, takes the speedup from it, "
                   "and adds the verification-length rows best_fixed_gamma, confidence_threshold, "
                   "survival_prefix and the bound length_oracle [default: the cost file the --champion files were "
                   "evolved under, else the speedup of --cost-ratio]; a cost file of other measurements than a "
                   "champion's run's is refused. Without a cost file no column is in tokens per second.")
@click.option("--concurrency", type=CommaList(click.IntRange(1, MAX_CONCURRENCY), distinct=True), default=None, metavar="R,R,...",
              help="With --costs: throughput of every speculation row against R concurrent requests decoded together "
                   f"(the cost file's batch_forward_s curve), as speedup over plain decoding (each R at most "
                   f"{MAX_CONCURRENCY}).")
@click.option("--by-category", is_flag=True, default=False,
              help="On data with a category column (a Spec-Bench-style harvest): the per-category tables list the "
                   "13 categories as well as Spec-Bench's task groups and overall.")
@click.pass_context
def cli(ctx: click.Context, **options) -> None:
    """Score every registered rule and champion on a split and print the acceptance-quality benchmark table.

    A --champion file is scored in its run's context: on its own dataset (or a subset of it), at its run's gamma and
    under its run's cost file, each taken from its provenance when not given; a different one given is refused
    naming both."""
    if ctx.invoked_subcommand is not None:
        return
    by_category = options.pop("by_category")
    if ctx.get_parameter_source("data_dir") is click.core.ParameterSource.DEFAULT:
        options["data_dir"] = None  # the champions' own dataset, else the default (in_run_context)
    o = BenchmarkOptions(**{**options, "concurrency": tuple(options["concurrency"] or ())})
    comparison, text = category_benchmark(o, by_category)
    echo_outputs(text if text.endswith("\n") else text + "\n", o.output, counted(len(comparison.rows), "row"), None)
    if resolve_format(o.fmt, o.output, FORMATS) in ("csv", "json"):  # table and markdown carry their notes
        for note in comparison.notes:
            click.echo(f"note: {note}", err=True)
    verdict = compute_verdict(comparison)
    if verdict is not None and (o.output is not None or resolve_format(o.fmt, o.output, FORMATS) == "csv"):
        click.echo(printed_verdict(verdict.text), err=True)  # what stdout shows otherwise (table, markdown, json)


cli.add_command(simulate)
cli.add_command(perf)
cli.add_command(pareto)
cli.add_command(live)
cli.add_command(trees)
cli.add_command(groups)
