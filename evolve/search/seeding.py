"""Which warm start a search gets, by the kind of program it evolves (:mod:`evolve.gp.kinds`).

A ``threshold`` search is seeded with the registered rules and the best members of the rule
families (:func:`evolve.search.warm_start.choose_seeds`); a ``relaxation`` search, whose programs
are weights w(features) of relaxed block verification, with lossless block verification (w = 0)
and the fixed-w family (:func:`evolve.search.relaxed_seeds.choose_relaxed_seeds`); a ``verify-length``
search with the fixed draft lengths and confidence thresholds (:mod:`evolve.search.length_seeds`); a
``tree-shape`` search with the fixed-width and adaptive-width trees, EAGLE-2's per-level top-k and the level
gates (:mod:`evolve.search.tree_seeds`).
"""
from __future__ import annotations

from typing import Callable

from evolve.errors import InputError
from evolve.eval.evaluator import EvalData, Metrics
from evolve.gp.kinds import RELAXATION, THRESHOLD, TREE_SHAPE, VERIFY_LENGTH
from evolve.search.length_seeds import choose_length_seeds
from evolve.search.config import RunConfig
from evolve.search.relaxed_seeds import choose_relaxed_seeds
from evolve.search.tree_seeds import choose_tree_seeds
from evolve.search.warm_start import WarmStart, choose_seeds


def _threshold_seeds(cfg: RunConfig, features: tuple[str, ...], train: EvalData, gamma: int | None,
                     objective: Callable[[Metrics], float]) -> WarmStart:
    return choose_seeds(cfg, features, train, gamma, objective)


def _relaxation_seeds(cfg: RunConfig, features: tuple[str, ...], train: EvalData, gamma: int | None,
                      objective: Callable[[Metrics], float]) -> WarmStart:
    return choose_relaxed_seeds(cfg, train, gamma, objective)


def _length_seeds(cfg: RunConfig, features: tuple[str, ...], train: EvalData, gamma: int | None,
                  objective: Callable[[Metrics], float]) -> WarmStart:
    return choose_length_seeds(cfg, train, gamma, objective)


def _tree_seeds(cfg: RunConfig, features: tuple[str, ...], train: EvalData, gamma: int | None,
                objective: Callable[[Metrics], float]) -> WarmStart:
    return choose_tree_seeds(cfg, features, train, objective)


#: The warm start of each kind, by kind name.
SEEDERS: dict[str, Callable[..., WarmStart]] = {THRESHOLD.name: _threshold_seeds, RELAXATION.name: _relaxation_seeds,
                                                VERIFY_LENGTH.name: _length_seeds, TREE_SHAPE.name: _tree_seeds}


def choose_initial_seeds(cfg: RunConfig, features: tuple[str, ...], train: EvalData, gamma: int | None,
                         objective: Callable[[Metrics], float]) -> WarmStart:
    """The seeds of a warm-started search (arguments as :func:`evolve.search.warm_start.choose_seeds`).

    Raises: InputError (param ``warm_start``) for a kind with no warm start (run it with warm_start off).
    """
    seeder = SEEDERS.get(cfg.program_kind.name)
    if seeder is None:
        raise InputError(f"no warm start for {cfg.evolve} programs; start from random trees",
                         param="warm_start")
    return seeder(cfg, features, train, gamma, objective)


__all__ = ["SEEDERS", "choose_initial_seeds"]
