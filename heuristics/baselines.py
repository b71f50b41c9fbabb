"""Seed 004's baselines, exactly as the seed defines them, as primitive-set expressions.

With s = min(1, p/q) the standard rule (Leviathan et al. 2023, arXiv 2211.17192;
Chen et al. 2023, arXiv 2302.01318):

* standard_rejection: s (lossless)
* always_accept: 1
* conservative: 1 if p >= q else 0
* top_token_match: 0.95 if the top tokens match else s
* entropy_aware: min(1, s * (1 - 0.5 * min(1, (H_q + H_p) / 20)))
* position_aware: min(1, s * (1 + min(position, 50) / 100))
* ratio_floor_F: max(s, F), F = 0.3 in the seed's table

Being expressions, they run through the same fused interpreter as evolved
programs, and ``Rule.python_source`` gives each as a contract function.
"""
from __future__ import annotations

from heuristics.contract import REGISTRY, Rule, register

SEED = "seed 004 (../shared/seeds/004_3ed4932ed2edc036.txt)"
STANDARD = "min(1.0, div(target_prob, draft_prob))"


def ratio_floor(floor: float = 0.3) -> Rule:
    """max(min(1, p/q), floor): standard rejection with a minimum acceptance probability."""
    return Rule(f"ratio_floor_{floor:g}", f"max(standard, {floor:g})", SEED,
                expression=f"max({STANDARD}, {float(floor)!r})", lossless=floor <= 0)


BASELINES: tuple[Rule, ...] = (
    Rule("standard_rejection", "min(1, p/q): lossless rejection sampling",
         "Leviathan et al. 2023 (arXiv 2211.17192); Chen et al. 2023 (arXiv 2302.01318)",
         expression=STANDARD, lossless=True),
    Rule("always_accept", "accept every drafted token", SEED, expression="1.0"),
    Rule("conservative", "1 if p >= q else 0", SEED, expression="if_gt(draft_prob, target_prob, 0.0, 1.0)",
         lossless=True),
    Rule("top_token_match", "0.95 if the top tokens match, else standard", SEED,
         expression=f"if_gt(top_token_match, 0.5, 0.95, {STANDARD})"),
    Rule("entropy_aware", "min(1, standard * (1 - 0.5*min(1, (H_q + H_p)/20)))", SEED,
         expression=f"min(1.0, mul({STANDARD}, sub(1.0, mul(0.5, min(1.0, "
                    "div(add(draft_entropy, target_entropy), 20.0))))))"),
    Rule("position_aware", "min(1, standard * (1 + min(position, 50)/100))", SEED,
         expression=f"min(1.0, mul({STANDARD}, add(1.0, div(min(position, 50.0), 100.0))))"),
    ratio_floor(0.3),
)

for _rule in BASELINES:
    if _rule.name not in REGISTRY:
        register(_rule)
