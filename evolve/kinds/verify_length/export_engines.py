"""What an engine can express of a verification-length policy (the kind's ``engines`` hook), and the per-batch-size
schedule of ``python -m evolve export --concurrency`` (its ``schedule`` hook).

From the engine's :class:`evolve.export.engines.base.Capabilities`: a policy reading only ``draft_index`` is a fixed
draft length L (:func:`fixed_length_rule`, the engine's length knob; block verification of the drafts where the engine
has it and the policy's run verified by blocks); a capped confidence stop (:func:`capped_confidence_rule`: stop after a
drafted token whose drafter top probability is below h, at most n drafts, SpecDec++'s stop, Huang et al. 2024, arXiv
2405.19715, with a cap) where the engine has one; on an engine that runs a per-step decision in its own loop
(llama-cpp-python) the policy itself. The settings are rules of this kind, so its own scorer scores them.
"""
from __future__ import annotations

import dataclasses
import os
from typing import Callable

from evolve.errors import InputError
from evolve.eval.costs import load_costs
from evolve.harvest.context import at_dataset_context
from evolve.eval.evaluator import EvalData
from evolve.export.codegen import straight_line
from evolve.engine.drafter_base import EngineFamily
from evolve.export.engines.base import Engine, KindSupport, Setting
from evolve.export.engines.shapes import constants, fixed_length, member
from evolve.export.engines.supports import LengthRules, length_support
from evolve.export.exporter import layout
from evolve.kinds.verify_length import KIND
from evolve.kinds.verify_length.eval_schedule import batch_schedule, fixed_length_table, length_throughput
from evolve.traces.io import load_split
from heuristics.contract import Rule
from heuristics.length_policies import (BLOCK_VERIFIER_NAME, CONFIDENCE_GRID, LOOP_VERIFIERS, STANDARD_VERIFIER_NAME,
                                       confidence_threshold, fixed_gamma, suffix_rule)

#: The end of a schedule's last range: its length holds from the largest batch size listed up to this one.
LAST_BATCH_SIZE = 65536
#: Names of this kind's competitor rows (``benchmark.py``) that are decisions, not rule programs -> why no engine
#: runs one, and the nearest setting (the refusal of ``python -m evolve export NAME``).
NOT_RULES = {
    "survival_prefix": "it drafts gamma tokens and then chooses how many to verify from the survival estimate "
                       "(the cumulative product of the drafter's probabilities), a decision after drafting that no "
                       "engine's draft-length knob takes (vLLM's adaptive verification is DSpark's trained "
                       "confidence head only); nearest: a capped confidence stop (confidence_threshold:h=H) or "
                       "a fixed length (fixed_gamma:gamma=G)",
    "best_fixed_gamma": "it names the best fixed length of a dataset, not one rule; export fixed_gamma:gamma=G "
                        "(benchmark.py prints G), or give --data and --costs to tune it for the engine",
    "length_oracle": "it is a bound (the best length knowing each block's outcome), not a policy",
}


def fixed_length_rule(length: int, block: bool = False) -> Rule:
    """``fixed_gamma:gamma=length`` (drafts verified by the standard rule, or by block verification with ``block``)."""
    rule = fixed_gamma(length)
    if not block:
        return rule
    return Rule(f"{rule.name},verify=block", rule.description + ", verified as a block", rule.source,
                expression=rule.expression, lossless=True, kind=KIND.name,
                settings=(("verify_with", BLOCK_VERIFIER_NAME),))


def capped_confidence_rule(h: float, cap: int) -> Rule:
    """Stop drafting after a token whose drafter top probability is below ``h``, and after ``cap`` drafts."""
    base = confidence_threshold(h)
    return Rule(f"{base.name},n={cap}", f"{base.description}, at most {cap} drafts", base.source,
                expression=f"min(sub(draft_top_prob, {float(h)!r}), sub({cap - 0.5!r}, draft_index))",
                lossless=True, kind=KIND.name)


def _verified(rule: Rule) -> str:
    verifier = rule.setting("verify_with") or STANDARD_VERIFIER_NAME
    return {STANDARD_VERIFIER_NAME: "token", BLOCK_VERIFIER_NAME: "block"}.get(verifier, "")


def _confidence(rule: Rule) -> tuple[float, int | None] | None:
    c = constants(rule.nodes)
    capped = member(rule, capped_confidence_rule, [(c[0], round(c[1] + 0.5))] if len(c) == 2 else [])
    if capped is not None:
        return capped[0], capped[1]
    uncapped = member(rule, confidence_threshold, [(c[0],)] if len(c) == 1 else [])
    return None if uncapped is None else (uncapped[0], None)


RULES = LengthRules(length_of=lambda rule: fixed_length(rule, layout(rule)), verified=_verified,
                    make_length=fixed_length_rule, confidence_of=_confidence, make_confidence=capped_confidence_rule,
                    grid=CONFIDENCE_GRID)


def _step_policy(engine: Engine) -> KindSupport:
    columns = tuple(dict.fromkeys(c for drafted in engine.capabilities.step_columns.values() for c in drafted))

    def exact(rule: Rule, gamma: int | None) -> Setting | None:
        verifier = rule.setting("verify_with")
        if verifier not in LOOP_VERIFIERS:
            raise InputError(f"policy '{rule.name}' verifies with '{verifier}'; {engine.title} verifies drafts only "
                             f"by matching its own samples (standard_rejection under greedy decoding)")
        reads = straight_line(rule.nodes).features if rule.nodes is not None else ('?',)
        return Setting("the policy", rule, {}) if set(reads) <= set(columns) else None

    return KindSupport(exact, lambda rule, gamma, depth: [], lambda gamma: None,
                       f"a policy reading only {', '.join(columns)}", not_rules=NOT_RULES)


def suffix_knob_rule(length: int, depth: int, factor: float, min_prob: float) -> Rule:
    """Suffix decoding's own rule at vLLM's knobs (the library's offset 0), at most ``length`` drafts, as a policy of
    this kind (:func:`heuristics.length_policies.suffix_rule`; the tree ``depth`` is the setting's, which the program
    does not read)."""
    rule = suffix_rule(factor, 0.0, min_prob, length)
    return dataclasses.replace(rule, name=f"suffix:depth={depth},factor={factor:g},min_prob={min_prob:g},n={length}")


def _suffix_settings(caps, gamma: int) -> list[Setting]:
    """Suffix decoding's knobs the engine takes (:mod:`evolve.kinds.verify_length.eval_suffix`'s grids, the library's
    offset 0), at most ``gamma`` drafts, each as its rule."""
    from evolve.kinds.verify_length.eval_suffix import DEPTHS, FACTORS, MIN_PROBS

    knobs = [Setting(f"suffix depth={d},factor={f:g},min_prob={p:g}", suffix_knob_rule(gamma, d, f, p),
                     caps.suffix(gamma, d, f, p), family=EngineFamily.SUFFIX)
             for d in DEPTHS for f in FACTORS for p in MIN_PROBS]
    # a fixed length: every draft the trees give, at most L (the largest depth, no cap by the match or probability)
    lengths = [Setting(f"suffix length={n}", fixed_length_rule(n), caps.suffix(n, max(DEPTHS), max(FACTORS), 0.0),
                       family=EngineFamily.SUFFIX) for n in range(1, gamma + 1)]
    return lengths + knobs


def engine_support(engine: Engine) -> KindSupport | None:
    """What ``engine`` can express of a verification-length policy, from its capabilities (the module doc); None
    when it has no draft-length knob. An engine with suffix decoding also expresses its knobs (drafting with its
    suffix method: the settings tuned on a suffix-decoding harvest)."""
    caps = engine.capabilities
    if caps.step_policy:
        return _step_policy(engine)
    if caps.length is None:
        return KindSupport.refused("none: the engine has no draft-length knob", NOT_RULES)
    one, two = caps.length(1), caps.length(2)
    knob = ", ".join(k for k in one if one[k] != two.get(k))  # the knobs that carry the length
    nearest = f"a fixed draft length ({knob})" + (" or a capped confidence stop" if caps.confidence else "")
    found = length_support(caps, RULES, nearest, cap=(caps.default_confidence or (0, 0))[1])
    if found is None:
        return None
    if caps.suffix is not None:
        plain = found.settings
        found = dataclasses.replace(found, settings=lambda rule, gamma, depth: plain(rule, gamma, depth)
                                    + _suffix_settings(caps, gamma))
    return dataclasses.replace(found, not_rules=NOT_RULES)


def schedule(rule: Rule, directory: str | os.PathLike, costs: str | os.PathLike,
             requests: tuple[int, ...]) -> tuple[tuple[tuple[int, int, int], ...], Callable[[int, int], float]]:
    """The per-batch-size schedule of fixed draft lengths 0..gamma (the valid split's draft length) tuned on the valid
    split of ``directory`` under the cost file ``costs`` at the batch sizes ``requests``
    (:func:`evolve.kinds.verify_length.eval_schedule.batch_schedule`; standard verification), as (start, end,
    length) triples from batch size 1, the last range ending at :data:`LAST_BATCH_SIZE`, and the price of a length:
    ``throughput(length, batch size)`` -> tokens per second on valid
    (:func:`evolve.kinds.verify_length.eval_schedule.length_throughput`), so a schedule is priced as an engine reads it.

    Raises: InputError for a data or cost-file error."""
    model = at_dataset_context(load_costs(costs), directory)
    valid = EvalData.from_traces(load_split(directory, "valid"))
    table = fixed_length_table(valid, int(valid.block_length or 1), model)
    ranges = batch_schedule(table, requests, model)
    triples = tuple((r.start, LAST_BATCH_SIZE if r.end is None else r.end, r.length) for r in ranges)
    return triples, lambda length, batch: float(length_throughput(table[length], batch, model))


__all__ = ["LAST_BATCH_SIZE", "NOT_RULES", "RULES", "capped_confidence_rule", "engine_support",
           "fixed_length_rule", "schedule", "suffix_knob_rule"]
