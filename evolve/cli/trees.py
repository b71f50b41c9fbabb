"""``python benchmark.py trees``: draft-tree verification and tree shapes (:mod:`evolve.commands.trees`)."""
from __future__ import annotations

from pathlib import Path

import click

from evolve.cli.bounds import MAX_REPLICATES
from evolve.cli.errors import CliCommand
from evolve.cli.output import FORMAT_BY_SUFFIX, echo_outputs, output_options
from evolve.eval.bootstrap import MIN_REPLICATES
from evolve.commands.trees import ALL_SPLITS, TreesOptions, trees_command
from evolve.report.trees import FORMATS, bootstrap_caveats
from evolve.errors import counted


@click.command("trees", cls=CliCommand)
@click.option("--data", "data_dir", type=click.Path(file_okay=False, path_type=Path), default="data",
              help="Dataset directory with tree tables (generate_data.py harvest --tree-nodes N) [default: the one the "
                   "--champion files were evolved on, else data]; a champion's own dataset or a subset of it.")
@click.option("--split", type=click.Choice((*ALL_SPLITS, "all")), default="test", show_default=True,
              help="Split to score; `all` scores train, valid and test.")
@click.option("--tune-split", type=click.Choice(ALL_SPLITS), default="valid", show_default=True,
              help="Split the named shapes' settings (depth, width, budget) are chosen on.")
@click.option("--champion", "champions", type=click.Path(dir_okay=False, path_type=Path), multiple=True,
              help="Champion JSON file of kind tree-shape (python -m evolve run --evolve tree-shape) or relaxation "
                   "(verifies every tree against the mixture (1 - w) p + w q); repeatable.")
@click.option("--costs", type=click.Path(dir_okay=False, path_type=Path), default=None, metavar="FILE",
              help="Cost file (benchmark.py perf --write-costs; a tree of n nodes costs a target forward of n + 1 tokens) "
                   "[default: the cost file the --champion files were evolved under, else flat verification, "
                   "drafts at 0.05 of a target step]; another one than a champion's run's is refused.")
@click.option("--bootstrap", type=click.IntRange(0, MAX_REPLICATES), default=0, show_default=True, metavar="N",
              help="Add each row's tokens per second over the fixed_width row's, with a 95% interval from N paired "
                   f"bootstrap replicates over the split's texts (seeded; 0: none; else N >= {MIN_REPLICATES}, one "
                   "replicate in each 2.5% tail; a split of fewer than 10 texts gets a caveat).")
@output_options(FORMATS, FORMAT_BY_SUFFIX)
@click.pass_context
def trees(ctx: click.Context, **options) -> None:
    """Tokens per call and per second of draft trees: SpecInfer and traversal verification of the harvested trees,
    the chain, fixed-width, EAGLE-2, Medusa-style and adaptive-width shapes, and evolved tree shapes.

    A --champion file is scored in its run's context: on its own dataset (or a subset of it) and under its run's
    cost file, each taken from its provenance when not given; a different one given is refused naming both."""
    if ctx.get_parameter_source("data_dir") is click.core.ParameterSource.DEFAULT:
        options["data_dir"] = None  # the champions' own dataset, else data
    rows, text = trees_command(TreesOptions(**options))
    output, fmt = options["output"], options["fmt"]
    echo_outputs(text, output, counted(len(rows), "row"), None)
    if output is not None or (fmt or "table") in ("json", "csv"):  # the table's footnote has them otherwise
        for caveat in bootstrap_caveats(rows):
            click.echo(f"caveat: {caveat}", err=True)
