"""The decode-loop simulator command: generation-length sweeps and chain-vs-tree comparisons.

    python benchmark.py simulate [--rule NAME | --champion FILE] [--gamma N]
        [--lengths 50,100,200,500,1000] [--samples N] [--vocab N] [--cost-ratio C] [--seed N]
        [--verify token|block|fly [--fly-window W] [--fly-threshold T] [--fly-top-k K]] [--relaxation W]
        [--format table|json] [--output FILE] [--no-plot]
        [--trees [--budgets 4,8,16] [--widths 3,1] [--max-width 3]]

Length sweep (default): for each generation length L,
``--samples`` sequences are decoded twice from the same prompt, by chain
speculative decoding with the rule (:func:`evolve.sim.decoding.simulate_chain`)
and by the plain autoregressive loop. Columns, per length:

* target_calls: mean target calls per sequence (autoregressive: L);
* calls_per_token: total target calls / (samples * L);
* acceptance_rate: accepted drafted tokens / drafted tokens (gamma per call);
* tokens_per_call: emitted tokens / calls (last block not truncated);
* analytic_tokens_per_call: mean over the simulated blocks of
  1 + sum_{k=1..gamma} prod_{i<=k} tau_i (the expected tokens of one block:
  the bonus token plus, for each depth k, the probability that the first k
  drafts are all accepted);
* autoregressive_time, speculative_time: mean simulated time per sequence
  (target call = 1, draft step = c; speculative = calls * (1 + gamma*c));
* speedup: autoregressive time / speculative time;
* tv_expected: sum over blocks of sum_k prod_{i<k} tau_i max(0, tau_k - r_k)
  over the sum of the blocks' analytic tokens (the evaluator's tv_per_token
  on the simulated blocks); tv_empirical: drafted tokens accepted with
  r <= u < tau per emitted token, its sampled counterpart (both 0 for a
  lossless rule);
* verification: ``token`` (default), ``block`` or ``fly`` (``--verify``), with
  fly_window, fly_threshold, fly_top_k (FLy's parameters; null otherwise) and
  relaxation (``--relaxation``: the weight w of relaxed block verification; null otherwise);
* context_tv: the damage measured at fixed contexts, the mean over
  :data:`evolve.sim.decoding.DAMAGE_CONTEXTS` contexts of the first emitted
  token's total variation from p (:func:`evolve.sim.decoding.context_damage`,
  :data:`evolve.sim.decoding.DAMAGE_DRAWS` decodes each); 0 without measuring
  for the lossless modes (the standard rule token-wise, block verification).

``--verify block`` runs block verification (Sun et al. 2024, arXiv 2403.10444)
and ``--verify fly`` FLy (Li et al. 2025, arXiv 2511.22972) instead of the
token-wise test, from the same drafts and uniforms
(:mod:`evolve.sim.verification`); both take the standard rule only. With
``--relaxation W`` block verification runs against (1 - w) p + w q (relaxed block
verification: tv_expected is the expected sum of w (1 - overlap) over the
emitted positions per emitted token, tv_empirical the realized sum, context_tv
the first emitted token's exact TV w (1 - overlap) at the fixed contexts). Their
analytic_tokens_per_call is the blocks' expected tokens given the drafts under
that verification, and for FLy tv_expected and tv_empirical count deferred
acceptances (expected and realized) per emitted token.

Tree comparison (``--trees``): at each node budget N (drafted tokens one target
call verifies), sequences of max(--lengths) tokens are decoded with a chain
(gamma = N), a fixed tree (``--widths`` schedule), an adaptive-width tree
(width from the draft's confidence, maximum ``--max-width``) and Medusa heads (``--widths``), each
verified by lossless multi-draft rejection sampling and by greedy match
(:mod:`evolve.sim.trees`). Tree decoding uses the standard rule; ``--rule`` and
``--champion`` apply to the length sweep only.

A bar chart (PNG, matplotlib Agg) of the speedups (sweep) or tokens per call
(trees) is written next to ``--output`` (same name, ``.png``) or, without
``--output``, into ``results/``; ``--no-plot`` skips it.
"""
from __future__ import annotations

import io
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evolve.errors import InputError
from evolve.report.options import naming_option
from evolve.report.output import check_output, resolve_format, write_outputs
from evolve.sim.decoding import (
    DAMAGE_CONTEXTS,
    DAMAGE_DRAWS,
    check_cost_ratio,
    check_gamma_range,
    check_verification,
    context_damage,
    is_standard,
    rule_program,
    simulate_chain,
)
from evolve.eval.evaluator import DEFAULT_COST_RATIO
from evolve.sim.models import SyntheticModel
from evolve.sim.trees import TreeConfig, simulate_tree
from evolve.sim.verification import TOKEN, VERIFICATIONS, Verification

DEFAULT_LENGTHS = (50, 100, 200, 500, 1000)
DEFAULT_BUDGETS = (4, 8, 16)
DEFAULT_WIDTHS = (3, 1)
DEFAULT_RESULTS_DIR = Path("results")
FORMATS = ("table", "json")
MAX_LENGTH = 1_000_000
MAX_SAMPLES = 100_000

#: Keys of one JSON object of the length sweep (the first nine are the sweep's core columns).
SWEEP_KEYS = ("length", "target_calls", "calls_per_token", "acceptance_rate", "tokens_per_call",
              "analytic_tokens_per_call", "speedup", "tv_empirical", "tv_expected", "autoregressive_calls",
              "autoregressive_time", "speculative_time", "expected_acceptance", "samples", "gamma", "cost_ratio",
              "vocab", "rule", "seed", "verification", "fly_window", "fly_threshold", "fly_top_k", "relaxation",
              "context_tv")
#: Keys of one JSON object of the tree comparison.
TREE_KEYS = ("budget", "draft", "shape", "verification", "nodes_per_call", "depth", "draft_steps_per_call",
             "tokens_per_call", "calls_per_token", "accepted_per_node", "speedup", "length", "samples",
             "cost_ratio", "vocab", "seed")


def parse_int_list(text: str, option: str, low: int, high: int) -> tuple[int, ...]:
    """Comma-separated integers in [low, high]. Raises InputError naming ``option`` and the first bad item."""
    items = [s.strip() for s in str(text).split(",")]
    if not items or items == [""]:
        raise InputError(f"option '{option}': expected comma-separated integers (value {text!r})")
    out = []
    for s in items:
        if not re.fullmatch(r"[0-9]+", s):
            raise InputError(f"option '{option}': not a positive integer: {s!r} (value {text!r})")
        v = int(s)
        if not low <= v <= high:
            raise InputError(f"option '{option}': {v} is outside [{low}, {high}] (value {text!r})")
        out.append(v)
    return tuple(out)


def resolve_rule(rule_name: str | None, champion: str | os.PathLike | None):
    """The rule of ``--rule`` or ``--champion`` (default standard_rejection), checked to be an expression.

    ``--rule`` names a registered rule or a promoted champion
    (:func:`heuristics.registry.get_rule` with champions).

    Raises: InputError for both options at once, an unknown rule, a missing or
    invalid champion file, or a function rule.
    """
    from heuristics.registry import STANDARD_NAME, get_rule
    if rule_name is not None and champion is not None:
        raise InputError("options '--rule' and '--champion': give at most one of them")
    if champion is not None:
        from evolve.report.compare.table import champion_from_file
        rule = champion_from_file(champion)
    else:
        rule = get_rule(rule_name or STANDARD_NAME, champions=True)
    rule_program(rule)  # refuses function rules
    return rule


@dataclass
class Simulation:
    """A finished simulation: ``mode`` ``sweep`` or ``trees``, its JSON-ready ``rows`` and a caption;
    ``context_tv`` the damage measured at fixed contexts (sweeps of a lossy rule or FLy, else None)."""

    mode: str
    rows: list[dict]
    caption: str
    context_tv: float | None = None


def run_sweep(rule, gamma: int = 5, lengths=DEFAULT_LENGTHS, samples: int = 20, vocab: int = 1000,
              cost_ratio: float = DEFAULT_COST_RATIO, seed: int = 0, verification: Verification = TOKEN) -> Simulation:
    """Length sweep of chain speculative decoding against the autoregressive baseline (module doc)."""
    model = SyntheticModel(vocab_size=vocab, seed=seed)
    results = simulate_chain(model, rule, lengths, samples, gamma, cost_ratio, verification)
    lossless = (verification.kind == "block" and verification.relaxation is None) or \
        (verification.kind == "token" and is_standard(rule))
    context_tv = 0.0 if lossless else float(np.mean(context_damage(model, rule, gamma, verification)))
    fly = verification.kind == "fly"
    rows = []
    for r in results:
        rows.append({
            "length": r.length, "target_calls": r.target_calls, "calls_per_token": r.calls_per_token,
            "acceptance_rate": r.acceptance_rate, "tokens_per_call": r.tokens_per_call,
            "analytic_tokens_per_call": r.analytic_tokens_per_call, "speedup": r.speedup,
            "tv_empirical": r.tv_empirical, "tv_expected": r.tv_expected,
            "autoregressive_calls": r.autoregressive_calls / r.sequences,
            "autoregressive_time": r.autoregressive_time, "speculative_time": r.speculative_time,
            "expected_acceptance": r.expected_acceptance, "samples": samples, "gamma": gamma,
            "cost_ratio": cost_ratio, "vocab": vocab, "rule": rule.name, "seed": seed,
            "verification": verification.kind, "fly_window": verification.window(gamma) if fly else None,
            "fly_threshold": float(verification.fly_threshold) if fly else None,
            "fly_top_k": int(verification.fly_top_k) if fly else None, "relaxation": verification.relaxation,
            "context_tv": context_tv,
        })
    caption = (f"Chain speculative decoding vs autoregressive: rule {rule.name}, gamma {gamma}, vocab {vocab}, "
               f"cost ratio {cost_ratio:g}, {samples} sequences per length, seed {seed}")
    if verification.kind != "token":
        caption += f"; verification {verification.label(gamma)}"
    return Simulation("sweep", rows, caption, None if lossless else context_tv)


def tree_configs(budget: int, widths=DEFAULT_WIDTHS, max_width: int = 3) -> list[TreeConfig]:
    """The compared drafts at one node budget: chain, tree, adaptive, medusa x sample, greedy."""
    out = []
    for verification in ("sample", "greedy"):
        for kind in ("chain", "tree", "adaptive", "medusa"):
            out.append(TreeConfig(kind, budget, tuple(widths), max_width, verification))
    return out


def run_trees(budgets=DEFAULT_BUDGETS, widths=DEFAULT_WIDTHS, max_width: int = 3, length: int = 1000,
              samples: int = 20, vocab: int = 1000, cost_ratio: float = DEFAULT_COST_RATIO,
              seed: int = 0) -> Simulation:
    """Tokens per target call of chains and trees at equal node budgets (module doc)."""
    model = SyntheticModel(vocab_size=vocab, seed=seed)
    rows = []
    for budget in budgets:
        for cfg in tree_configs(budget, widths, max_width):
            r = simulate_tree(model, cfg, length, samples, cost_ratio)
            rows.append({
                "budget": budget, "draft": cfg.kind, "shape": cfg.label, "verification": cfg.verification,
                "nodes_per_call": r.nodes_per_call, "depth": r.depth, "draft_steps_per_call": r.draft_steps_per_call,
                "tokens_per_call": r.tokens_per_call, "calls_per_token": r.calls_per_token,
                "accepted_per_node": r.accepted_per_node, "speedup": r.speedup, "length": length,
                "samples": samples, "cost_ratio": cost_ratio, "vocab": vocab, "seed": seed,
            })
    caption = (f"Chains vs draft trees at equal node budgets: {samples} sequences of {length} tokens, vocab {vocab}, "
               f"cost ratio {cost_ratio:g}, seed {seed}; tree widths {','.join(map(str, widths))}, "
               f"adaptive max width {max_width}")
    return Simulation("trees", rows, caption)


# --- rendering --------------------------------------------------------------------------------

def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(header, widths))]
    lines.append("  ".join("-" * w for w in widths))
    for r in rows:
        lines.append("  ".join(c.rjust(w) for c, w in zip(r, widths)))
    return lines


def format_table(sim: Simulation) -> str:
    """Plain-text table (plus a text bar chart of the speedups for the sweep)."""
    lines = [sim.caption, ""]
    if sim.mode == "sweep":
        header = ["Length", "AR calls", "Spec calls", "Calls/token", "Accept", "Tokens/call", "Analytic",
                  "AR time", "Spec time", "Speedup", "TV emp", "TV exp"]
        body = [[f"{r['length']}", f"{r['autoregressive_calls']:.1f}", f"{r['target_calls']:.1f}",
                 f"{r['calls_per_token']:.3f}", f"{100 * r['acceptance_rate']:.1f}%", f"{r['tokens_per_call']:.3f}",
                 f"{r['analytic_tokens_per_call']:.3f}", f"{r['autoregressive_time']:.1f}",
                 f"{r['speculative_time']:.2f}", f"{r['speedup']:.2f}x", f"{r['tv_empirical']:.4f}",
                 f"{r['tv_expected']:.4f}"] for r in sim.rows]
        lines += _table(header, body)
        lines += ["", "Speedup by generation length:"]
        top = max([r["speedup"] for r in sim.rows] + [1e-12])
        for r in sim.rows:
            bar = "#" * max(1, int(round(40 * r["speedup"] / top)))
            lines.append(f"  {r['length']:>7} tokens: {bar} {r['speedup']:.2f}x")
        lines += ["", "AR = plain autoregressive decoding (one target call per token). Time: target call = 1, "
                      "draft step = cost ratio.",
                  "Accept = accepted drafts / drafted tokens; Analytic = mean block formula 1 + sum_k prod_{i<=k} "
                  "tau_i; TV = damage per emitted token (0 = lossless)."]
        if sim.rows and sim.rows[0]["verification"] != "token":
            lines.append("Analytic = mean over blocks of the expected tokens given the drafts under this verification"
                         + ("; TV = deferred acceptances (FLy)." if sim.rows[0]["verification"] == "fly" else "."))
        if sim.context_tv is not None:
            lines.append(f"Damage at {DAMAGE_CONTEXTS} fixed contexts (first emitted token's TV from p, "
                         f"{DAMAGE_DRAWS} decodes each): {sim.context_tv:.4f}")
    else:
        header = ["Budget", "Draft", "Verify", "Nodes", "Depth", "Draft steps", "Tokens/call", "Calls/token",
                  "Accepted/node", "Speedup"]
        body = [[f"{r['budget']}", r["shape"], r["verification"], f"{r['nodes_per_call']:.2f}", f"{r['depth']:.2f}",
                 f"{r['draft_steps_per_call']:.2f}", f"{r['tokens_per_call']:.3f}", f"{r['calls_per_token']:.3f}",
                 f"{r['accepted_per_node']:.3f}", f"{r['speedup']:.2f}x"] for r in sim.rows]
        lines += _table(header, body)
        lines += ["", "sample = lossless multi-draft recursive rejection sampling (SpecInfer); greedy = greedy match "
                      "(output = greedy decoding).",
                  "Draft steps: one per tree level (chain, tree, adaptive), one per call for Medusa heads; "
                  "speedup = length / (calls + c * draft steps)."]
    return "\n".join(lines) + "\n"


def format_json(sim: Simulation) -> str:
    """JSON array of the rows (keys :data:`SWEEP_KEYS` or :data:`TREE_KEYS`)."""
    keys = SWEEP_KEYS if sim.mode == "sweep" else TREE_KEYS
    return json.dumps([{k: r[k] for k in keys} for r in sim.rows], indent=2) + "\n"


def plot_png(sim: Simulation) -> bytes:
    """Bar chart (PNG bytes): speedup and tokens per call by length, or tokens per call by budget and draft."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    if sim.mode == "sweep":
        fig, axes = plt.subplots(1, 2, figsize=(10, 4))
        labels = [str(r["length"]) for r in sim.rows]
        x = np.arange(len(labels))
        axes[0].bar(x, [r["speedup"] for r in sim.rows], color="tab:blue")
        axes[0].axhline(1.0, color="grey", lw=0.8, ls="--")
        axes[0].set_ylabel("speedup over autoregressive")
        axes[1].bar(x - 0.2, [r["tokens_per_call"] for r in sim.rows], 0.4, label="simulated", color="tab:green")
        axes[1].bar(x + 0.2, [r["analytic_tokens_per_call"] for r in sim.rows], 0.4, label="block formula",
                    color="tab:olive")
        axes[1].set_ylabel("tokens per target call")
        axes[1].legend(loc="lower right")
        for ax in axes:
            ax.set_xticks(x, labels)
            ax.set_xlabel("generation length (tokens)")
    else:
        budgets = sorted({r["budget"] for r in sim.rows})
        series = []
        for r in sim.rows:
            key = (r["shape"], r["verification"])
            if key not in series:
                series.append(key)
        fig, ax = plt.subplots(figsize=(11, 4.5))
        x = np.arange(len(budgets))
        w = 0.8 / max(1, len(series))
        for i, key in enumerate(series):
            vals = [next((r["tokens_per_call"] for r in sim.rows if r["budget"] == b
                          and (r["shape"], r["verification"]) == key), 0.0) for b in budgets]
            ax.bar(x - 0.4 + (i + 0.5) * w, vals, w, label=f"{key[0]} ({key[1]})")
        ax.set_xticks(x, [f"{b} nodes" for b in budgets])
        ax.set_ylabel("tokens per target call")
        ax.legend(fontsize=7, ncol=2)
    fig.suptitle(sim.caption, fontsize=8)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


def plot_path(output: str | os.PathLike | None, sim_mode: str, rule_name: str) -> Path:
    """Where the PNG goes: ``--output`` with suffix .png, else results/simulate_<rule|trees>.png."""
    if output is not None:
        return Path(output).with_suffix(".png")
    stem = "simulate_trees" if sim_mode == "trees" else f"simulate_{rule_name}"
    return DEFAULT_RESULTS_DIR / f"{stem}.png"



def resolve_verification(verify: str = "token", fly_window=None, fly_threshold=None, fly_top_k=None,
                         gamma: int = 5, relaxation: str | None = None) -> Verification:
    """The :class:`Verification` of ``--verify``, the ``--fly-*`` options (None: FLy's defaults) and
    ``--relaxation`` (the weight w of relaxed block verification) for ``gamma``.

    Raises: InputError naming the option for an unknown mode, a ``--fly-*``
    option given without ``--verify fly``, a bad FLy parameter, FLy with gamma < 2,
    or a ``--relaxation`` without ``--verify block`` or that is not a prefix-level expression.
    """
    if verify not in VERIFICATIONS:
        raise InputError(f"option '--verify': unknown mode {verify!r} (choose from {', '.join(VERIFICATIONS)})")
    if relaxation is not None:
        if verify != "block":
            raise InputError(f"option '--relaxation': applies to '--verify block' only (value {relaxation!r})")
        return naming_option("--relaxation", Verification("block", relaxation=relaxation).check, gamma)
    given = {"--fly-window": fly_window, "--fly-threshold": fly_threshold, "--fly-top-k": fly_top_k}
    if verify != "fly":
        extra = next((name for name, value in given.items() if value is not None), None)
        if extra is not None:
            raise InputError(f"option '{extra}': applies to '--verify fly' only (value {given[extra]!r})")
        return Verification(verify)
    default = Verification("fly")
    naming_option("--gamma", default.check, gamma)
    fly = Verification("fly", fly_window, default.fly_threshold if fly_threshold is None else fly_threshold,
                       default.fly_top_k if fly_top_k is None else fly_top_k)
    naming_option("--fly-window", Verification("fly", fly.fly_window).check, gamma)
    naming_option("--fly-threshold", Verification("fly", None, fly.fly_threshold).check, gamma)
    naming_option("--fly-top-k", Verification("fly", None, default.fly_threshold, fly.fly_top_k).check, gamma)
    return fly


def simulate_command(rule_name=None, champion=None, gamma=5, lengths="50,100,200,500,1000", samples=20,
                     vocab=1000, cost_ratio=DEFAULT_COST_RATIO, seed=0, fmt=None, output=None, plot=True,
                     trees=False, budgets="4,8,16", widths="3,1", max_width=3, verify="token", fly_window=None,
                     fly_threshold=None, fly_top_k=None, relaxation=None) -> tuple[Simulation, str, Path | None]:
    """The whole command: validate every option, simulate, render, write. Returns (simulation, text, png path).

    Nothing is written unless everything succeeded; files are written atomically.
    Raises: InputError for any bad option (one line naming it).
    """
    fmt = resolve_format(fmt, output, FORMATS)
    length_list = parse_int_list(lengths, "--lengths", 1, MAX_LENGTH)
    if isinstance(samples, bool) or not isinstance(samples, int) or not 1 <= samples <= MAX_SAMPLES:
        raise InputError(f"option '--samples': must be an integer in [1, {MAX_SAMPLES}] (value {samples!r})")
    gamma = naming_option("--gamma", check_gamma_range, gamma)
    cost_ratio = naming_option("--cost-ratio", check_cost_ratio, cost_ratio)
    verification = resolve_verification(verify, fly_window, fly_threshold, fly_top_k, gamma, relaxation)
    SyntheticModel(vocab_size=vocab, seed=seed)  # validates --vocab and --seed
    check_output(output, "chart" if plot else None, inputs=(champion,))
    if trees and (rule_name is not None or champion is not None):
        raise InputError("option '--trees': compares lossless tree verification; '--rule' and '--champion' "
                         "apply to the length sweep only")
    if trees and verification.kind != "token":
        raise InputError("option '--trees': compares tree verification; '--verify' applies to the length sweep only")
    if trees:
        budget_list = parse_int_list(budgets, "--budgets", 1, 256)
        width_list = parse_int_list(widths, "--widths", 1, 64)
        if isinstance(max_width, bool) or not isinstance(max_width, int) or not 1 <= max_width <= 64:
            raise InputError(f"option '--max-width': must be an integer in [1, 64] (value {max_width!r})")
        rule_name_for_plot = "trees"
        sim = run_trees(budget_list, width_list, max_width, max(length_list), samples, vocab, cost_ratio, seed)
    else:
        rule = resolve_rule(rule_name, champion)
        naming_option("--verify", check_verification, verification, rule, gamma)
        rule_name_for_plot = rule.name if verification.kind == "token" else f"{rule.name}_{verification.kind}"
        sim = run_sweep(rule, gamma, length_list, samples, vocab, cost_ratio, seed, verification)
    text = format_json(sim) if fmt == "json" else format_table(sim)
    png_path = write_outputs(text, output, plot_png(sim) if plot else None,
                             plot_path(output, sim.mode, rule_name_for_plot))
    return sim, text, png_path
