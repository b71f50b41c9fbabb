"""``python benchmark.py perf``: the evaluator's speed against DEAP and Operon (:mod:`evolve.report.perf.command`)."""
from __future__ import annotations

from pathlib import Path

import click

from evolve.traces.paths import write_or_rescue
from evolve.cli.errors import CliCommand
from evolve.report.output import check_output
from evolve.report.perf.scaling import DEFAULT_SCALING
from evolve.report.perf.command import parse_sizes, render, run_perf, write_report


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
@click.option("--islands", "islands", is_flag=True,
              help="Instead: the scale measurements (island runs on 1 and 2 local Dask workers, Dask's overhead "
                   "per epoch, a large dataset evaluated in chunks), merged into the --output report.")
@click.option("--island-tokens", type=click.IntRange(min=1), default=1_000_000, show_default=True,
              help="--islands: train tokens of the island runs.")
@click.option("--large-tokens", type=click.IntRange(min=1), default=100_000_000, show_default=True,
              help="--islands: tokens of the large dataset (generated on disk chunk by chunk, scored from disk).")
@click.option("--large-dir", type=click.Path(file_okay=False, path_type=Path), default="results/large",
              show_default=True, help="--islands: directory of the large dataset and its 1M-token reference; a "
                                      "dataset already there with the same settings is reused.")
@click.option("--large-only", is_flag=True, help="--islands: only the large dataset (no island runs).")
@click.option("--harvest", "harvest_model", default=None, metavar="MODEL",
              help="Instead: the harvester's tokens/s at batch 1 and 8 against transformers generate() of the "
                   "same target (a local model directory or .gguf), with the share of time in forward passes, "
                   "merged into the --output report.")
@click.option("--harvest-prompts", type=click.Path(dir_okay=False), default="prompts/smollm2_prompts.txt",
              show_default=True, help="--harvest: prompts file (the first --harvest-texts prompts are used).")
@click.option("--harvest-texts", type=click.IntRange(min=1), default=16, show_default=True,
              help="--harvest: texts generated at each batch size.")
@click.option("--harvest-tokens", type=click.IntRange(min=2), default=64, show_default=True,
              help="--harvest: tokens generated per text at most.")
@click.option("--threads", type=click.IntRange(min=1), default=None,
              help="--harvest: torch CPU threads (default: torch's choice).")
def perf(data_dir: Path, output: Path, programs: int, population: int, generations: int, sizes: str, seed: int,
         generator_tokens: int, islands: bool, island_tokens: int, large_tokens: int, large_dir: Path,
         large_only: bool, harvest_model: str | None, harvest_prompts: str, harvest_texts: int, harvest_tokens: int,
         threads: int | None) -> None:
    """Measure evaluation speed against DEAP and Operon, evolution speed, scaling and memory ."""
    check_output(output, inputs=(data_dir,))
    if harvest_model is not None:
        from evolve.report.perf.harvest import render_harvest, run_harvest_perf
        from evolve.report.perf.islands import merge_into

        figures = run_harvest_perf(harvest_model, harvest_prompts, harvest_texts, harvest_tokens, threads=threads,
                                   seed=seed, progress=lambda msg: click.echo(f"perf: {msg}", err=True))
        report = merge_into(output, figures)
        write_or_rescue(lambda path: write_report(report, path), output, "option '--output'")
        click.echo(render_harvest(figures), nl=False)
        click.echo(f"wrote {output}", err=True)
        return
    if islands:
        from evolve.traces.paths import check_output_dir
        from evolve.report.perf.islands import merge_into, render_scale, run_scale

        check_output_dir(large_dir, (data_dir, output), "option '--large-dir'")
        figures = run_scale(data_dir, population, generations, 10, seed, island_tokens, large_tokens, large_dir,
                            large_only, progress=lambda msg: click.echo(f"perf: {msg}", err=True))
        report = merge_into(output, figures)
        write_or_rescue(lambda path: write_report(report, path), output, "option '--output'")
        click.echo(render_scale(figures), nl=False)
        click.echo(f"wrote {output}", err=True)
        return
    report = run_perf(data_dir, programs, population, generations, parse_sizes(sizes), seed, generator_tokens,
                      progress=lambda msg: click.echo(f"perf: {msg}", err=True))
    write_or_rescue(lambda path: write_report(report, path), output, "option '--output'")
    click.echo(render(report), nl=False)
    click.echo(f"wrote {output}", err=True)
