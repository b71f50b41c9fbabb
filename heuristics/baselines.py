"""The baseline rules as primitive-set expressions (plain data: :data:`BASELINES`).

With s = min(1, p/q), the standard rule (Leviathan, Kalman, Matias 2023, arXiv
2211.17192; Chen et al. 2023, arXiv 2302.01318), p = ``target_prob`` and
q = ``draft_prob`` of the drafted token, H_q and H_p the draft's and the
target's entropies in nats:

* standard_rejection: s (lossless; the same object as
  :data:`heuristics.contract.STANDARD_RULE`)
* always_accept: 1 (every drafted token is kept: the speed ceiling)
* conservative: 1 if p >= q else 0 (keeps only tokens the target likes at least
  as much as the draft; lossless since 0 and 1 never exceed p/q there)
* top_token_match: 0.95 if the two models' most likely tokens agree, else s
* entropy_aware: s scaled down by up to half as the summed entropies grow:
  min(1, s * (1 - 0.5 * min(1, (H_q + H_p) / 20)))
* position_aware: s scaled up by up to half with the position in the
  sequence: min(1, s * (1 + min(position, 50) / 100))
* ratio_floor_F: max(s, F), a minimum acceptance probability F (0.3 in the table)

All but the standard rule are this project's hand-written reference points
for the acceptance-quality benchmark table, not published methods. Being
expressions, they run through the same fused interpreter as evolved programs,
and ``Rule.python_source`` gives each as a contract function. This module only
defines data; :mod:`heuristics.registry` registers it.
"""
from __future__ import annotations

from heuristics.contract import STANDARD, STANDARD_RULE, Rule

#: Source of the hand-written baselines.
PROJECT = "hand-written baseline of this project (heuristics/baselines.py)"


def ratio_floor(floor: float = 0.3) -> Rule:
    """max(min(1, p/q), floor): standard rejection with a minimum acceptance probability ``floor``.

    Lossless iff floor <= 0 (a positive floor exceeds p/q for tokens with p < floor*q).
    """
    return Rule(f"ratio_floor_{floor:g}", f"max(standard, {floor:g})", PROJECT,
                expression=f"max({STANDARD}, {float(floor)!r})", lossless=floor <= 0)


#: The baselines in table order (the standard rule first).
BASELINES: tuple[Rule, ...] = (
    STANDARD_RULE,
    Rule("always_accept", "accept every drafted token", PROJECT, expression="1.0"),
    Rule("conservative", "1 if p >= q else 0", PROJECT, expression="if_gt(draft_prob, target_prob, 0.0, 1.0)",
         lossless=True),
    Rule("top_token_match", "0.95 if the top tokens match, else standard", PROJECT,
         expression=f"if_gt(top_token_match, 0.5, 0.95, {STANDARD})"),
    Rule("entropy_aware", "min(1, standard * (1 - 0.5*min(1, (H_q + H_p)/20)))", PROJECT,
         expression=f"min(1.0, mul({STANDARD}, sub(1.0, mul(0.5, min(1.0, "
                    "div(add(draft_entropy, target_entropy), 20.0))))))"),
    Rule("position_aware", "min(1, standard * (1 + min(position, 50)/100))", PROJECT,
         expression=f"min(1.0, mul({STANDARD}, add(1.0, div(min(position, 50.0), 100.0))))"),
    ratio_floor(0.3),
)

__all__ = ["BASELINES", "PROJECT", "ratio_floor"]
