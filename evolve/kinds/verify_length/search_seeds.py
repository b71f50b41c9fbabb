"""The warm start of a verification-length search (``evolve = "verify-length"``).

Its programs are verification-length policies (:mod:`evolve.kinds.verify_length.eval_policy`), so the
registered acceptance rules cannot seed it. The known policies are the competitors of
``benchmark.py``'s verification-length rows written as programs: every fixed draft length
G = 0..gamma (``sub(G - 0.5, draft_index)``: draft while fewer than G tokens are drafted; G = 0 is
plain decoding) and the confidence threshold at every h of
:data:`heuristics.length_policies.CONFIDENCE_GRID` (``sub(draft_top_prob, h)``, or ``draft_prob``
without that column). All are scored on train in one batched call; the seeds are the best of each
group by the run's objective, then the learned logistic stopping rule trained on train with its threshold tuned
there (:func:`evolve.kinds.verify_length.eval_learned.logistic_seed`: a linear formula over the run's features, the
history included), then the other fixed lengths (so the search starts from every length), at most
:data:`evolve.search.warm_start.MAX_SEED_FRACTION` of the population.
"""
from __future__ import annotations

from typing import Callable

from evolve.eval.evaluator import EvalData
from evolve.kinds.verify_length.eval_rows import Scoring
from evolve.kinds.verify_length.eval_learned import logistic_seed
from evolve.kinds.verify_length.eval_policy import LengthMetrics, LengthPopulationEvaluator
from heuristics.length_policies import CONFIDENCE_GRID, suffix_rule
from evolve.search.config import RunConfig
from evolve.search.warm_start import Seed, Skipped, WarmStart, fill_seeds, unusable
from evolve.kinds.verify_length import KIND
from heuristics.contract import Rule


def fixed_length_expression(length: int) -> str:
    """The policy program of the fixed draft length ``length``."""
    return f"sub({length - 0.5!r}, draft_index)"


def confidence_expression(h: float, column: str) -> str:
    """The policy program ``column - h`` (draft on while the last drafted token's confidence is above h)."""
    return f"sub({column}, {h!r})"


def suffix_knob_seeds() -> list[tuple[str, str]]:
    """(name, program) of suffix decoding's rule over the grids of its knobs
    (:mod:`evolve.kinds.verify_length.eval_suffix`)."""
    from evolve.kinds.verify_length.eval_suffix import FACTORS, MIN_PROBS, OFFSETS

    rules = (suffix_rule(f, o, p) for f in FACTORS for o in OFFSETS for p in MIN_PROBS)
    return [(rule.name, rule.expression) for rule in rules]


def choose_length_seeds(cfg: RunConfig, train: EvalData, gamma: int,
                        objective: Callable[[LengthMetrics], float], features: tuple[str, ...] = ()) -> WarmStart:
    """The seeds of a warm-started verification-length search (see the module doc); ``features``: the run's terminal
    features (empty: all), a candidate reading another left out and recorded in the warm start's ``skipped``.

    Raises: InputError when the split lacks draft_index.
    """
    scorer = LengthPopulationEvaluator(train, cfg.acceptance_quality_fitness(), gamma=gamma, cache_size=0,
                                       costs=cfg.cost_model, verifier=cfg.settings.verifier,
                                       weighting=cfg.settings.length_weighting)
    column = "draft_top_prob" if "draft_top_prob" in scorer.data.available else "draft_prob"
    warm = WarmStart()

    def usable(named: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """The candidates reading only the run's features; the others recorded as skipped, with why."""
        if not features:
            return named
        keep = []
        for name, expr in named:
            why = unusable(Rule(name, expression=expr, kind=KIND.name), tuple(features))
            if why is None:
                keep.append((name, expr))
            else:
                warm.skipped.append(Skipped(name, f"{why} (the run's setting 'features')"))
        return keep

    fixed = usable([(f"fixed_gamma={g}", fixed_length_expression(g)) for g in range(gamma + 1)])
    conf = usable([(f"confidence_threshold(h={h:g})", confidence_expression(h, column)) for h in CONFIDENCE_GRID])
    knobs = usable(suffix_knob_seeds()) if "suffix_cumprob" in scorer.data.available else []
    named = fixed + conf + knobs
    values = [objective(m) for m in scorer.evaluate([e for _, e in named])] if named else []
    ordered = []
    if fixed:
        best_fixed = max(range(len(fixed)), key=lambda i: (values[i], -i))
        ordered.append(Seed(*named[best_fixed], "the best fixed draft length on train"))
    if conf:
        best_conf = len(fixed) + max(range(len(conf)), key=lambda i: (values[len(fixed) + i], -i))
        ordered.append(Seed(*named[best_conf], f"the best confidence threshold on {column} on train"))
    if knobs:
        at = len(fixed) + len(conf)
        best_knobs = at + max(range(len(knobs)), key=lambda i: (values[at + i], -i))
        ordered.append(Seed(*named[best_knobs], "suffix decoding's own rule with the best knobs on train"))
    learned = logistic_seed(Scoring(train, gamma, cfg.cost_model, cfg.settings.verifier, cfg.settings.length_weighting),
                            tuple(features), objective) if features else None
    if learned is not None:
        ordered.append(Seed(f"learned_logistic(h={learned[1]:g})", learned[0],
                            "the logistic stopping rule trained on train, its threshold tuned on train"))
    ordered += [Seed(name, expr, "a fixed draft length") for name, expr in fixed]
    return fill_seeds(warm, ordered, cfg.population)

__all__ = ["fixed_length_expression", "confidence_expression", "choose_length_seeds", "suffix_knob_seeds"]
