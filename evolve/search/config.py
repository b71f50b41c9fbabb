"""Run configuration of ``python -m evolve run``: defaults, TOML files, command-line overrides.

A configuration is resolved in three layers, later ones winning: the defaults of
:class:`RunConfig`, the keys of a TOML file (``--config FILE.toml``, top-level
keys named as the fields below) and the options given on the command line.
Every value is validated against its field's metadata (type, bounds, choices:
:func:`setting_of`); a bad one raises :class:`evolve.errors.InputError` with one
line and the offending value, naming the file and key (``FILE.toml: key
'population'``) or carrying the field as ``param`` (the command line names its
option). Keys of older configurations (``fitness``, ``verify``) are read under
their new names (:data:`LEGACY_KEYS`), so older run directories and checkpoints
still load.

The resolved configuration is written into each run directory as
``config.toml`` (:func:`to_toml`), which :func:`load_toml` reads back, so
``python -m evolve run --config results/RUN/config.toml`` repeats a run.
"""
from __future__ import annotations

import difflib
import math
import os
import tomllib
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Callable, Iterable

from evolve.errors import InputError
from evolve.kinds.base import ProgramKind
from evolve.kinds.registry import KINDS, LEGACY_VERIFY, program_kind
from evolve.gp.primitives import FEATURES, CORE_FEATURES

#: Keys of older run configurations and what they became: ``fitness`` is now ``objective``
#: (:mod:`evolve.eval.objectives`); ``verify`` (``token`` or ``block``) is now ``evolve`` (the kind
#: of program, :mod:`evolve.kinds.registry`; ``token`` became ``threshold`` and ``block`` ``relaxation``).
LEGACY_KEYS: dict[str, str] = {"fitness": "objective", "verify": "evolve"}


def _setting(default: Any, value_type: type, help: str, low: float | None = None, high: float | None = None,
             choices: Callable[[], Iterable[str]] | None = None) -> Any:
    """A :class:`RunConfig` field with its type, bounds, choices and help in the field's metadata."""
    return field(default=default, metadata={"type": value_type, "low": low, "high": high, "help": help,
                                            "choices": choices})


#: Values of the ``selection`` setting: the champion guard on valid, or on out-of-fold scores.
SELECTIONS: tuple[str, ...] = ("valid", "cv")


def _objective_names() -> tuple[str, ...]:
    from evolve.eval.objectives import OBJECTIVES
    return tuple(OBJECTIVES)


def _kind_names() -> tuple[str, ...]:
    return tuple(KINDS)


@dataclass(frozen=True)
class RunConfig:
    """Everything that determines a run (same config + same data -> same champion).

    Each field's type, bounds and one-line help are in its metadata (:func:`setting_of`); the
    command line (``python -m evolve run``) builds its options from them, and :func:`resolve`
    checks values against them.

    Default sizes: under the acceptance-quality objective the landscape of the
    default (vocab) data is a needle: about 1 random tree in 2,000 scores
    above 0.6, the rest sit on a plateau at 0.5 * quality just below the
    quality floor. From random trees (``warm_start`` off), population 1000
    for 100 generations found standard rejection with 60 of 60 random seeds
    (smaller settings failed with 2-17% of the random seeds) in about 10 s
    on 2 cores; the warm start seeds it, so smaller runs are safe too.

    Fields that need more than their help line:

    * objective: what the run optimises, a registered
      :class:`evolve.eval.objectives.Objective`: ``acceptance_quality`` (acceptance rate times
      quality score on the sampled outcomes, ``Metrics.fitness``), ``expected`` (its noise-free
      form), ``speed_at_tv`` (tokens per call subject to TV per token <= ``tv_budget``) or
      ``pareto`` (NSGA-II over tokens per call, TV per token and program size; the final front is
      kept in ``front.json`` and the champion is the front member with the best ``speed_at_tv`` on
      valid). The block objectives need ``draft_index`` in the data. Not given, it defaults from the
      kind (:func:`resolve`): ``acceptance_quality`` where it scores the kind, else the kind's first objective
      (:attr:`evolve.kinds.base.ProgramKind.objectives`: ``speed_at_tv`` for ``relaxation``,
      ``tokens_per_second`` for ``verify-length`` and ``tree-shape``).
    * evolve: the kind of program evolved (:mod:`evolve.kinds.registry`): ``threshold`` (per-token
      acceptance thresholds) or ``relaxation`` (the weight w of relaxed block verification, which
      verifies each block against (1 - w) p + w q, :mod:`evolve.eval.relaxed_block`; w reads
      prefix-level features only and the data needs ``block_residual_phi``). The objective must
      score that kind.
    * warm_start: seed the initial population with the registered rules and the best grid members
      of the published families (:mod:`evolve.search.warm_start`), and let the champion choice fall
      back on the best seeded rule and avoid the quality cliff (:mod:`evolve.search.champion`); an evolved
      choice must beat the best seeded rule by more than the noise of valid's texts (:mod:`evolve.search.guard`).
      ``False`` (``--from-scratch``) starts from random trees only, which is how the rediscovery of
      standard rejection is shown.
    * features: ``"auto"`` (the six :data:`evolve.gp.primitives.CORE_FEATURES` plus every optional
      column present in both train and valid, less those the kind may not read) or a list of names.
    * islands, migration_interval, migrants: the island model (:mod:`evolve.search.islands`): each
      island is a population of ``population`` individuals evolved as a Dask task; islands send
      their best ``migrants`` to the next one (a ring) after every epoch of ``migration_interval``
      generations, and the run directory gets a checkpoint after every epoch (also with one
      island), from which ``python -m evolve resume`` continues a killed run.
    * selection, cv_folds: ``valid`` judges an evolved champion against the best seeded competitor by a bootstrap over
      valid's texts (:mod:`evolve.search.guard`); ``cv`` by cross-validation over the texts of train and valid
      (:mod:`evolve.search.crossval`): ``cv_folds`` more searches, each on the other folds, scored on the fold it did
      not see. ``valid`` is the default because ``cv`` costs about ``cv_folds`` times the search's time
      (docs/results/speed.md measures it); use ``cv`` where valid holds few texts.
    * false_accept_weight, false_reject_weight, quality_floor, below_floor_scale: the
      acceptance-quality fitness (:class:`evolve.eval.evaluator.AcceptanceQualityFitness`):
      quality = max(0, 1 - false_accept_weight * false accepts / N - false_reject_weight * false
      rejects / N); fitness = acceptance rate * quality if quality >= quality_floor, else
      below_floor_scale * quality.
    """

    data: str = _setting("data", str, "Dataset directory (train and valid are read, test never).")
    out: str = _setting("results", str, "Directory in which the run directory is created.")
    population: int = _setting(1000, int, "Individuals per generation.", 2, 1_000_000)
    generations: int = _setting(100, int, "Generations after the initial population.", 0, 1_000_000)
    seed: int = _setting(0, int, "Random seed of Python's random (DEAP) and numpy (same seed + same data = same "
                                 "champion).", 0, 2**63 - 1)
    objective: str = _setting("acceptance_quality", str, "What the run optimises on train (a registered objective; "
                                                         "default: acceptance_quality for threshold runs, else "
                                                         "the kind's first objective).",
                              choices=_objective_names)
    evolve: str = _setting("threshold", str, "Kind of program evolved (a registered kind, evolve.kinds.registry).",
                           choices=_kind_names)
    warm_start: bool = _setting(True, bool, "Seed the registered rules and the best family members.")
    features: Any = _setting("auto", tuple, "Terminal features: auto or a list of feature names.")
    gamma: int = _setting(5, int, "Draft length of the block objectives (speed_at_tv, pareto); at most the data's "
                                  "block length.", 1, 1000)
    tv_budget: float = _setting(0.01, float, "TV-per-token budget of speed_at_tv and of a pareto run's champion.",
                                0.0, 1.0)
    tv_cap: float = _setting(0.05, float, "pareto: TV per token beyond which the speed objective is penalised.",
                             0.0, 1.0)
    costs: str = _setting("default", str, "Cost file (JSON: target_forward_s, draft_token_s, plain_token_s) of the "
                                          "tokens-per-second objective; default: flat verification, drafts at 0.05 "
                                          "of a target step.")
    kind_settings: Any = field(default=None, metadata={"type": "kind", "low": None, "high": None, "choices": None,
                                                        "help": "The evolved kind's own settings (its settings "
                                                                "record; None: its defaults)."})
    selection: str = _setting("valid", str, "How an evolved champion is judged against the seeded competitors: valid "
                                            "(the champion guard's bootstrap over valid's texts) or cv "
                                            "(cross-validation over the texts of train and valid: cv_folds more "
                                            "searches; evolve.search.crossval).", choices=lambda: SELECTIONS)
    cv_folds: int = _setting(4, int, "Folds of selection cv (each a search on the other folds).", 2, 1000)
    concurrency: int = _setting(1, int, "Concurrent requests the tokens-per-second objective serves (the cost "
                                        "file's batch_forward_s curve prices a step over all their tokens).", 1,
                                100_000)
    crossover_prob: float = _setting(0.5, float, "Probability that a pair of offspring is recombined.", 0.0, 1.0)
    mutation_prob: float = _setting(0.5, float, "Probability that an offspring is mutated.", 0.0, 1.0)
    tournament_size: int = _setting(3, int, "Fitness tournament size of the double tournament.", 1)
    parsimony_size: float = _setting(1.4, float, "Size tournament of the double tournament (the smaller of two is "
                                                 "kept with probability parsimony_size / 2).", 1.0, 2.0)
    elitism: int = _setting(1, int, "Best individuals carried over unchanged.", 0)
    hall_of_fame: int = _setting(20, int, "Hall of fame size (the champion is the best of it on valid).", 1, 10_000)
    max_depth: int = _setting(17, int, "Tree depth limit of crossover and mutation (Koza's 17).", 1, 17)
    init_min_depth: int = _setting(1, int, "Smallest depth of the ramped half-and-half initial trees.", 0, 17)
    init_max_depth: int = _setting(3, int, "Largest depth of the ramped half-and-half initial trees.", 0, 17)
    mutation_max_depth: int = _setting(2, int, "Largest depth of a subtree grown by mutation.", 0, 17)
    islands: int = _setting(1, int, "Populations of the island model, each evolved as a Dask task (1: one "
                                    "population in this process).", 1, 10_000)
    migration_interval: int = _setting(10, int, "Generations per epoch: islands exchange migrants, and the run is "
                                                "checkpointed, after every epoch.", 1, 1_000_000)
    migrants: int = _setting(5, int, "Best individuals each island sends to the next (ring) after every epoch.", 0)
    false_accept_weight: float = _setting(10.0, float, "Acceptance quality: weight of false accepts.", 0.0)
    false_reject_weight: float = _setting(0.1, float, "Acceptance quality: weight of false rejects.", 0.0)
    quality_floor: float = _setting(0.95, float, "Acceptance quality: the quality floor.", 0.0, 1.0)
    below_floor_scale: float = _setting(0.5, float, "Acceptance quality: the factor of the quality score below the "
                                                    "floor.", 0.0)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of the settings: the fields (features as a list or ``"auto"``), the kind's own settings
        (:attr:`settings`) written in the place of ``kind_settings``, each under its name (as run documents and
        ``config.toml`` hold them)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            if f.name == "kind_settings":
                out.update(asdict(self.settings))
            else:
                value = getattr(self, f.name)
                out[f.name] = list(value) if f.name == "features" and not isinstance(value, str) else value
        return out

    @property
    def settings(self) -> Any:
        """The settings record of the run's kind (:attr:`evolve.kinds.base.ProgramKind.settings`): ``kind_settings``,
        or the kind's defaults."""
        return self.kind_settings if self.kind_settings is not None else self.program_kind.settings()

    def replacing(self, **values: Any) -> "RunConfig":
        """This configuration with ``values`` (setting name -> value) replaced: fields, and the kind's own settings
        (in :attr:`kind_settings`). Values are not checked (:func:`resolve` checks them)."""
        own = {n: values.pop(n) for n in list(values) if n in self.program_kind.setting_names}
        cfg = replace(self, **values) if values else self
        return replace(cfg, kind_settings=replace(cfg.settings, **own)) if own else cfg

    def setting(self, name: str) -> Any:
        """The value of the run setting ``name``: a field, one of the kind's own settings, or None for another kind's
        setting (this run does not read it)."""
        if name in self.program_kind.setting_names:
            return getattr(self.settings, name)
        return getattr(self, name) if name in FIELD_NAMES else None

    def acceptance_quality_fitness(self):
        """The :class:`evolve.eval.evaluator.AcceptanceQualityFitness` these parameters describe."""
        from evolve.eval.evaluator import AcceptanceQualityFitness
        return AcceptanceQualityFitness(self.false_accept_weight, self.false_reject_weight,
                           self.quality_floor, self.below_floor_scale)

    @property
    def program_kind(self) -> ProgramKind:
        """The :class:`evolve.kinds.base.ProgramKind` the run evolves."""
        return program_kind(self.evolve, "evolve")

    @property
    def cost_model(self):
        """The :class:`evolve.eval.costs.Costs` of the ``costs`` setting (``default``: the built-in model),
        read once per file state (:func:`evolve.eval.costs.cached_costs`), priced at the dataset's mean context
        (:func:`evolve.harvest.context.mean_context`; a file timed at one context is used as timed)."""
        from evolve.eval.costs import cached_costs
        from evolve.harvest.context import at_dataset_context
        return at_dataset_context(cached_costs(None if self.costs == "default" else self.costs), self.data)

    @property
    def objective_spec(self):
        """The registered :class:`evolve.eval.objectives.Objective` the run optimises."""
        from evolve.eval.objectives import objective_named
        return objective_named(self.objective)


#: The fields of :class:`RunConfig` given by name (``kind_settings`` is given as the kind's own settings).
FIELD_NAMES: tuple[str, ...] = tuple(f.name for f in fields(RunConfig) if f.name != "kind_settings")
DEFAULTS = RunConfig()


def kind_setting_fields() -> dict[str, Any]:
    """Every registered kind's own settings by name (:func:`dataclasses.fields` of its settings record), in kind
    order; a name two kinds share is the first's (:func:`evolve.kinds.registry.register_kind` refuses that)."""
    out: dict[str, Any] = {}
    for kind in KINDS.values():
        for f in fields(kind.settings):
            out.setdefault(f.name, f)
    return out


def setting_names() -> tuple[str, ...]:
    """The names a configuration may give: the fields and every registered kind's own settings."""
    return FIELD_NAMES + tuple(n for n in kind_setting_fields() if n not in FIELD_NAMES)


def readers_of(name: str) -> list[str]:
    """The kinds whose runs read the setting ``name`` (their own setting)."""
    return [k.name for k in KINDS.values() if name in k.setting_names]


@dataclass(frozen=True)
class Setting:
    """A field's metadata: type, inclusive bounds (None: unbounded), choices, help."""

    name: str
    type: type
    low: float | None
    high: float | None
    help: str
    choices: tuple[str, ...] | None


def setting_of(name: str) -> Setting:
    """The :class:`Setting` of field ``name`` of :class:`RunConfig`, or of a kind's own setting (a string; its help
    starts with the kinds that read it), choices evaluated now."""
    if name not in _FIELDS:
        meta = kind_setting_fields()[name].metadata
        choices = meta["choices"]
        return Setting(name, str, None, None, f"{' and '.join(readers_of(name))} runs: {meta['help']}",
                       tuple(choices()) if choices is not None else None)
    meta = _FIELDS[name].metadata
    choices = meta["choices"]
    return Setting(name, meta["type"], meta["low"], meta["high"], meta["help"],
                   tuple(choices()) if choices is not None else None)


_FIELDS = {f.name: f for f in fields(RunConfig)}


def _check_value(name: str, value: Any, where: str | None) -> Any:
    """Validate one field's value; return it in canonical form.

    Raises InputError: with ``param=name`` when ``where`` is None (a value given in code or on the
    command line, which names the flag), else with ``where`` (a file's key) in the message.
    """
    def fail(text: str) -> InputError:
        return InputError(text, param=name) if where is None else InputError(f"{where}: {text}")

    s = setting_of(name)
    if s.type is bool:
        if not isinstance(value, bool):
            raise fail(f"expected true or false (value {value!r})")
        return value
    if s.type is tuple:
        return _check_features(value, fail)
    if s.type is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise fail(f"expected an integer (value {value!r})")
    elif s.type is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise fail(f"expected a number (value {value!r})")
        value = float(value)
        if not math.isfinite(value):
            raise fail(f"expected a finite number (value {value!r})")
    else:
        if not isinstance(value, str) or not value.strip():
            raise fail(f"expected a non-empty string (value {value!r})")
        if s.choices is not None and value not in s.choices:
            raise fail(f"unknown value {value!r} (choose from {', '.join(s.choices)})")
        return value
    if s.low is not None and value < s.low:
        raise fail(f"must be at least {s.low} (value {value!r})")
    if s.high is not None and value > s.high:
        raise fail(f"must be at most {s.high} (value {value!r})")
    return value


def _check_features(value: Any, fail: Callable[[str], InputError]) -> Any:
    if value == "auto":
        return "auto"
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(value, (list, tuple)) or not value:
        raise fail(f"expected \"auto\" or a non-empty list of feature names (value {value!r})")
    out: list[str] = []
    for v in value:
        if not isinstance(v, str) or v not in FEATURES:
            raise fail(f"unknown feature {v!r} (known: {', '.join(FEATURES)})")
        if v in out:
            raise fail(f"feature {v!r} is listed twice")
        out.append(v)
    return tuple(f for f in FEATURES if f in out)


def _check_relations(cfg: RunConfig, origin: dict[str, str | None]) -> None:
    def fail(name: str, text: str) -> InputError:
        where = origin.get(name)
        return InputError(text, param=name) if where is None else InputError(f"{where}: {text}")

    if cfg.init_min_depth > cfg.init_max_depth:
        raise fail("init_min_depth", f"init_min_depth {cfg.init_min_depth} is greater than init_max_depth "
                                     f"{cfg.init_max_depth}")
    for name in ("init_max_depth", "mutation_max_depth"):
        if getattr(cfg, name) > cfg.max_depth:
            raise fail(name, f"{name} {getattr(cfg, name)} exceeds max_depth {cfg.max_depth}")
    if cfg.islands > 1 and cfg.migrants >= cfg.population:
        raise fail("migrants", f"migrants {cfg.migrants} must be smaller than the population ({cfg.population})")
    from evolve.eval.objectives import scores_kind
    objective = cfg.objective_spec
    if not scores_kind(objective, cfg.program_kind):
        scoring = [o.name for o in _objectives() if scores_kind(o, cfg.program_kind)]
        raise fail("evolve", f"objective {cfg.objective!r} does not score {cfg.evolve} programs (objectives "
                             f"that do: {', '.join(scoring) or 'none'})")
    if not objective.reads_costs:
        for name, default in (("costs", DEFAULTS.costs), ("concurrency", DEFAULTS.concurrency)):
            if getattr(cfg, name) != default:
                reading = [o.name for o in _objectives() if o.reads_costs]
                raise fail(name, f"objective {cfg.objective!r} does not read it (objectives that do: "
                                 f"{', '.join(reading)})")
    if not cfg.program_kind.reads_gamma and cfg.gamma != DEFAULTS.gamma:
        raise fail("gamma", f"a {cfg.evolve} run does not read the draft length (value {cfg.gamma}); leave it out")
    check = getattr(cfg.settings, "check", None)
    if check is not None:
        try:
            check()  # an unknown verifier is refused here, before the search
        except InputError as exc:
            where = origin.get(exc.param) if exc.param else None
            raise (exc if where is None else InputError(f"{where}: {exc}")) from None
    if cfg.selection == "cv" and not (cfg.warm_start and cfg.program_kind.resamples):
        raise fail("selection", f"cross-validation compares evolution with the seeded competitors on resampled "
                                f"texts: it needs warm_start and a kind scored from the records alone (this run: "
                                f"warm_start {str(cfg.warm_start).lower()}, kind {cfg.evolve})")
    if cfg.selection != "cv" and cfg.cv_folds != DEFAULTS.cv_folds:
        raise fail("cv_folds", f"only selection cv reads it (value {cfg.cv_folds})")
    if cfg.elitism >= cfg.population:
        raise fail("elitism", f"elitism {cfg.elitism} must be smaller than the population ({cfg.population})")


def _objectives():
    from evolve.eval.objectives import OBJECTIVES
    return OBJECTIVES.values()


def upgrade_legacy(values: dict[str, Any], where: Callable[[str], str | None] = lambda key: None) -> dict[str, Any]:
    """``values`` with the keys of older configurations renamed (:data:`LEGACY_KEYS`; ``verify``'s values
    ``token``/``block`` become ``threshold``/``relaxation``). A legacy key replaces the new key's value.

    Raises: InputError for an unknown ``verify`` value or a key given under both names.
    """
    out = dict(values)
    for old, new in LEGACY_KEYS.items():
        if old not in out:
            continue
        value = out.pop(old)
        if old == "verify":
            if value not in LEGACY_VERIFY:
                text = f"unknown value {value!r} (choose from {', '.join(LEGACY_VERIFY)})"
                w = where(old)
                raise InputError(text, param=old) if w is None else InputError(f"{w}: {text}")
            value = LEGACY_VERIFY[value]
        out[new] = value
    return out


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
        if name in LEGACY_KEYS:
            new = LEGACY_KEYS[name]
            if new in out or any(k.replace("-", "_") == new for k in raw):
                raise InputError(f"{path}: key '{key}' is the old name of '{new}'; give only '{new}'")
            value = upgrade_legacy({name: value}, lambda k: f"{path}: key '{key}'")[new]
            name = new
        known = setting_names()
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else f" (known: {', '.join(known)})"
            raise InputError(f"{path}: unknown key '{key}'{hint}")
        if name in out:
            raise InputError(f"{path}: key '{key}' is given twice")
        out[name] = _check_value(name, value, f"{path}: key '{key}'")
    return out


def resolve(options: dict[str, Any] | None = None, config_file: str | os.PathLike | None = None) -> RunConfig:
    """Merge defaults, a TOML file and command-line options into a validated :class:`RunConfig`.

    Args:
        options: {field: value} given on the command line or in code; ``None`` values are
            "not given" and ignored; older keys (:data:`LEGACY_KEYS`) are read as their new names.
        config_file: optional TOML file (see :func:`load_toml`).

    An ``objective`` given nowhere defaults from the kind (``evolve``): :data:`DEFAULTS`'s where it scores the
    kind, else the kind's first objective (:attr:`evolve.kinds.base.ProgramKind.objectives`).

    Raises: InputError for the first bad value: with ``param`` set to the field (the command line
    names its option) for a value of ``options``, naming the file and key for one of the file.
    """
    values: dict[str, Any] = {}
    origin: dict[str, str | None] = {name: None for name in FIELD_NAMES}
    if config_file is not None:
        for name, value in load_toml(config_file).items():
            values[name] = value
            origin[name] = f"{os.fspath(config_file)}: key '{name}'"
    given = upgrade_legacy({k: v for k, v in (options or {}).items() if v is not None})
    known = setting_names()
    for name, value in given.items():
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            raise InputError(f"unknown setting {name!r}" + (f" (did you mean '{close[0]}'?)" if close else
                                                            f" (known: {', '.join(known)})"))
        values[name] = _check_value(name, value, None)
        origin[name] = None
    if values.get("costs") == DEFAULTS.costs and os.path.lexists(DEFAULTS.costs):
        text = (f"'{DEFAULTS.costs}' names the built-in cost model, and a file named {DEFAULTS.costs} is in the working "
                f"directory ({os.getcwd()}): give ./{DEFAULTS.costs} to read that file, or move it")
        where = origin.get("costs")
        raise InputError(text, param="costs") if where is None else InputError(f"{where}: {text}")
    own = {name: values.pop(name) for name in list(values) if name not in FIELD_NAMES}
    if "objective" not in values:  # not given: the kind's own objective where the default does not score it
        objectives = replace(DEFAULTS, **values).program_kind.objectives
        if objectives and DEFAULTS.objective not in objectives:
            values["objective"] = objectives[0]
    kind = replace(DEFAULTS, **values).program_kind
    for name, value in own.items():
        if name not in kind.setting_names and value != kind_setting_fields()[name].default:
            where = origin.get(name)
            text = (f"only a {' or '.join(readers_of(name))} run reads it (this run evolves {kind.name} programs)")
            raise InputError(text, param=name) if where is None else InputError(f"{where}: {text}")
    values["kind_settings"] = kind.settings(**{n: v for n, v in own.items() if n in kind.setting_names})
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

    ``"auto"`` gives the six :data:`evolve.gp.primitives.CORE_FEATURES` plus every available optional one,
    less the features the run's kind of program may not read
    (:attr:`evolve.kinds.base.ProgramKind.excluded_features`); asking for one of those is refused.
    Raises InputError (param ``features``) when a requested feature is missing or excluded.
    """
    kind = cfg.program_kind
    available = tuple(available) + kind.derived_features
    if cfg.features == "auto":
        return tuple(f for f in FEATURES if (f in CORE_FEATURES or f in available)
                     and f not in kind.excluded_features)
    excluded = [f for f in cfg.features if f in kind.excluded_features]
    if excluded:
        raise InputError(f"a {kind.title} may not read '{excluded[0]}' ({kind.excluded_reason})", param="features")
    missing = [f for f in cfg.features if f not in available]
    if missing:
        raise InputError(f"{source}: no column '{missing[0]}' in train and valid, but the features setting asks "
                         f"for it", param="features")
    return tuple(cfg.features)


__all__ = ["RunConfig", "DEFAULTS", "SELECTIONS", "FIELD_NAMES", "LEGACY_KEYS", "Setting", "setting_of", "kind_setting_fields",
           "setting_names", "readers_of", "upgrade_legacy",
           "load_toml", "resolve", "to_toml", "resolve_features"]
