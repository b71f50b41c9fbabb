"""What an engine can express of a relaxation weight (the kind's ``engines`` hook), from its capabilities: the
weight w = 0 is lossless block verification (Sun et al. 2024, arXiv 2403.10444), written where the engine verifies
drafts as a block; no engine runs the relaxed target (1 - w) p + w q of another weight, so a weight that is not 0 is
tuned to block verification (or refused without data); an engine without block verification refuses the kind,
naming the standard rule as the nearest setting."""
from __future__ import annotations

from evolve.export.engines.base import Engine, KindSupport, Setting
from evolve.export.engines.shapes import constant_value
from evolve.export.exporter import layout
from evolve.kinds.relaxation import KIND
from heuristics.contract import Rule

#: The refusal's nearest setting on an engine without block verification.
NEAREST = "lossless token-wise verification: export the standard rule (standard_rejection)"


def block_rule() -> Rule:
    """The relaxation weight w = 0: lossless block verification."""
    return Rule("block_verification:w=0", "lossless block verification",
                "block verification, Sun et al. 2024 (arXiv 2403.10444)", expression="0.0", lossless=True,
                kind=KIND.name)


def engine_support(engine: Engine) -> KindSupport:
    """What ``engine`` can express of a relaxation weight (the module doc)."""
    caps = engine.capabilities
    if caps.block is None:
        return KindSupport.refused(NEAREST)
    block = Setting("block, w=0", block_rule(), {**(caps.lossless or {}), **caps.block}, caps.block_condition)

    def exact(rule: Rule, gamma: int | None) -> Setting | None:
        value = constant_value(rule, layout(rule))
        return block if value is not None and value == 0.0 else None

    knob = ", ".join(k if v is True else f"{k}: {v}" for k, v in caps.block.items())
    return KindSupport(exact, lambda rule, gamma, depth: [block], lambda gamma: None,
                       f"lossless block verification ({knob})")


__all__ = ["NEAREST", "block_rule", "engine_support"]
