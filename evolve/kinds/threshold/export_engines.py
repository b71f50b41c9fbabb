"""What an engine can express of an acceptance threshold (the kind's ``engines`` hook), from its capabilities: the
standard rule is every engine's lossless verification; a member of a family the engine ships (SGLang's two accept
thresholds, TensorRT-LLM's relaxed acceptance) is its knobs; anything else is tuned among those (or refused without
data). An engine that runs only a drafting policy (llama-cpp-python's draft model) refuses the kind."""
from __future__ import annotations

from evolve.export.engines.base import Engine, KindSupport
from evolve.export.engines.supports import threshold_support
from heuristics.contract import STANDARD_RULE


def engine_support(engine: Engine) -> KindSupport:
    """What ``engine`` can express of an acceptance threshold (the module doc)."""
    caps = engine.capabilities
    if caps.step_policy:
        return KindSupport.refused("its own verification (the standard rule under greedy decoding) with a fixed "
                                   "draft length (export fixed_gamma:gamma=G)")
    families = ", ".join(f.make.__name__ for f in caps.families)
    nearest = (f"the {families} family" if families else "the standard rule") + \
        (f" ({', '.join(f'{k}: {v}' for k, v in caps.lossless.items())} for the standard rule)" if caps.lossless
         else " (the engine's own verification)")
    return threshold_support(caps, STANDARD_RULE, nearest)


__all__ = ["engine_support"]
