"""What a kind of program is (:class:`ProgramKind`), and the hooks through which the commands run it (:class:`KindHooks`).

A program of the primitive set computes one float from one record's features; its *kind* says what that float
is for (an acceptance threshold, a relaxation weight, a verification-length decision, a draft-tree width). A
kind is described once, in its own package's ``__init__`` (:mod:`evolve.kinds`), by a :class:`ProgramKind`:
plain data that every floor may read. What the kind *does* in each command lives in its package's modules and
reaches the commands through one :class:`KindHooks`, loaded on first use from the module the kind names
(``ProgramKind.plugin``) or given when the kind is registered (:func:`evolve.kinds.registry.register_kind`).
A command asks :meth:`ProgramKind.hook` for its hook; the commands a kind supports are the ones whose hook it
implements (:data:`HOOK_COMMANDS`), never a list written by hand.
"""
from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from evolve.errors import InputError

#: Features that depend on the drafted token X_i: a relaxation weight must not read them (p~_i would
#: depend on X_i, and block verification against it would no longer be exact).
TOKEN_FEATURES: tuple[str, ...] = ("draft_prob", "target_prob", "target_rank")
#: Features only the target's forward pass gives: a verification-length policy decides before it.
TARGET_FEATURES: tuple[str, ...] = ("target_prob", "target_entropy", "top_token_match", "target_top_prob", "overlap",
                                    "target_rank")


def kind_setting(default: str, help: str, choices: Callable[[], Iterable[str]] | None = None,
                 reads_file: str = "") -> Any:
    """A field of a kind's settings record (:attr:`ProgramKind.settings`): a one-line string value with its
    ``default``, ``help`` (for ``python -m evolve run --help``), ``choices`` (evaluated when asked; None: any name)
    and ``reads_file``: what a value ending in ``.json`` names, a file the run reads (a run pins it, and the command
    line lists it among the run's inputs); empty when the setting names no file."""
    return dataclasses.field(default=default, metadata={"help": help, "choices": choices, "reads_file": reads_file})


@dataclass(frozen=True)
class NoSettings:
    """The settings record of a kind whose runs read no setting of their own."""


@dataclass(frozen=True)
class KindContext:
    """What a kind's scoring hooks read, as one object (:attr:`KindHooks.population`, :attr:`KindHooks.score`).

    Attributes:
        data: the split's :class:`evolve.eval.evaluator.EvalData`, or (``score``) a zero-argument function that reads
            it (:meth:`split_data`), so a kind that scores elsewhere (a tree table) never reads the records.
        fitness: the :class:`evolve.eval.evaluator.AcceptanceQualityFitness` of the per-token metrics.
        gamma: the draft length of the block metrics (None: not scored at a fixed draft length).
        costs: the :class:`evolve.eval.costs.Costs` that prices speedups and tokens per second.
        settings: the kind's settings record (:attr:`ProgramKind.settings`) of the run the figures are for: the
            search's run (``population``), or (``score``) the champion whose engine settings are tuned, whose run
            settings a candidate rule without its own follows; None: the rule's own alone.
        cache_size: distinct programs a population scorer remembers (0: none).
        directory: the dataset directory (None: the data was given in memory); ``split`` its split's name.
    """

    data: Any = None
    fitness: Any = None
    gamma: int | None = None
    costs: Any = None
    settings: Any = None
    cache_size: int = 0
    directory: Any = None
    split: str = ""

    def split_data(self) -> Any:
        """The split's records (``data``, read now when it is a function)."""
        return self.data() if callable(self.data) else self.data


@dataclass(frozen=True)
class KindHooks:
    """What a kind does in each command; a hook left None means the command cannot run the kind (it refuses
    in one line naming the commands that can).

    Attributes:
        check: ``check(rule)`` checks the run settings a rule of this kind carries (its champion's provenance)
            before a command scores, promotes or exports it; raises InputError naming the file and key.
        metrics: the metrics record its population scorer returns (what a checkpoint's evaluator caches hold).
        population: ``population(context)`` -> a population scorer of ``context.data``
            (:class:`evolve.eval.population.PopulationEvaluator` or one with its ``evaluate`` method;
            ``context`` a :class:`KindContext`): ``python -m evolve run`` and ``promote``.
        score: ``score(rule, context)`` -> one rule's metrics on a split (the Python API,
            :func:`evolve.api.evaluate_rule`, and ``export``'s tuning): ``context`` a :class:`KindContext` whose
            ``data`` reads the split and whose ``settings`` are the rule's own run's.
        seeds: ``seeds(cfg, features, train, gamma, objective)`` -> the warm start of a search
            (:class:`evolve.search.warm_start.WarmStart`).
        compare: how ``benchmark.py`` scores a rule (:class:`evolve.commands.compare.table.KindScorer`).
        caption: what ``benchmark.py``'s caption says about its rows (``{names}``: the rows of the kind).
        simulate: ``simulate(rule, options, gamma)`` -> the sweep plan of ``benchmark.py simulate``.
        live: ``live(rule)`` -> the row ``benchmark.py live`` decodes with: an object with a ``name``, ``tree`` (whether
            it decodes draft trees), ``lookahead`` (drafter columns it reads) and ``text(engine, prompt_ids,
            max_new_tokens, rng, gamma, tree)`` (:class:`evolve.live.decoding.ChainDecoder`,
            :class:`evolve.live.tree_decoding.TreeDecoder`).
        pareto: ``pareto(rule, traces, data, gamma, budgets)`` -> (curve, note) of ``benchmark.py pareto --rule``.
        pareto_runs: ``pareto_runs(run_dirs, traces, data, gamma, budgets)`` -> (curve or None, notes): the evolved
            curve of ``benchmark.py pareto --run`` directories of this kind (a curve whose category is not a per-token
            one, :data:`evolve.report.pareto.curves.PER_TOKEN_CATEGORIES`, is drawn as a reference).
        pareto_references: ``pareto_references(traces, data, gamma, budgets)`` -> (curve or None, note): a reference
            curve the kind adds to every ``benchmark.py pareto`` (the relaxed fixed-w family).
        trees: ``trees(split, name, program, data, tune, costs)`` -> the rows of ``benchmark.py trees``.
        export: the :class:`evolve.export.codegen.Layout` of ``python -m evolve export``.
        engines: ``engines(engine)`` -> what this engine can express of the kind, from its capabilities (an
            :class:`evolve.export.engines.base.KindSupport`, or None): ``python -m evolve export --to ENGINE``.
        schedule: ``schedule(rule, directory, costs, requests)`` -> the per-batch-size draft lengths of
            ``python -m evolve export --concurrency`` ((start, end, length) triples).
    """

    check: Callable[..., Any] | None = None
    metrics: type | None = None
    population: Callable[..., Any] | None = None
    score: Callable[..., Any] | None = None
    seeds: Callable[..., Any] | None = None
    compare: Any = None
    caption: str = ""
    simulate: Callable[..., Any] | None = None
    live: Callable[..., Any] | None = None
    pareto: Callable[..., Any] | None = None
    pareto_runs: Callable[..., Any] | None = None
    pareto_references: Callable[..., Any] | None = None
    trees: Callable[..., Any] | None = None
    export: Any = None
    engines: Callable[..., Any] | None = None
    schedule: Callable[..., Any] | None = None


#: The commands each hook serves, in the order a refusal lists them.
HOOK_COMMANDS: tuple[tuple[str, str], ...] = (
    ("compare", "python benchmark.py"), ("simulate", "python benchmark.py simulate"),
    ("pareto", "python benchmark.py pareto"), ("live", "python benchmark.py live"),
    ("trees", "python benchmark.py trees"), ("export", "python -m evolve export"),
    ("population", "python -m evolve promote"), ("population", "python -m evolve run"),
)
#: Hooks of the kinds whose hooks are loaded, by kind name.
_HOOKS: dict[str, KindHooks] = {}


@dataclass(frozen=True)
class ProgramKind:
    """One kind of program (see the module doc).

    Attributes:
        name: registry name, also the value of ``python -m evolve run --evolve`` and of the key
            ``kind`` of champion files (``threshold``, ``relaxation``).
        title: what one value of the program is, in words (``acceptance threshold``).
        output: one line: the value's range and how it is applied.
        function_name: name of the function of an exported module (:mod:`evolve.export`) and of
            a champion's generated ``NAME.py``.
        plugin: the module whose ``HOOKS`` (a :class:`KindHooks`) are this kind's hooks, imported on first use.
        excluded_features: features a program of this kind may not read; ``excluded_reason`` says why.
        derived_features: features its scorer computes from the records (no column needed).
        columns: optional dataset columns scoring a program of this kind needs.
        objectives: the objectives (:mod:`evolve.eval.objectives`) that score a run of this kind.
        needs: what else a run of this kind needs, in words, for the help of ``--evolve`` (empty: nothing).
        verifies: how a rule of this kind verifies the drafts of a verification-length policy (its
            ``verify_with``): ``token`` (per drafted token), ``block`` (the whole block), or empty (it cannot).
        source: where the algorithm that applies the value comes from.
        settings: the kind's settings record (a frozen dataclass whose fields are :func:`kind_setting`): the run
            settings only a run of this kind reads, held by the run configuration as one field
            (:attr:`evolve.search.config.RunConfig.kind_settings`; another run refuses a value other than the
            default) and written beside the run's other settings (names unique across kinds). Its optional method
            ``check()`` raises InputError (``param`` the setting) for values that do not resolve.
        reads_gamma: whether its scoring reads the run's draft length ``gamma`` (a tree shape does not: the
            harvested trees bound it).
        resamples: whether its population scorer reads the split's records alone, so that a resample of whole
            texts (:meth:`evolve.eval.evaluator.EvalData.resample_texts`) is scored as the records are: the champion
            guard's bootstrap (:mod:`evolve.search.guard`) needs it (False: a tree shape, scored on the tree table
            beside the records, and a relaxation weight, scored with the block columns read beside them).
    """

    name: str
    title: str
    output: str
    function_name: str
    plugin: str = ""
    excluded_features: tuple[str, ...] = ()
    excluded_reason: str = ""
    derived_features: tuple[str, ...] = ()
    columns: tuple[str, ...] = ()
    objectives: tuple[str, ...] = ()
    needs: str = ""
    verifies: str = ""
    source: str = ""
    settings: type = NoSettings
    reads_gamma: bool = True
    resamples: bool = True

    @property
    def setting_names(self) -> tuple[str, ...]:
        """The names of the kind's settings (the fields of :attr:`settings`), in order."""
        return tuple(f.name for f in dataclasses.fields(self.settings))

    def hooks(self) -> KindHooks:
        """This kind's :class:`KindHooks` (its plugin module imported on first use; none: no hooks)."""
        found = _HOOKS.get(self.name)
        if found is None:
            found = importlib.import_module(self.plugin).HOOKS if self.plugin else KindHooks()
            _HOOKS[self.name] = found
        return found

    def check_rule(self, rule: Any) -> None:
        """Run this kind's ``check`` hook on ``rule`` (a :class:`heuristics.contract.Rule` of this kind), if it has
        one. Raises: InputError naming the rule's file and the key whose setting does not hold."""
        check = self.hooks().check
        if check is not None:
            check(rule)

    def hook(self, name: str, command: str, what: str) -> Any:
        """The hook ``name`` (a :class:`KindHooks` field) that ``command`` runs ``what`` with.

        Raises: InputError (:meth:`refuse`) when this kind does not implement it.
        """
        found = getattr(self.hooks(), name)
        if found is None:
            raise self.refuse(command, what)
        return found

    @property
    def commands(self) -> tuple[str, ...]:
        """The commands that run a program of this kind (as a user types them), from the hooks it implements."""
        hooks = self.hooks()
        return tuple(command for hook, command in HOOK_COMMANDS if getattr(hooks, hook) is not None)

    def check_features(self, features, what: str) -> None:
        """Raise InputError naming ``what`` if ``features`` holds one this kind may not read."""
        bad = [f for f in features if f in self.excluded_features]
        if bad:
            article = "an" if self.title[:1].lower() in "aeiou" else "a"
            raise InputError(f"{what}: reads '{bad[0]}', which {article} {self.title} may not read "
                             f"({self.excluded_reason})")

    def refuse(self, command: str, what: str) -> InputError:
        """The one-line error of ``command`` asked to run ``what``, a program of this kind it cannot use."""
        can = "; ".join(self.commands) or "no command yet"
        return InputError(f"{what}: is a {self.name} program ({self.title}); `{command}` cannot run it "
                          f"(use: {can})")


def set_hooks(kind: ProgramKind, hooks: KindHooks) -> None:
    """Give ``kind`` the hooks ``hooks`` (instead of loading its plugin module)."""
    _HOOKS[kind.name] = hooks


def forget_hooks(kind: ProgramKind) -> None:
    """Drop ``kind``'s loaded hooks (a kind registered for a while, then removed)."""
    _HOOKS.pop(kind.name, None)


__all__ = ["TOKEN_FEATURES", "TARGET_FEATURES", "kind_setting", "NoSettings", "KindContext", "KindHooks",
           "HOOK_COMMANDS", "ProgramKind",
           "set_hooks", "forget_hooks"]
