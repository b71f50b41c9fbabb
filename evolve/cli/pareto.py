"""``python benchmark.py pareto``: rule families against evolved fronts (:mod:`evolve.commands.pareto.command`)."""
from __future__ import annotations

from pathlib import Path

import click

from evolve.cli.bounds import MAX_GAMMA
from evolve.traces.io import SPLITS
from evolve.cli.errors import CliCommand
from evolve.cli.inventory import run_references
from evolve.cli.output import FORMAT_JSON_OR_TABLE, echo_outputs, output_options
from evolve.cli.types import CommaList
from evolve.eval.objectives import DEFAULT_GAMMA
from evolve.report.pareto.curves import DEFAULT_BUDGETS, budget_key
from evolve.report.pareto.format import FORMATS
from evolve.commands.pareto.command import ParetoOptions, pareto_command
from evolve.report.output import resolve_format


@click.command("pareto", cls=CliCommand, references={"runs": run_references})
@click.option("--data", "data_dir", type=click.Path(file_okay=False, path_type=Path), default="data",
              show_default=True, help="Dataset directory (needs draft_index: the vocab model).")
@click.option("--split", type=click.Choice(SPLITS), default="test", show_default=True, help="Split to score.")
@click.option("--run", "runs", type=click.Path(path_type=Path), multiple=True,
              help="Run directory of `python -m evolve run` (front.json, else hall of fame + champion); repeatable.")
@click.option("--rule", "rules", multiple=True,
              help="Registered rule, family member FAMILY:VALUES (e.g. fuzzy_sd:T=0.1) or promoted champion to "
                   "score as its own point beside the curves; repeatable.")
@click.option("--budgets", type=CommaList(click.FloatRange(0.0, 1.0), distinct=True),
              default=",".join(budget_key(b) for b in DEFAULT_BUDGETS), show_default=True,
              help="Comma-separated TV-per-token budgets in [0, 1].")
@click.option("--gamma", type=click.IntRange(1, MAX_GAMMA), default=DEFAULT_GAMMA, show_default=True, help="Draft length.")
@output_options(FORMATS, FORMAT_JSON_OR_TABLE, "Write the result to FILE (atomically); the plot goes next to it as .png.")
@click.option("--plot/--no-plot", default=True, show_default=True,
              help="Write the PNG plot (next to --output, else results/pareto_<split>.png).")
@click.option("--learned/--no-learned", default=None,
              help="Fit the learned per-token rule on train (thresholds from valid) and show its curve "
                   "[default: on when scikit-learn is importable].")
@click.option("--costs", type=click.Path(dir_okay=False, path_type=Path), default=None, metavar="FILE",
              help="Cost file (JSON, as `benchmark.py perf --write-costs` writes): adds tokens per second and the speedup "
                   "over plain decoding of the fastest point at each budget.")
def pareto(**options) -> None:
    """Published rule families vs evolved fronts: tokens per call at each TV budget, hypervolumes, plot.

    Beside the curves: lossless block verification (on data with block_residual_mass) and the learned
    per-token rule.
    """
    opts = ParetoOptions(**options)
    comp, text, png_path = pareto_command(opts)
    echo_outputs(text, opts.output, f"{len(comp.curves)} curves", png_path)
    if resolve_format(opts.fmt, opts.output, FORMATS) == "json":  # the table carries its notes
        for note in comp.notes:
            click.echo(f"note: {note}", err=True)
