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

Rules of another kind (:mod:`evolve.kinds`; the dispatch is the kind's ``simulate`` hook): a relaxation
champion (``--champion FILE`` or the ``--rule`` name of a promoted one; the weight w of relaxed block
verification) runs as ``--verify block --relaxation EXPR`` with the standard rule underneath and EXPR
the champion's expression, in rows named after it (``verification`` block, ``relaxation`` EXPR);
``--verify token|fly`` or ``--relaxation`` with it is refused. ``--rule block_verification`` (the
verifier ``benchmark.py`` and ``benchmark.py live`` name so) is ``--verify block`` with the standard rule.

Tree comparison (``--trees``): at each node budget N (drafted tokens one target
call verifies), sequences of max(--lengths) tokens are decoded with a chain
(gamma = N), a fixed tree (``--widths`` schedule), an adaptive-width tree
(width from the draft's confidence, maximum ``--max-width``) and Medusa heads (``--widths``), each
verified by lossless multi-draft rejection sampling (SpecInfer), by traversal verification (lossless,
Weng et al. 2025, arXiv 2505.12398) and by greedy match (:mod:`evolve.sim.tree_sim`). Tree decoding uses the standard rule; ``--rule`` and
``--champion`` apply to the length sweep only.

A bar chart (PNG, matplotlib Agg) of the speedups (sweep) or tokens per call
(trees) is written next to ``--output`` (same name, ``.png``) or, without
``--output``, into ``results/``; ``--no-plot`` skips it.
"""
from __future__ import annotations

import os
from typing import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evolve.eval.costs import DEFAULT_COSTS, Costs, load_costs
from evolve.errors import InputError
from evolve.commands.options import naming_param
from evolve.commands.rules import rule_named
from evolve.report.output import check_output, resolve_format, write_outputs
from evolve.report.simulate import FORMATS, Simulation, format_json, format_table, plot_png
from evolve.live.decoding import BlockVerifier
from evolve.sim.decoding import (
    check_gamma_range,
    context_damage,
    is_standard,
    rule_program,
    simulate_chain,
)
from evolve.sim.models import SyntheticModel
from evolve.sim.tree_sim import TreeConfig, simulate_tree
from evolve.sim.verification import TOKEN, VERIFICATIONS, Verification

DEFAULT_LENGTHS = (50, 100, 200, 500, 1000)
DEFAULT_BUDGETS = (4, 8, 16)
DEFAULT_WIDTHS = (3, 1)
DEFAULT_RESULTS_DIR = Path("results")
MAX_LENGTH = 1_000_000
MAX_SAMPLES = 100_000


def resolve_rule(rule_name: str | None, champion: str | os.PathLike | None):
    """The rule named ``rule_name`` or the champion file ``champion`` (default standard_rejection), checked
    to be an expression.

    ``rule_name`` is resolved as every command resolves ``--rule`` (:func:`evolve.commands.rules.rule_named`:
    a registered rule, a family member, a promoted champion, or ``block_verification``, returned as the
    verifier :data:`evolve.live.decoding.BLOCK_VERIFICATION`). The rule keeps its kind of program;
    :func:`plan_sweep` says how each kind is simulated.

    Raises: InputError for both at once, an unknown rule, a missing or
    invalid champion file, or a function rule.
    """
    from heuristics.registry import STANDARD_NAME
    if rule_name is not None and champion is not None:
        raise InputError("give at most one of a rule name and a champion file", param="champion")
    if champion is not None:
        from evolve.commands.compare.table import champion_from_file
        rule = champion_from_file(champion)
    else:
        rule = rule_named(rule_name or STANDARD_NAME)
    if not isinstance(rule, BlockVerifier):
        rule_program(rule)  # refuses function rules
    return rule


@dataclass(frozen=True)
class SweepPlan:
    """What the length sweep runs for a rule (:func:`plan_sweep`): the per-token ``rule`` of the chain
    under ``verification``; ``label`` names it in the rows (key ``rule``), the chart's file and the
    caption, where ``title`` (if any) says what it is."""

    rule: object
    verification: Verification
    label: str
    title: str = ""


def options_verification(o: "SimulateOptions", gamma: int, verify: str | None = None, relaxation: str | None = None):
    """:func:`resolve_verification` of the options (``verify`` and ``relaxation`` in place of theirs)."""
    return resolve_verification(verify or o.verify or "token", o.fly_window, o.fly_threshold, o.fly_top_k, gamma,
                                relaxation)


def block_only(what: str, o: "SimulateOptions") -> None:
    """Refuse ``--verify token|fly`` for ``what``, which runs as block verification."""
    if o.verify not in (None, "block"):
        raise InputError(f"{what} runs as block verification; verification '{o.verify}' does not apply",
                         param="verify")


def _verifier_plan(verifier: BlockVerifier, o: "SimulateOptions", gamma: int) -> SweepPlan:
    """``--rule block_verification``: ``--verify block`` with the standard rule (``--relaxation`` allowed)."""
    from heuristics.contract import STANDARD_RULE
    block_only(f"rule '{verifier.name}'", o)
    verification = options_verification(o, gamma, verify="block", relaxation=o.relaxation)
    return SweepPlan(STANDARD_RULE, verification, verifier.name, "lossless block verification, Sun et al. 2024"
                     if verification.relaxation is None else "")


def plan_sweep(rule, options: "SimulateOptions", gamma: int) -> SweepPlan:
    """The :class:`SweepPlan` of ``rule`` (from :func:`resolve_rule`) with the verification ``options``:
    by the rule's kind (its ``simulate`` hook); the verifier ``block_verification`` as ``--verify block``.

    Raises: InputError naming the parameter: a verification the rule cannot take (``--verify block`` or
    ``fly`` with a rule other than the standard one; ``--verify token|fly`` or ``--relaxation`` with a
    relaxation champion), bad FLy options, or a kind the simulator cannot run.
    """
    if isinstance(rule, BlockVerifier):
        return _verifier_plan(rule, options, gamma)
    handler = rule.program_kind.hook("simulate", "python benchmark.py simulate", f"rule '{rule.name}'")
    return handler(rule, options, gamma)


def run_sweep(rule, gamma: int = 5, lengths=DEFAULT_LENGTHS, samples: int = 20, vocab: int = 1000,
              speedup_costs: Costs = DEFAULT_COSTS, seed: int = 0, verification: Verification = TOKEN,
              label: str | None = None, title: str = "") -> Simulation:
    """Length sweep of chain speculative decoding against the autoregressive baseline (module doc).

    ``label`` names the rule in the rows and the caption (default ``rule.name``); ``title`` is added to
    the caption (what a relaxation champion runs as, :class:`SweepPlan`).
    """
    label = rule.name if label is None else label
    model = SyntheticModel(vocab_size=vocab, seed=seed)
    results = simulate_chain(model, rule, lengths, samples, gamma, speedup_costs, verification)
    lossless = (verification.scheme == "block" and verification.relaxation is None) or \
        (verification.scheme == "token" and is_standard(rule))
    context_tv = 0.0 if lossless else float(np.mean(context_damage(model, rule, gamma, verification)))
    fly = verification.scheme == "fly"
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
            "cost_ratio": speedup_costs.cost_ratio, "vocab": vocab, "rule": label, "seed": seed,
            "verification": verification.scheme, "fly_window": verification.window(gamma) if fly else None,
            "fly_threshold": float(verification.fly_threshold) if fly else None,
            "fly_top_k": int(verification.fly_top_k) if fly else None, "relaxation": verification.relaxation,
            "context_tv": context_tv,
        })
    caption = (f"Chain speculative decoding vs autoregressive: rule {label}, gamma {gamma}, vocab {vocab}, "
               f"cost ratio {speedup_costs.cost_ratio:g}, {samples} sequences per length, seed {seed}")
    if verification.scheme != "token":
        caption += f"; verification {verification.label(gamma)}"
    if title:
        caption += f" ({title})"
    return Simulation("sweep", rows, caption, None if lossless else context_tv)


def tree_configs(budget: int, widths=DEFAULT_WIDTHS, max_width: int = 3) -> list[TreeConfig]:
    """The compared drafts at one node budget: chain, tree, adaptive, medusa x sample, traversal, greedy."""
    out = []
    for verification in ("sample", "traversal", "greedy"):
        for draft in ("chain", "tree", "adaptive", "medusa"):
            out.append(TreeConfig(draft, budget, tuple(widths), max_width, verification))
    return out


def run_trees(budgets=DEFAULT_BUDGETS, widths=DEFAULT_WIDTHS, max_width: int = 3, length: int = 1000,
              samples: int = 20, vocab: int = 1000, speedup_costs: Costs = DEFAULT_COSTS,
              seed: int = 0, progress: Callable[[int, int, str], None] | None = None) -> Simulation:
    """Tokens per target call of chains and trees at equal node budgets (module doc). ``progress(done, total,
    detail)`` is called before the first configuration and after each one (None: silent)."""
    model = SyntheticModel(vocab_size=vocab, seed=seed)
    rows = []
    configs = [(budget, cfg) for budget in budgets for cfg in tree_configs(budget, widths, max_width)]
    if progress is not None:
        progress(0, len(configs), "")
    for done, (budget, cfg) in enumerate(configs, 1):
        r = simulate_tree(model, cfg, length, samples, speedup_costs)
        if progress is not None:
            progress(done, len(configs), f"{budget} nodes: {cfg.label} ({cfg.verification})")
        rows.append({
            "budget": budget, "draft": cfg.draft, "shape": cfg.label, "verification": cfg.verification,
            "nodes_per_call": r.nodes_per_call, "depth": r.depth, "draft_steps_per_call": r.draft_steps_per_call,
            "tokens_per_call": r.tokens_per_call, "calls_per_token": r.calls_per_token,
            "accepted_per_node": r.accepted_per_node, "speedup": r.speedup, "length": length,
            "samples": samples, "cost_ratio": speedup_costs.cost_ratio, "vocab": vocab, "seed": seed,
        })
    caption = (f"Chains vs draft trees at equal node budgets: {samples} sequences of {length} tokens, vocab {vocab}, "
               f"cost ratio {speedup_costs.cost_ratio:g}, seed {seed}; tree widths {','.join(map(str, widths))}, "
               f"adaptive max width {max_width}")
    return Simulation("trees", rows, caption)


# --- rendering --------------------------------------------------------------------------------


def plot_path(output: str | os.PathLike | None, sim_mode: str, rule_name: str) -> Path:
    """Where the PNG goes: ``output`` with suffix .png, else results/simulate_<rule|trees>.png."""
    if output is not None:
        return Path(output).with_suffix(".png")
    stem = "simulate_trees" if sim_mode == "trees" else f"simulate_{rule_name}"
    return DEFAULT_RESULTS_DIR / f"{stem}.png"


def resolve_verification(verify: str = "token", fly_window=None, fly_threshold=None, fly_top_k=None,
                         gamma: int = 5, relaxation: str | None = None) -> Verification:
    """The :class:`Verification` of ``verify``, the FLy parameters ``fly_window``, ``fly_threshold`` and
    ``fly_top_k`` (None: FLy's defaults) and ``relaxation`` (the weight w of relaxed block verification)
    for ``gamma``.

    Raises: InputError naming the parameter for an unknown mode, a FLy parameter given
    without ``verify`` fly, a bad FLy parameter, FLy with gamma < 2, or a ``relaxation``
    without ``verify`` block, that is not a prefix-level expression, or that is a constant outside
    [0, 1] (a weight computed from features is clamped position by position; a constant out of range
    is refused, never clamped).
    """
    if verify not in VERIFICATIONS:
        raise InputError(f"unknown mode {verify!r} (choose from {', '.join(VERIFICATIONS)})", param="verify")
    if relaxation is not None:
        if verify != "block":
            raise InputError(f"applies to block verification only (value {relaxation!r})", param="relaxation")
        verification = naming_param("relaxation", Verification("block", relaxation=relaxation).check, gamma)
        w = verification.constant_weight()
        if w is not None and not 0.0 <= w <= 1.0:  # NaN fails too
            raise InputError(f"a constant weight w must lie in [0, 1] (value {relaxation!r} = {w:g}): relaxed block "
                             "verification verifies against (1 - w) p + w q, w = 0 being lossless; it is refused, "
                             "not clamped", param="relaxation")
        return verification
    given = {"fly_window": fly_window, "fly_threshold": fly_threshold, "fly_top_k": fly_top_k}
    if verify != "fly":
        extra = next((name for name, value in given.items() if value is not None), None)
        if extra is not None:
            raise InputError(f"applies to fly verification only (value {given[extra]!r})", param=extra)
        return Verification(verify)
    default = Verification("fly")
    naming_param("gamma", default.check, gamma)
    fly = Verification("fly", fly_window, default.fly_threshold if fly_threshold is None else fly_threshold,
                       default.fly_top_k if fly_top_k is None else fly_top_k)
    naming_param("fly_window", Verification("fly", fly.fly_window).check, gamma)
    naming_param("fly_threshold", Verification("fly", None, fly.fly_threshold).check, gamma)
    naming_param("fly_top_k", Verification("fly", None, default.fly_threshold, fly.fly_top_k).check, gamma)
    return fly


@dataclass(frozen=True)
class SimulateOptions:
    """Everything :func:`simulate_command` does, as the command line's options of the same names.

    ``rule_name`` (``--rule``) or ``champion``: the rule of the length sweep (default
    standard_rejection); ``gamma``: draft length; ``lengths``: generation lengths; ``samples``:
    sequences per length; ``vocab``, ``seed``: the synthetic models; ``speedup_costs``: the cost model of
    the speedup (``--cost-ratio`` c, the cost of a draft step in target calls, as
    :func:`evolve.eval.costs.ratio_costs`); ``verify`` (None: ``token``, or ``block`` for a relaxation champion or block_verification) with
    ``fly_window``, ``fly_threshold``, ``fly_top_k`` and ``relaxation``: the chain verification
    (:func:`resolve_verification`, :func:`plan_sweep`); ``fmt`` (``--format``): table or json (default from
    ``output``'s suffix); ``output``: the file to write (None: the text is returned only); ``plot``:
    write the PNG chart; ``trees``: the tree comparison with ``budgets``, ``widths`` and ``max_width``
    instead of the sweep; ``costs``: a cost file (:mod:`evolve.eval.costs`): each sweep row gains the
    predicted ``tokens_per_second`` = tokens per call / (target_forward_s(gamma + 1) + gamma *
    draft_token_s) and ``cost_speedup`` = that times ``plain_token_s``; ``progress``: called as ``progress(done,
    total, detail)`` while the tree comparison runs (None: silent). Values are checked by
    :func:`simulate_command`.
    """

    rule_name: str | None = None
    champion: str | os.PathLike | None = None
    gamma: int = 5
    lengths: tuple[int, ...] = DEFAULT_LENGTHS
    samples: int = 20
    vocab: int = 1000
    speedup_costs: Costs = DEFAULT_COSTS
    seed: int = 0
    verify: str | None = None
    fly_window: int | None = None
    fly_threshold: float | None = None
    fly_top_k: int | None = None
    relaxation: str | None = None
    fmt: str | None = None
    output: str | os.PathLike | None = None
    plot: bool = True
    trees: bool = False
    budgets: tuple[int, ...] = DEFAULT_BUDGETS
    widths: tuple[int, ...] = DEFAULT_WIDTHS
    max_width: int = 3
    costs: str | os.PathLike | None = None
    progress: Callable[[int, int, str], None] | None = None


def _check_count(param: str, value, low: int, high: int):
    """``value`` if it is an integer in [low, high]; else InputError naming ``param``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not low <= value <= high:
        raise InputError(f"must be an integer in [{low}, {high}] (value {value!r})", param=param)
    return int(value)


def simulate_command(options: SimulateOptions = SimulateOptions()) -> tuple[Simulation, str, Path | None]:
    """The whole command: validate every option, simulate, render, write. Returns (simulation, text, png path).

    Nothing is written unless everything succeeded; files are written atomically.
    Raises: InputError for any bad option (one line naming its parameter).
    """
    o = options
    fmt = resolve_format(o.fmt, o.output, FORMATS)
    if not o.lengths:
        raise InputError("the list is empty", param="lengths")
    lengths = tuple(_check_count("lengths", n, 1, MAX_LENGTH) for n in o.lengths)
    samples = _check_count("samples", o.samples, 1, MAX_SAMPLES)
    gamma = check_gamma_range(o.gamma)
    if o.trees:
        verification = options_verification(o, gamma, relaxation=o.relaxation)
    else:
        plan = plan_sweep(resolve_rule(o.rule_name, o.champion), o, gamma)
        verification = plan.verification
    SyntheticModel(vocab_size=o.vocab, seed=o.seed)  # validates the vocabulary size and the seed
    check_output(o.output, "chart" if o.plot else None, inputs=(o.champion, o.costs))
    if o.trees and (o.rule_name is not None or o.champion is not None):
        raise InputError("the tree comparison verifies losslessly with the standard rule; a rule or champion "
                         "applies to the length sweep only", param="trees")
    costs = load_costs(o.costs) if o.costs is not None else None
    if o.trees and costs is not None:
        raise InputError("a cost file applies to the length sweep only (a tree's verification cost is not "
                         "modelled yet)", param="costs")
    if o.trees and verification.scheme != "token":
        raise InputError("the tree comparison has its own verification; a chain verification mode applies to "
                         "the length sweep only", param="trees")
    if o.trees:
        if not o.budgets:
            raise InputError("the list is empty", param="budgets")
        for budget in o.budgets:  # every tree configuration is checked before the first is simulated
            tree_configs(budget, tuple(o.widths), o.max_width)
        rule_name_for_plot = "trees"
        sim = run_trees(tuple(o.budgets), tuple(o.widths), o.max_width, max(lengths), samples, o.vocab, o.speedup_costs,
                        o.seed, o.progress)
    else:
        rule_name_for_plot = plan.label if verification.scheme == "token" else f"{plan.label}_{verification.scheme}"
        sim = run_sweep(plan.rule, gamma, lengths, samples, o.vocab, o.speedup_costs, o.seed, verification, plan.label,
                        plan.title)
        if costs is not None:
            seconds = costs.fixed_gamma_seconds(gamma)
            for row in sim.rows:
                row["tokens_per_second"] = row["tokens_per_call"] / seconds
                row["cost_speedup"] = row["tokens_per_second"] * costs.plain_token_s
            sim.caption += (f"; under the cost file {costs.source}: tokens per second = tokens per call / "
                            f"{seconds:.4g} s per call, speedup over plain decoding = that x {costs.plain_token_s:.4g} "
                            f"s per plain token: " + ", ".join(f"{r['length']} tokens {r['tokens_per_second']:.4g} "
                                                               f"tok/s ({r['cost_speedup']:.3f}x)" for r in sim.rows))
    text = format_json(sim) if fmt == "json" else format_table(sim)
    png_path = write_outputs(text, o.output, plot_png(sim) if o.plot else None,
                             plot_path(o.output, sim.mode, rule_name_for_plot))
    return sim, text, png_path
