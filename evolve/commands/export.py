"""``python -m evolve export``: a champion as a standalone module, or as the configuration an inference engine reads.

The command line (:mod:`evolve.cli.export`) checks which options go together; :func:`export_command` does the rest:
it resolves the champion (a champion file, run directory or rule name; a name a kind knows as a competitor row and
not a rule is refused with the kind's reason and nearest setting, :func:`resolve_champion`), and for an engine
(:data:`evolve.export.engines.registry.ENGINES`, at the checked version asked for) writes the file the engine reads
(:func:`evolve.export.engines.deploy.engine_config`). A champion the engine cannot express exactly is tuned to the
engine's best setting on the dataset and cost file given, else on those its run read
(:mod:`evolve.commands.run_context`; a dataset given must be the champion's own or a subset of it), and the gap on
the test split is tabulated; with a list of batch sizes the engine's per-batch-size schedule is tuned and
tabulated too. A cost file timed in an engine's own loop (``benchmark.py perf --write-costs FILE --engine NAME``) prices
only that engine: given for another it is refused naming both, and for its own engine it prices the export whatever file
the champion's run read. For an array library (numpy, torch) or a draft-model target (llama-cpp-python) it writes the
module; with ``--costs`` the draft-model module is priced in its engine first (:mod:`evolve.export.engines.priced`:
the champion, or plain decoding or a fixed length where one is predicted faster there).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from evolve.commands.run_context import contexts, resolve_costs, resolve_data, resolve_gamma
from evolve.errors import InputError
from evolve.eval.costs import load_costs, loop_engine
from evolve.export.engines.deploy import (NeedsData, engine_config, gap_table, harvest_drafter, schedule_table,
                                          tuned_schedule)
from evolve.export.engines.base import Engine
from evolve.export.engines.draft_models import DRAFT_MODELS
from evolve.export.engines.priced import check_cost_engine, priced_policy, priced_table
from evolve.export.engines.registry import ENGINES, engine_at
from evolve.export.exporter import export_source, resolve_rule
from evolve.kinds.registry import KINDS
from evolve.report.output import check_output, write_output
from evolve.report.width import fit_width
from heuristics.contract import Rule

@dataclass(frozen=True)
class ExportOptions:
    """What ``export`` was asked for (the command line's options, :mod:`evolve.cli.export`).

    ``champion``: a champion file, run directory or rule name; ``target``: an array library, an engine name or a
    draft-model target; ``data``/``costs``: the dataset directory and cost file an engine's nearest setting is tuned
    on (both or neither); ``concurrency``: batch sizes of a per-batch-size schedule (empty: none);
    ``engine_version``: the engine version written for (None: the newest checked); ``output``: the file written
    (None: none, the caller prints the text); ``champions_dir``: where champion names are looked up."""

    champion: str
    target: str
    data: str | None = None
    costs: str | None = None
    concurrency: tuple[int, ...] = ()
    engine_version: str | None = None
    output: Path | None = None
    champions_dir: str | None = None


@dataclass(frozen=True)
class Exported:
    """What :func:`export_command` wrote: the exported ``rule``, the module or configuration ``text`` and the
    ``table`` of the tuned setting's gap (and schedule) on the test split (empty when the engine runs the champion
    exactly)."""

    rule: Rule
    text: str
    table: str = ""


def export_command(options: ExportOptions) -> Exported:
    """Export ``options.champion`` for ``options.target`` (module doc), writing ``options.output`` atomically when
    given (checked first, as every command's output is).

    Raises: InputError (one line naming the file or parameter) for any bad input;
    :class:`evolve.export.engines.deploy.NeedsData` for a champion an engine cannot express exactly when no dataset
    and cost file were given or recorded by its run (the command line names the options that give them).
    """
    o = options
    check_output(o.output, None, inputs=(o.champion, o.data, o.costs), champion_dirs=(o.champions_dir,))
    exported = _engine_file(o) if o.target in ENGINES else _module(o)
    if o.output is not None:
        write_output(exported.text, o.output)
    return exported


def _module(o: ExportOptions) -> Exported:
    """The module of an array library or a draft-model target (priced in its engine with a cost file)."""
    writer = DRAFT_MODELS.get(o.target)
    resolve_champion(o.champion, o.champions_dir, writer.ENGINE if writer is not None else None)
    if writer is not None and o.costs is not None:
        return _priced(o, writer)
    build = writer.champion_module if writer is not None else (
        lambda spec, where: export_source(spec, o.target, where))
    rule, text = build(o.champion, o.champions_dir)
    rule.program_kind.check_rule(rule)  # no module naming a verifier that does not resolve is written
    return Exported(rule, text)


def _priced(o: ExportOptions, writer) -> Exported:
    """A draft-model target's module priced in its engine under ``o.costs`` (:mod:`evolve.export.engines.priced`) on
    ``o.data`` (else the dataset the champion's run recorded): the champion, or the setting predicted faster there."""
    rule, source = resolve_rule(o.champion, o.champions_dir)
    rule.program_kind.check_rule(rule)
    writer.check_policy(rule, writer.drafter_of(source))
    found = contexts([source]) if Path(source).is_file() else []
    data = o.data if o.data is not None else (found[0].data_dir if found and found[0].data_dir else None)
    if data is None:
        raise InputError(f"pricing '{rule.name}' in {o.target} needs a dataset (valid and test splits), and the "
                         f"champion records none", param="data")
    data = resolve_data(data, found, data, param="data")
    family = writer.drafter_of(source, data)  # the dataset drafted as the champion's harvest did
    if family is not writer.drafter_of(source):  # no champion file: the module would draft by prompt lookup
        raise InputError(f"'{rule.name}' has no champion file recording its harvest, so its module drafts by prompt "
                         f"lookup, but {data} was drafted by {family.value}: export a champion of a run on that "
                         f"dataset", param="data")
    priced = priced_policy(rule, data, o.costs, resolve_gamma(None, found), writer.COST_ENGINE)
    text = writer.policy_module(priced.rule, source, priced.notes)
    return Exported(priced.rule, text, fit_width(priced_table(priced, writer.COST_ENGINE, data, o.costs)))


def _engine_file(o: ExportOptions) -> Exported:
    """The file an engine reads, with the gap (and schedule) table of a tuned setting."""
    engine = engine_at(o.target, o.engine_version)
    rule, source = resolve_champion(o.champion, o.champions_dir, engine)
    rule.program_kind.check_rule(rule)
    found = contexts([source]) if Path(source).is_file() else []
    data, costs = o.data, o.costs
    timed_here = False
    if costs is not None:  # a file timed in another engine's loop prices another engine
        loaded = load_costs(costs)
        check_cost_engine(costs, loaded, o.target, own_loop=False)
        timed_here = loop_engine(loaded) == o.target
    if data is not None:  # the champion's own dataset (or a subset of it) and its run's cost file, or refused; a file
        # timed in the target engine's own loop prices the export whatever file the run read
        data = resolve_data(data, found, data, param="data")
        costs = costs if timed_here else resolve_costs(costs, found)
    gamma = resolve_gamma(None, found)
    drafter = harvest_drafter(source, data)
    schedule = throughput = None
    if o.concurrency:  # the command line checked that a dataset is given and the engine takes a schedule
        schedule, throughput = tuned_schedule(rule, data, costs, o.concurrency)
    try:
        written = engine_config(rule, source, engine, data, costs, schedule, drafter, gamma)
    except NeedsData:
        own = _own_context(found)
        if own is None:
            raise
        data, costs = own  # tuned where the champion was evolved, as a user who gave them would
        drafter = harvest_drafter(source, data)
        written = engine_config(rule, source, engine, data, costs, schedule, drafter, gamma)
    table = fit_width(gap_table(engine, written.rows, data, costs)) if written.rows else ""
    if schedule is not None:
        table += "\n" + fit_width(schedule_table(engine, written.text, schedule, o.concurrency, throughput))
    return Exported(rule, written.text, table)


def _own_context(found) -> tuple[str, str] | None:
    """(dataset, cost file) a champion's run read (:mod:`evolve.commands.run_context`), when it records both and both
    are there; else None."""
    if not found or found[0].data_dir is None or found[0].costs is None:
        return None
    data, costs = found[0].data_dir, found[0].costs
    if not Path(data).is_dir() or not Path(costs).is_file():
        return None
    return resolve_data(data, found, data, param="data"), costs


def resolve_champion(spec: str, champions_dir: str | os.PathLike | None, engine: Engine | None):
    """:func:`evolve.export.exporter.resolve_rule` of ``spec`` (a (rule, source) pair); a name that is not a rule but
    that a kind knows as a competitor row (its engine entry's ``not_rules``, asked of ``engine`` or, None, of every
    engine, for every registered kind) is refused in one line with the kind's reason and nearest setting.

    Raises: InputError for a spec that names no champion or rule."""
    try:
        return resolve_rule(spec, champions_dir)
    except InputError:
        name = spec.split(":", 1)[0]
        for kind in KINDS.values():
            for asked in [engine] if engine is not None else ENGINES.values():
                entry = asked.entry(kind)
                if entry is not None and name in entry.not_rules:
                    raise InputError(f"'{spec}' is a {kind.name} competitor of benchmark.py, not a rule program, so "
                                     f"no export runs it: {entry.not_rules[name]}") from None
        raise


__all__ = ["DRAFT_MODELS", "ExportOptions", "Exported", "export_command", "resolve_champion"]
