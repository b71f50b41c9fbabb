"""``python benchmark.py perf``: the evaluator's speed against DEAP and Operon (:mod:`evolve.report.perf`)."""
from __future__ import annotations

from pathlib import Path

import click

from data.paths import write_or_rescue
from evolve.cli.errors import CliCommand
from evolve.report.output import check_output
from evolve.report.perf import DEFAULT_SCALING, parse_sizes, render, run_perf, write_report


@click.command("perf", cls=CliCommand, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--data", "data_dir", type=click.Path(file_okay=False, path_type=Path), default="data",
              show_default=True, help="Dataset directory; without train/valid splits the default dataset "
                                      "is generated in memory.")
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path), default="results/perf.json",
              show_default=True, help="JSON report (written atomically).")
@click.option("--programs", type=click.IntRange(min=1), default=1000, show_default=True,
              help="Random programs for the node-evaluation measurements.")
@click.option("--population", type=click.IntRange(min=2), default=1000, show_default=True,
              help="Population of the end-to-end evolution.")
@click.option("--generations", type=click.IntRange(min=1), default=20, show_default=True,
              help="Generations of the end-to-end evolution (100 are extrapolated).")
@click.option("--sizes", default=",".join(str(s) for s in DEFAULT_SCALING), show_default=True,
              help="Token counts of the scaling measurement, comma-separated.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="Seed of the random programs and the evolution.")
@click.option("--generator-tokens", type=click.IntRange(min=1), default=1_000_000, show_default=True,
              help="Tokens generated to time the vocab generator.")
def perf(data_dir: Path, output: Path, programs: int, population: int, generations: int, sizes: str, seed: int,
         generator_tokens: int) -> None:
    """Measure evaluation speed against DEAP and Operon, evolution speed, scaling and memory ."""
    check_output(output, inputs=(data_dir,))
    report = run_perf(data_dir, programs, population, generations, parse_sizes(sizes), seed, generator_tokens,
                      progress=lambda msg: click.echo(f"perf: {msg}", err=True))
    write_or_rescue(lambda path: write_report(report, path), output, "option '--output'")
    click.echo(render(report), nl=False)
    click.echo(f"wrote {output}", err=True)
