"""``python benchmark.py simulate``: the decode-loop simulator and draft trees (:mod:`evolve.commands.simulate`)."""
from __future__ import annotations

from pathlib import Path

import click

from evolve.cli.errors import CliCommand
from evolve.cli.output import ProgressLines, FORMAT_JSON_OR_TABLE, echo_outputs, output_options
from evolve.cli.types import CommaList
from evolve.commands.run_context import contexts, resolve_costs, resolve_gamma
from evolve.eval.costs import DEFAULT_COST_RATIO, ratio_costs
from evolve.commands.simulate import MAX_LENGTH, MAX_SAMPLES, SimulateOptions, simulate_command
from evolve.report.simulate import FORMATS
from evolve.sim.decoding import MAX_GAMMA
from evolve.sim.verification import FLY_MAX_WINDOW, FLY_THRESHOLD, FLY_TOP_K, VERIFICATIONS
from evolve.errors import counted

#: Draft length of the simulation when neither --gamma nor a champion's run gives one.
DEFAULT_GAMMA = 5
#: The lower layers' parameters whose option here has another name.
ALIASES = {"vocab_size": "vocab", "budget": "budgets"}


@click.command("simulate", cls=CliCommand, aliases=ALIASES)
@click.option("--rule", "rule_name", default=None,
              help="Registered rule, family member FAMILY:VALUES (e.g. fuzzy_sd:T=0.1), promoted champion or "
                   "block_verification (= --verify block) to simulate [default: standard_rejection].")
@click.option("--champion", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Champion JSON file to simulate instead of --rule.")
@click.option("--gamma", type=click.IntRange(1, MAX_GAMMA), default=DEFAULT_GAMMA,
              help=f"Draft length (tokens drafted per target call) [default: the --champion's run's gamma where its run "
                   f"read one, else {DEFAULT_GAMMA}]; another gamma than the champion's run's is refused.")
@click.option("--lengths", type=CommaList(click.IntRange(1, MAX_LENGTH), distinct=True), default="50,100,200,500,1000",
              show_default=True, help=f"Comma-separated generation lengths (tokens, each at most {MAX_LENGTH}).")
@click.option("--samples", type=click.IntRange(1, MAX_SAMPLES), default=20, show_default=True,
              help="Sequences per length.")
@click.option("--vocab", type=click.IntRange(2, 1_000_000), default=1000, show_default=True,
              help="Vocabulary size of the synthetic models.")
@click.option("--cost-ratio", type=click.FloatRange(min=0.0), default=DEFAULT_COST_RATIO, show_default=True,
              help="Cost of one draft step in target calls.")
@click.option("--seed", type=click.IntRange(0, 2 ** 63 - 1), default=0, show_default=True,
              help="Seed of the models and of the decoding.")
@click.option("--verify", type=click.Choice(VERIFICATIONS), default=None,
              help="Chain verification: token-wise, block verification (lossless, Sun et al. 2024) or FLy (lossy "
                   "look-ahead, Li et al. 2025); block and fly take the standard rule only [default: token; block "
                   "for a relaxation champion, which runs as block verification against (1 - w) p + w q].")
@click.option("--fly-window", type=click.IntRange(0, MAX_GAMMA), default=None,
              help=f"--verify fly: native decisions checked after a deferred rejection "
                   f"[default: min({FLY_MAX_WINDOW}, gamma - 1)].")
@click.option("--fly-threshold", type=click.FloatRange(min=0.0), default=None,
              help=f"--verify fly: entropy gate, nats of the top-k target probabilities [default: {FLY_THRESHOLD:g}].")
@click.option("--fly-top-k", type=click.IntRange(1, 1_000_000), default=None,
              help=f"--verify fly: target probabilities in the entropy gate [default: {FLY_TOP_K}].")
@click.option("--relaxation", default=None, metavar="W",
              help="--verify block: verify against (1 - w) p + w q, w a constant in [0, 1] or an expression over "
                   "prefix-level features, clamped to [0, 1] per position (relaxed block verification; lossy, damage "
                   "w (1 - overlap) per emitted position).")
@output_options(FORMATS, FORMAT_JSON_OR_TABLE, "Write the result to FILE (atomically); the chart goes next to it as .png.")
@click.option("--plot/--no-plot", default=True, show_default=True,
              help="Write the bar chart PNG (next to --output, else into results/).")
@click.option("--trees", is_flag=True, help="Compare chains and draft trees at equal node budgets instead.")
@click.option("--budgets", type=CommaList(click.IntRange(1, 256), distinct=True), default="4,8,16", show_default=True,
              help="--trees: node budgets per target call (each at most 256).")
@click.option("--widths", type=CommaList(click.IntRange(1, 64)), default="3,1", show_default=True,
              help="--trees: children per node by level for fixed trees and Medusa heads (the last repeats; each at "
                   "most 64).")
@click.option("--max-width", type=click.IntRange(1, 64), default=3, show_default=True,
              help="--trees: maximal adaptive width.")
@click.option("--costs", type=click.Path(dir_okay=False, path_type=Path), default=None, metavar="FILE",
              help="Cost file (JSON, as `benchmark.py perf --write-costs` writes): each row of the sweep gains the "
                   "predicted tokens per second and speedup over plain decoding.")
@click.option("--progress/--no-progress", default=True,
              help="--trees: a line on stderr every few seconds (configurations done) [default: on].")
@click.pass_context
def simulate(ctx: click.Context, **options) -> None:
    """Simulate speculative decoding over synthetic draft/target models (length sweep or --trees).

    A --champion is simulated in its run's context: at its run's gamma and under its run's cost file, each taken from
    its provenance when not given; a different one given is refused naming both."""
    if options["champion"] is not None and options["rule_name"] is None and Path(options["champion"]).is_file():
        from evolve.commands.compare.table import champion_from_file

        champion_from_file(options["champion"])
        found = contexts([options["champion"]])
        given = ctx.get_parameter_source("gamma") is not click.core.ParameterSource.DEFAULT
        options["gamma"] = resolve_gamma(options["gamma"] if given else None, found) or options["gamma"]
        options["costs"] = resolve_costs(options["costs"], found)
    speedup_costs = ratio_costs(options.pop("cost_ratio"))  # --cost-ratio c: the cost file of c, in memory
    progress = ProgressLines("tree configurations") if options.pop("progress") else None
    opts = SimulateOptions(**options, speedup_costs=speedup_costs, progress=progress)
    sim, text, png_path = simulate_command(opts)
    echo_outputs(text, opts.output, counted(len(sim.rows), "row"), png_path)
