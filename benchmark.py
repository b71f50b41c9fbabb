"""Compare acceptance rules on a trace dataset: seed 004's benchmark table (thin CLI).

    python benchmark.py [--data DIR] [--split train|valid|test|all] [--champion FILE ...]
                        [--format table|csv|json|markdown] [--output FILE]

scores every baseline and every champion (``heuristics/champions/*.json`` and
the files given) and prints Heuristic, Accept%, Accuracy, Quality, Fitness and
Time, the expected metrics and each champion's change against
standard_rejection. The logic lives in :mod:`evolve.compare`.

Subcommands: ``python benchmark.py simulate ...`` (decode-loop simulator and
draft trees, :mod:`evolve.simulate`) and ``python benchmark.py perf ...``
(evaluator speed against DEAP and Operon, :mod:`evolve.perf`) and ``python benchmark.py pareto ...``
(published rule families against evolved fronts: tokens per call at TV budgets, :mod:`evolve.pareto`).
"""
from __future__ import annotations

from pathlib import Path

import click

from data.errors import CliGroup
from evolve import compare
from evolve.evaluator import DEFAULT_COST_RATIO
from evolve.pareto import pareto
from evolve.perf import perf
from evolve.simulate import simulate


@click.group(cls=CliGroup, invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--data", "data_dir", type=click.Path(file_okay=False, path_type=Path), default="data",
              show_default=True, help="Dataset directory (written by `python generate_data.py`).")
@click.option("--split", type=click.Choice(compare.SPLIT_CHOICES), default="test", show_default=True,
              help="Split to score; `all` scores train, valid and test.")
@click.option("--champion", "champions", type=click.Path(dir_okay=False, path_type=Path), multiple=True,
              help="Champion JSON file to compare as well (repeatable).")
@click.option("--champions-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Directory of promoted champions (*.json) [default: heuristics/champions/, or "
                   "$SPECDEC_CHAMPIONS_DIR].")
@click.option("--format", "fmt", type=click.Choice(compare.FORMATS), default=None,
              help="Output format [default: from the --output suffix (.json, .csv, .md), else table].")
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the result to FILE (atomically) instead of stdout.")
@click.option("--repeats", type=click.IntRange(min=1), default=compare.DEFAULT_REPEATS, show_default=True,
              help="Timed evaluations per rule after one warm-up; Time is the best of them.")
@click.option("--gamma", type=click.IntRange(min=1), default=None,
              help="Draft length for tokens per target call, speedup and TV per token [default: the split's "
                   "block length when it has draft_index].")
@click.option("--cost-ratio", type=click.FloatRange(min=0.0), default=DEFAULT_COST_RATIO, show_default=True,
              help="Draft/target cost ratio c of the speedup (Leviathan et al. 2023).")
@click.pass_context
def cli(ctx: click.Context, data_dir: Path, split: str, champions: tuple[Path, ...], champions_dir: Path,
        fmt: str | None, output: Path | None, repeats: int, gamma: int | None, cost_ratio: float) -> None:
    """Score every baseline and champion on a split and print seed 004's table."""
    if ctx.invoked_subcommand is not None:
        return
    comparison, text = compare.benchmark(data_dir, split, champions, champions_dir, fmt, output, repeats,
                                          gamma, cost_ratio)
    if output is None:
        click.echo(text if text.endswith("\n") else text + "\n", nl=False)
    else:
        click.echo(f"wrote {output} ({len(comparison.rows)} rows)", err=True)
    if compare.resolve_format(fmt, output) in ("csv", "json"):  # table and markdown carry their notes
        for note in comparison.notes:
            click.echo(f"note: {note}", err=True)


cli.add_command(simulate)
cli.add_command(perf)
cli.add_command(pareto)

if __name__ == "__main__":
    cli()
