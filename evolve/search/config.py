"""Run configuration of ``python -m evolve run``: defaults, TOML files, command-line overrides.

A configuration is resolved in three layers, later ones winning: the defaults of
:class:`RunConfig`, the keys of a TOML file (``--config FILE.toml``, top-level
keys named as the fields below) and the options given on the command line.
Every value is validated; a bad one raises :class:`evolve.errors.InputError` with
one line naming where it came from (``option '--population'`` or
``FILE.toml: key 'population'``) and the offending value.

The resolved configuration is written into each run directory as
``config.toml`` (:func:`to_toml`), which :func:`load_toml` reads back, so
``python -m evolve run --config results/RUN/config.toml`` repeats a run.
"""
from __future__ import annotations

import difflib
import math
import os
import tomllib
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from evolve.errors import InputError
from evolve.gp.primitives import FEATURES, CORE_FEATURES

FITNESS_CHOICES: tuple[str, ...] = ("acceptance_quality", "expected", "speed_at_tv", "pareto")
#: Values of ``verify``: ``token`` evolves per-token thresholds; ``block`` evolves the weight w(features) of
#: relaxed block verification (:mod:`evolve.eval.relaxed_block`), for the block objectives only.
VERIFY_CHOICES: tuple[str, ...] = ("token", "block")
#: Objectives that read the block metrics (need ``draft_index`` and use ``gamma``).
BLOCK_FITNESS: tuple[str, ...] = ("speed_at_tv", "pareto")


@dataclass(frozen=True)
class RunConfig:
    """Everything that determines a run (same config + same data -> same champion).

    Default sizes: under the acceptance-quality fitness the landscape of the
    default (vocab) data is a needle: about 1 random tree in 2,000 scores
    above 0.6, the rest sit on a plateau at 0.5 * quality just below the
    quality floor. From random trees (``warm_start`` off), population 1000
    for 100 generations found standard rejection with 60 of 60 random seeds
    (smaller settings failed with 2-17% of the random seeds) in about 10 s
    on 2 cores; the warm start seeds it, so smaller runs are safe too.

    Attributes:
        data: dataset directory (train and valid splits are read; test never).
        out: directory under which the run directory is created.
        population: individuals per generation (>= 2).
        generations: generations after the initial one (>= 0).
        seed: random seed of Python's ``random`` (DEAP) and numpy.
        fitness: ``acceptance_quality`` (the acceptance-quality fitness on the
            sampled accept/reject outcomes, ``Metrics.fitness``: acceptance
            rate times quality score, or ``below_floor_scale`` times the
            quality score when it is below ``quality_floor``),
            ``expected`` (its noise-free form, ``Metrics.expected_fitness``),
            ``speed_at_tv`` (expected tokens per target call subject to TV per
            emitted token <= ``tv_budget``, :mod:`evolve.eval.objectives`) or
            ``pareto`` (NSGA-II over tokens per call, TV per token and program
            size; the run keeps the final non-dominated front in ``front.json``
            and its champion is the front member with the best ``speed_at_tv``
            on valid). The last two need ``draft_index`` in the data.
        gamma: draft length of the block metrics (speed_at_tv, pareto); at most
            the data's block length.
        tv_budget: TV-per-token budget of ``speed_at_tv`` (and of the champion
            choice of a ``pareto`` run), in [0, 1].
        tv_cap: ``pareto``: TV per token beyond which the speed objective is
            penalised as in ``speed_at_tv`` with this budget, so the front stays
            in the region compared by ``benchmark.py pareto`` (in [0, 1]).
        verify: ``token`` (default): the programs are per-token acceptance
            thresholds; ``block``: the programs are the weight w of relaxed
            block verification, which verifies each block against p~ = (1 - w) p
            + w q (:mod:`evolve.eval.relaxed_block`; w reads prefix-level
            features only, and the data needs ``block_residual_phi``). Only with
            the block objectives (``speed_at_tv``, ``pareto``).
        warm_start: seed the initial population with the registered rules and
            the best grid members of the published families
            (:mod:`evolve.search.warm_start`), and let the champion choice fall
            back on the best seeded rule and avoid the quality cliff
            (:mod:`evolve.search.champion`). On by default; ``False``
            (``--from-scratch``) starts from random trees only and picks the
            champion as before, which is how the rediscovery of standard
            rejection is shown.
        features: ``"auto"`` (the six :data:`evolve.gp.primitives.CORE_FEATURES`
            plus every optional column present in both train and valid) or an
            explicit list of names.
        crossover_prob: probability that a pair of offspring is recombined
            (one-point subtree crossover).
        mutation_prob: probability that an offspring is mutated (subtree,
            node-replacement, constant, shrink or hoist mutation, chosen at random).
        tournament_size: fitness tournament size of the double tournament.
        parsimony_size: size tournament of the double tournament, in [1, 2]
            (the smaller of two is kept with probability parsimony_size / 2).
        elitism: copies of the best individuals so far carried into each
            generation unchanged.
        hall_of_fame: size of the hall of fame (best on train); the champion
            is the member with the best validation fitness.
        max_depth: depth limit of crossover and mutation (Koza's 17).
        init_min_depth, init_max_depth: depth range of the ramped
            half-and-half initial trees.
        mutation_max_depth: maximum depth of a subtree grown by mutation.
        islands: number of populations (the island model,
            :mod:`evolve.search.islands`): each island is a population of
            ``population`` individuals evolved on its own, as Dask tasks; 1 (the
            default) is the plain search in this process.
        migration_interval: generations per epoch. Islands exchange migrants
            after every epoch, and the run directory gets a checkpoint after
            every epoch (also with one island), from which ``python -m evolve
            resume`` continues a killed run.
        migrants: individuals each island sends to the next one (a ring) after
            every epoch: its best ``migrants``, which replace the worst of the
            receiving island (0: isolated islands). Below ``population``.
        false_accept_weight, false_reject_weight, quality_floor,
            below_floor_scale: parameters of the acceptance-quality fitness
            (:class:`evolve.eval.evaluator.AcceptanceQualityFitness`): quality =
            max(0, 1 - false_accept_weight * false accepts / N -
            false_reject_weight * false rejects / N); fitness = acceptance
            rate * quality if quality >= quality_floor, else
            below_floor_scale * quality.
    """

    data: str = "data"
    out: str = "results"
    population: int = 1000
    generations: int = 100
    seed: int = 0
    fitness: str = "acceptance_quality"
    warm_start: bool = True
    features: Any = "auto"
    gamma: int = 5
    tv_budget: float = 0.01
    tv_cap: float = 0.05
    verify: str = "token"
    crossover_prob: float = 0.5
    mutation_prob: float = 0.5
    tournament_size: int = 3
    parsimony_size: float = 1.4
    elitism: int = 1
    hall_of_fame: int = 20
    max_depth: int = 17
    init_min_depth: int = 1
    init_max_depth: int = 3
    mutation_max_depth: int = 2
    islands: int = 1
    migration_interval: int = 10
    migrants: int = 5
    false_accept_weight: float = 10.0
    false_reject_weight: float = 0.1
    quality_floor: float = 0.95
    below_floor_scale: float = 0.5

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of the fields (features as a list or ``"auto"``)."""
        d = asdict(self)
        if not isinstance(d["features"], str):
            d["features"] = list(d["features"])
        return d

    def acceptance_quality_fitness(self):
        """The :class:`evolve.eval.evaluator.AcceptanceQualityFitness` these parameters describe."""
        from evolve.eval.evaluator import AcceptanceQualityFitness
        return AcceptanceQualityFitness(self.false_accept_weight, self.false_reject_weight,
                           self.quality_floor, self.below_floor_scale)


FIELD_NAMES: tuple[str, ...] = tuple(f.name for f in fields(RunConfig))
DEFAULTS = RunConfig()

_INT = {"population", "generations", "seed", "tournament_size", "elitism", "hall_of_fame", "max_depth",
        "init_min_depth", "init_max_depth", "mutation_max_depth", "gamma", "islands", "migration_interval",
        "migrants"}
_FLOAT = {"crossover_prob", "mutation_prob", "parsimony_size", "false_accept_weight", "false_reject_weight",
          "quality_floor", "below_floor_scale", "tv_budget", "tv_cap"}
_STR = {"data", "out", "fitness", "verify"}
_BOOL = {"warm_start"}

#: (low, high) inclusive bounds of numeric fields; None = unbounded.
_BOUNDS: dict[str, tuple[float | None, float | None]] = {
    "population": (2, 1_000_000),
    "generations": (0, 1_000_000),
    "seed": (0, 2**63 - 1),
    "tournament_size": (1, None),
    "elitism": (0, None),
    "hall_of_fame": (1, 10_000),
    "max_depth": (1, 17),
    "init_min_depth": (0, 17),
    "init_max_depth": (0, 17),
    "mutation_max_depth": (0, 17),
    "crossover_prob": (0.0, 1.0),
    "mutation_prob": (0.0, 1.0),
    "parsimony_size": (1.0, 2.0),
    "false_accept_weight": (0.0, None),
    "false_reject_weight": (0.0, None),
    "quality_floor": (0.0, 1.0),
    "below_floor_scale": (0.0, None),
    "gamma": (1, 1000),
    "islands": (1, 10_000),
    "migration_interval": (1, 1_000_000),
    "migrants": (0, None),
    "tv_budget": (0.0, 1.0),
    "tv_cap": (0.0, 1.0),
}


def _check_value(name: str, value: Any, where: str) -> Any:
    """Validate one field's value; return it in canonical form. Raises InputError naming ``where``."""
    if name in _BOOL:
        if not isinstance(value, bool):
            raise InputError(f"{where}: expected true or false (value {value!r})")
        return value
    if name in _INT:
        if isinstance(value, bool) or not isinstance(value, int):
            raise InputError(f"{where}: expected an integer (value {value!r})")
    elif name in _FLOAT:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InputError(f"{where}: expected a number (value {value!r})")
        value = float(value)
        if not math.isfinite(value):
            raise InputError(f"{where}: expected a finite number (value {value!r})")
    elif name in _STR:
        if not isinstance(value, str) or not value.strip():
            raise InputError(f"{where}: expected a non-empty string (value {value!r})")
        if name == "fitness" and value not in FITNESS_CHOICES:
            raise InputError(f"{where}: unknown fitness {value!r} (choose from {', '.join(FITNESS_CHOICES)})")
        if name == "verify" and value not in VERIFY_CHOICES:
            raise InputError(f"{where}: unknown verification {value!r} (choose from {', '.join(VERIFY_CHOICES)})")
        return value
    elif name == "features":
        return _check_features(value, where)
    lo, hi = _BOUNDS.get(name, (None, None))
    if lo is not None and value < lo:
        raise InputError(f"{where}: must be at least {lo} (value {value!r})")
    if hi is not None and value > hi:
        raise InputError(f"{where}: must be at most {hi} (value {value!r})")
    return value


def _check_features(value: Any, where: str) -> Any:
    if value == "auto":
        return "auto"
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, (list, tuple)) or not value:
        raise InputError(f"{where}: expected \"auto\" or a non-empty list of feature names (value {value!r})")
    out: list[str] = []
    for v in value:
        if not isinstance(v, str) or v not in FEATURES:
            raise InputError(f"{where}: unknown feature {v!r} (known: {', '.join(FEATURES)})")
        if v in out:
            raise InputError(f"{where}: feature {v!r} is listed twice")
        out.append(v)
    return tuple(f for f in FEATURES if f in out)


def _check_relations(cfg: RunConfig, origin: dict[str, str]) -> None:
    if cfg.init_min_depth > cfg.init_max_depth:
        raise InputError(f"{origin['init_min_depth']}: init_min_depth {cfg.init_min_depth} is greater than "
                         f"init_max_depth {cfg.init_max_depth}")
    for name in ("init_max_depth", "mutation_max_depth"):
        if getattr(cfg, name) > cfg.max_depth:
            raise InputError(f"{origin[name]}: {name} {getattr(cfg, name)} exceeds max_depth {cfg.max_depth}")
    if cfg.islands > 1 and cfg.migrants >= cfg.population:
        raise InputError(f"{origin['migrants']}: migrants {cfg.migrants} must be smaller than the population "
                         f"({cfg.population})")
    if cfg.verify != "token" and cfg.fitness not in BLOCK_FITNESS:
        raise InputError(f"{origin['verify']}: verification {cfg.verify!r} needs a block objective (fitness "
                         f"{' or '.join(BLOCK_FITNESS)}; value of fitness {cfg.fitness!r})")
    if cfg.elitism >= cfg.population:
        raise InputError(f"{origin['elitism']}: elitism {cfg.elitism} must be smaller than the population "
                         f"({cfg.population})")


def option_name(name: str) -> str:
    """The command-line option of field ``name`` (``--population``)."""
    return "--" + name.replace("_", "-")


def load_toml(path: str | os.PathLike) -> dict[str, Any]:
    """Read a TOML run configuration; returns {field: value} (validated, not merged).

    Keys are field names of :class:`RunConfig` (a dash may replace an
    underscore). Raises InputError for a missing or unreadable file, invalid
    TOML, an unknown key (with the closest known one) or a bad value.
    """
    path = os.fspath(path)
    try:
        with open(path, "rb") as fh:
            raw = tomllib.load(fh)
    except FileNotFoundError:
        raise InputError(f"{path}: no such configuration file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, expected a TOML file") from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{path}: not valid TOML ({' '.join(str(exc).split())})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read ({' '.join(str(exc).split())})") from None
    out: dict[str, Any] = {}
    for key, value in raw.items():
        name = key.replace("-", "_")
        if name == "include_standard":
            raise InputError(f"{path}: key '{key}' was replaced by 'warm_start' (true seeds the registered "
                             "rules, standard rejection among them; false starts from random trees)")
        if name not in FIELD_NAMES:
            close = difflib.get_close_matches(name, FIELD_NAMES, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else f" (known: {', '.join(FIELD_NAMES)})"
            raise InputError(f"{path}: unknown key '{key}'{hint}")
        if name in out:
            raise InputError(f"{path}: key '{key}' is given twice")
        out[name] = _check_value(name, value, f"{path}: key '{key}'")
    return out


def resolve(options: dict[str, Any] | None = None, config_file: str | os.PathLike | None = None) -> RunConfig:
    """Merge defaults, a TOML file and command-line options into a validated :class:`RunConfig`.

    Args:
        options: {field: value} given on the command line; ``None`` values are
            "not given" and ignored.
        config_file: optional TOML file (see :func:`load_toml`).

    Raises: InputError naming the option or file key of the first bad value.
    """
    values: dict[str, Any] = {}
    origin = {name: f"option '{option_name(name)}'" for name in FIELD_NAMES}
    if config_file is not None:
        for name, value in load_toml(config_file).items():
            values[name] = value
            origin[name] = f"{os.fspath(config_file)}: key '{name}'"
    for name, value in (options or {}).items():
        if name not in FIELD_NAMES:
            raise InputError(f"option '{option_name(name)}': unknown option")
        if value is None:
            continue
        values[name] = _check_value(name, value, f"option '{option_name(name)}'")
        origin[name] = f"option '{option_name(name)}'"
    cfg = replace(DEFAULTS, **values)
    _check_relations(cfg, origin)
    return cfg


def to_toml(cfg: RunConfig) -> str:
    """The configuration as TOML text (every field, in declaration order); :func:`load_toml` reads it back."""
    lines = ["# python -m evolve run --config THIS_FILE repeats the run"]
    for name, value in cfg.to_dict().items():
        lines.append(f"{name} = {_toml_value(value)}")
    return "\n".join(lines) + "\n"


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace('"', '\\"')
        escaped = "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in escaped)
        return f'"{escaped}"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} as TOML")


def resolve_features(cfg: RunConfig, available: tuple[str, ...], source: str) -> tuple[str, ...]:
    """The terminal features of a run: ``cfg.features`` checked against the columns ``available``.

    ``"auto"`` gives the six :data:`evolve.gp.primitives.CORE_FEATURES` plus every available optional one;
    with ``verify = "block"`` the features that depend on the drafted token
    (:data:`evolve.eval.relaxed_block.TOKEN_FEATURES`) are left out, and asking for one is refused.
    Raises InputError naming ``source`` when a requested feature is missing.
    """
    from evolve.eval.relaxed_block import TOKEN_FEATURES

    relaxed = cfg.verify == "block"
    if cfg.features == "auto":
        return tuple(f for f in FEATURES if (f in CORE_FEATURES or f in available)
                     and not (relaxed and f in TOKEN_FEATURES))
    if relaxed:
        token = [f for f in cfg.features if f in TOKEN_FEATURES]
        if token:
            raise InputError(f"option '--features': '{token[0]}' depends on the drafted token; the weight of relaxed "
                             "block verification (verify = block) may read prefix-level features only")
    missing = [f for f in cfg.features if f not in available]
    if missing:
        raise InputError(f"{source}: no column '{missing[0]}' in train and valid, but the features setting "
                         f"(option '--features') asks for it")
    return tuple(cfg.features)


__all__ = ["RunConfig", "DEFAULTS", "FIELD_NAMES", "FITNESS_CHOICES", "VERIFY_CHOICES", "BLOCK_FITNESS", "load_toml", "resolve", "to_toml",
           "resolve_features", "option_name"]
