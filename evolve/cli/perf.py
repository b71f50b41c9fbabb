"""``python benchmark.py perf``: the evaluator's speed against DEAP and Operon (:mod:`evolve.perf.command`)."""
from __future__ import annotations

from pathlib import Path

import click

from evolve.cli.bounds import (MAX_GENERATIONS, MAX_HARVEST_GAMMA, MAX_LARGE_TOKENS, MAX_NEW_TOKENS, MAX_PROGRAMS,
                               MAX_REPEATS, MAX_SEED, MAX_TEXTS, MAX_THREADS, MAX_TOKENS)
from evolve.cli.inventory import OutputPath
from evolve.cli.drafters import DrafterCommand, check_one_drafter, drafter_values
from evolve.engine.backends import backend_names
from evolve.cli.types import CommaList, LiveChoice, legacy_option
from evolve.perf.scaling import DEFAULT_SCALING
from evolve.perf.command import PerfOptions, perf_command
from evolve.perf.engine_loop import engine_names

#: The harvest parameters whose option here has another name (``--harvest`` is the target model).
ALIASES = {"target": "harvest_model", "prompts": "harvest_prompts", "max_new_tokens": "harvest_tokens"}


@click.command("perf", cls=DrafterCommand, aliases=ALIASES, inputs=("harvest_model", "backend_curves"))
@click.option("--data", "data_dir", type=click.Path(file_okay=False, path_type=Path), default="data",
              show_default=True, help="Dataset directory; without train/valid splits the default dataset "
                                      "is generated in memory.")
@click.option("--output", type=OutputPath(dir_okay=False, path_type=Path), default="results/perf.json",
              show_default=True, help="JSON report (written atomically).")
@click.option("--programs", type=click.IntRange(1, MAX_PROGRAMS), default=1000, show_default=True,
              help="Random programs for the node-evaluation measurements.")
@click.option("--population", type=click.IntRange(2, MAX_PROGRAMS), default=1000, show_default=True,
              help="Population of the end-to-end evolution.")
@click.option("--generations", type=click.IntRange(1, MAX_GENERATIONS), default=20, show_default=True,
              help="Generations of the end-to-end evolution (100 are extrapolated).")
@click.option("--sizes", type=CommaList(click.IntRange(1, MAX_TOKENS), distinct=True), default=",".join(str(s) for s in DEFAULT_SCALING),
              show_default=True, help=f"Token counts of the scaling measurement, comma-separated (each at most "
                                      f"{MAX_TOKENS}).")
@click.option("--seed", type=click.IntRange(0, MAX_SEED), default=0, show_default=True,
              help="Seed of the random programs and the evolution.")
@click.option("--generator-tokens", type=click.IntRange(1, MAX_TOKENS), default=1_000_000, show_default=True,
              help="Tokens generated to time the vocab generator.")
@click.option("--islands", "islands", is_flag=True,
              help="Instead: the scale measurements (island runs on 1 and 2 local Dask workers, Dask's overhead "
                   "per epoch, a large dataset evaluated in chunks), merged into the --output report.")
@click.option("--island-tokens", type=click.IntRange(1, MAX_TOKENS), default=1_000_000, show_default=True,
              help="--islands: train tokens of the island runs.")
@click.option("--large-tokens", type=click.IntRange(1, MAX_LARGE_TOKENS), default=100_000_000, show_default=True,
              help="--islands: tokens of the large dataset (generated on disk chunk by chunk, scored from disk).")
@click.option("--large-dir", type=OutputPath(file_okay=False, path_type=Path), default="results/large",
              show_default=True, help="--islands: directory of the large dataset and its 1M-token reference; a "
                                      "dataset already there with the same settings is reused.")
@click.option("--large-only", is_flag=True, help="--islands: only the large dataset (no island runs).")
@click.option("--harvest", "harvest_model", default=None, metavar="MODEL",
              help="Instead: the harvester's tokens/s at batch 1 and 8 against transformers generate() of the "
                   "same target (a local model directory or .gguf), with the share of time in forward passes, "
                   "merged into the --output report.")
@click.option("--harvest-prompts", type=click.Path(dir_okay=False), default="prompts/smollm2_prompts.txt",
              show_default=True, help="--harvest: prompts file (the first --harvest-texts prompts are used).")
@click.option("--harvest-texts", type=click.IntRange(1, MAX_TEXTS), default=16, show_default=True,
              help="--harvest: texts generated at each batch size.")
@click.option("--harvest-tokens", type=click.IntRange(2, MAX_NEW_TOKENS), default=64, show_default=True,
              help="--harvest: tokens generated per text at most.")
@click.option("--threads", type=click.IntRange(1, MAX_THREADS), default=None,
              help="--harvest, --write-costs: torch CPU threads (default: 1 on a machine with at most 2 cores, else "
                   "torch's choice).")
@click.option("--backend-curves", "backend_curves", default=None, metavar="GGUF",
              help="Instead: one target forward over T = 1..8 new tokens and plain decoding's tokens/s on the "
                   "torch and llama_cpp backends, 1 and 2 threads, interleaved (needs llama-cpp-python), merged "
                   "into the --output report.")
@click.option("--curve-repeats", type=click.IntRange(1, MAX_REPEATS), default=15, show_default=True,
              help="--backend-curves: repeats of every forward (the median is reported).")
@click.option("--write-costs", "costs", type=OutputPath(dir_okay=False, path_type=Path), default=None, metavar="FILE",
              help="Instead: write the cost file (target forward seconds over T = 1..--gamma-max + 1 new tokens, "
                   "seconds per drafted token, plain decoding's seconds per token) of the --harvest MODEL target "
                   "and the drafter option given, measured here (median of --cost-repeats, interleaved).")
@click.option("--backend", default="torch", show_default=True, type=LiveChoice(backend_names),
              help="--write-costs: what runs the models (as for harvest and live).")
@click.option("--engine", default=None, type=click.Choice(engine_names()),
              help="--write-costs: time the figures inside this engine's own decoding loop (llama-cpp-python's "
                   "Llama.generate, transformers' generate(): plain decoding, an iteration verifying T-1 replayed "
                   "drafts, the engine's own drafter) instead of the project's --backend, so that predictions under "
                   "the file are that engine's speed; the file records the engine and its version.")
@click.option("--gamma-max", type=click.IntRange(1, MAX_HARVEST_GAMMA), default=6, show_default=True,
              help="--write-costs: largest draft length (forwards over 1..gamma_max + 1 tokens).")
@click.option("--cost-repeats", type=click.IntRange(1, MAX_REPEATS), default=7, show_default=True,
              help="--write-costs: repeats of every measurement (the median is kept).")
@legacy_option("--costs", "perf --costs FILE is now perf --write-costs FILE (it writes a cost file; the --costs of "
                         "benchmark.py, trees, pareto and simulate reads one)")
def perf(**options) -> None:
    """Measure evaluation speed against DEAP and Operon, evolution speed, scaling and memory ."""
    drafters = drafter_values(options)
    if options["costs"] is not None:
        check_one_drafter(drafters)
    elif options["engine"] is not None:
        raise click.UsageError("--engine goes with --write-costs FILE (it says where the cost file is timed)")
    opts = PerfOptions(**options, drafters={k: v for k, v in drafters.items() if v is not None})
    _, text = perf_command(opts, progress=lambda msg: click.echo(f"perf: {msg}", err=True))
    click.echo(text, nl=False)
    click.echo(f"wrote {opts.costs if opts.costs is not None else opts.output}", err=True)
