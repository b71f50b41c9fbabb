"""Which warm start a search gets: the known rules, or for relaxed block verification the fixed-w family.

A per-token search (``verify = "token"``) is seeded with the registered rules and the best members of
the rule families (:func:`evolve.search.warm_start.choose_seeds`); a relaxed block verification search
(``verify = "block"``), whose programs are weights w(features), with lossless block verification and
the fixed-w family (:func:`evolve.search.relaxed_seeds.choose_relaxed_seeds`).
"""
from __future__ import annotations

from typing import Callable

from evolve.eval.evaluator import EvalData, Metrics
from evolve.search.config import RunConfig
from evolve.search.relaxed_seeds import choose_relaxed_seeds
from evolve.search.warm_start import WarmStart, choose_seeds


def choose_initial_seeds(cfg: RunConfig, features: tuple[str, ...], train: EvalData, gamma: int | None,
                         objective: Callable[[Metrics], float]) -> WarmStart:
    """The seeds of a warm-started search (arguments as :func:`evolve.search.warm_start.choose_seeds`)."""
    if getattr(cfg, "verify", "token") == "block":
        return choose_relaxed_seeds(cfg, train, gamma, objective)
    return choose_seeds(cfg, features, train, gamma, objective)


__all__ = ["choose_initial_seeds"]
