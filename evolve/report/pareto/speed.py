"""Tokens per second in ``benchmark.py pareto --costs FILE``.

Every point of the comparison verifies ``gamma`` drafts per target call, so under a cost file
(:mod:`evolve.eval.costs`) one call costs the same S = target_forward_s(gamma + 1) + gamma *
draft_token_s seconds for every rule, and tokens per second = tokens per call / S: the curves keep
their order. :func:`speed_summary` gives, at every budget, the fastest curve or reference, its
tokens per call, tokens per second and speedup over plain decoding (tokens per second times
``plain_token_s``).
"""
from __future__ import annotations

from typing import Any

from evolve.eval.costs import Costs
from evolve.report.pareto.curves import budget_key


def speed_summary(comp, costs: Costs) -> dict[str, Any]:
    """``{"cost_file", "seconds_per_call", "plain_token_s", "best_at_budget": {budget: {curve, tokens_per_call,
    tokens_per_second, speedup}}}`` of a :class:`evolve.report.pareto.curves.ParetoComparison`."""
    seconds = costs.fixed_gamma_seconds(comp.gamma)
    best: dict[str, Any] = {}
    for b in comp.budgets:
        key = budget_key(b)
        found = [(c.best_at_budget.get(key), name) for name, c in {**comp.curves, **comp.references}.items()]
        found = [(v, name) for v, name in found if v is not None]
        if not found:
            best[key] = None
            continue
        tpc, name = max(found)
        best[key] = {"curve": name, "tokens_per_call": tpc, "tokens_per_second": tpc / seconds,
                     "speedup": tpc / seconds * costs.plain_token_s}
    return {"cost_file": costs.source, "seconds_per_call": seconds, "plain_token_s": costs.plain_token_s,
            "best_at_budget": best}


def speed_lines(comp, costs: Costs) -> list[str]:
    """The table's lines of :func:`speed_summary`."""
    s = speed_summary(comp, costs)
    parts = [f"TV<={k}: {v['curve']} {v['tokens_per_second']:.4g} tok/s ({v['speedup']:.3f}x)"
             for k, v in s["best_at_budget"].items() if v is not None]
    return [f"under the cost file {s['cost_file']}: a call of gamma {comp.gamma} costs {s['seconds_per_call']:.4g} s, "
            f"plain decoding {1 / s['plain_token_s']:.4g} tok/s; fastest at each budget: " + "; ".join(parts)]


__all__ = ["speed_summary", "speed_lines"]
