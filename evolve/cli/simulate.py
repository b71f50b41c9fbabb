"""``python benchmark.py simulate``: the decode-loop simulator and draft trees (:mod:`evolve.report.simulate`)."""
from __future__ import annotations

import math
from pathlib import Path

import click

from evolve.errors import InputError
from evolve.cli.errors import CliCommand
from evolve.cli.output import echo_outputs
from evolve.eval.evaluator import DEFAULT_COST_RATIO
from evolve.report.simulate import FORMATS, simulate_command
from evolve.sim.verification import FLY_MAX_WINDOW, FLY_THRESHOLD, FLY_TOP_K, VERIFICATIONS


@click.command("simulate", cls=CliCommand, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--rule", "rule_name", default=None,
              help="Registered rule, family member FAMILY:VALUES (e.g. fuzzy_sd:T=0.1) or promoted champion to "
                   "simulate [default: standard_rejection].")
@click.option("--champion", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Champion JSON file to simulate instead of --rule.")
@click.option("--gamma", type=int, default=5, show_default=True, help="Draft length (tokens drafted per target call).")
@click.option("--lengths", default="50,100,200,500,1000", show_default=True,
              help="Comma-separated generation lengths (tokens).")
@click.option("--samples", type=int, default=20, show_default=True, help="Sequences per length.")
@click.option("--vocab", type=int, default=1000, show_default=True, help="Vocabulary size of the synthetic models.")
@click.option("--cost-ratio", type=float, default=DEFAULT_COST_RATIO, show_default=True,
              help="Cost of one draft step in target calls.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the models and of the decoding.")
@click.option("--verify", type=click.Choice(VERIFICATIONS), default="token", show_default=True,
              help="Chain verification: token-wise, block verification (lossless, Sun et al. 2024) or FLy (lossy "
                   "look-ahead, Li et al. 2025); block and fly take the standard rule only.")
@click.option("--fly-window", type=int, default=None,
              help=f"--verify fly: native decisions checked after a deferred rejection "
                   f"[default: min({FLY_MAX_WINDOW}, gamma - 1)].")
@click.option("--fly-threshold", type=float, default=None,
              help=f"--verify fly: entropy gate, nats of the top-k target probabilities [default: {FLY_THRESHOLD:g}].")
@click.option("--fly-top-k", type=int, default=None,
              help=f"--verify fly: target probabilities in the entropy gate [default: {FLY_TOP_K}].")
@click.option("--relaxation", default=None, metavar="W",
              help="--verify block: verify against (1 - w) p + w q, w a constant or an expression over prefix-level "
                   "features (relaxed block verification; lossy, damage w (1 - overlap) per emitted position).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
              help="Output format [default: json for an --output ending in .json, else table].")
@click.option("--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the result to FILE (atomically); the chart goes next to it as .png.")
@click.option("--plot/--no-plot", default=True, show_default=True,
              help="Write the bar chart PNG (next to --output, else into results/).")
@click.option("--trees", is_flag=True, help="Compare chains and draft trees at equal node budgets instead.")
@click.option("--budgets", default="4,8,16", show_default=True, help="--trees: node budgets per target call.")
@click.option("--widths", default="3,1", show_default=True,
              help="--trees: children per node by level for fixed trees and Medusa heads (the last repeats).")
@click.option("--max-width", type=int, default=3, show_default=True, help="--trees: maximal adaptive width.")
def simulate(rule_name, champion, gamma, lengths, samples, vocab, cost_ratio, seed, verify, fly_window, fly_threshold,
             fly_top_k, relaxation, fmt, output, plot, trees, budgets, widths, max_width) -> None:
    """Simulate speculative decoding over synthetic draft/target models (length sweep or --trees)."""
    if not math.isfinite(cost_ratio):
        raise InputError(f"option '--cost-ratio': must be a finite number >= 0 (value {cost_ratio!r})")
    sim, text, png_path = simulate_command(rule_name, champion, gamma, lengths, samples, vocab, cost_ratio, seed,
                                           fmt, output, plot, trees, budgets, widths, max_width, verify, fly_window,
                                           fly_threshold, fly_top_k, relaxation)
    echo_outputs(text, output, f"{len(sim.rows)} rows", png_path)
