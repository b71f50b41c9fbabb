"""``python -m evolve export CHAMPION --to TARGET [--data DIR --costs FILE] [--output FILE]``: a rule as a standalone
module, or as the configuration an inference engine reads.

TARGET is an array library (``numpy``, ``torch``: the module text of :mod:`evolve.export`, which imports only
``math`` and the chosen library) or an engine (:data:`evolve.export.engines.registry.ENGINES`: vLLM, SGLang,
TensorRT-LLM, llama.cpp, transformers; the file the engine reads, :mod:`evolve.export.engines.deploy`, at the checked
engine version ``--engine-version`` names, default the newest). An engine that cannot express the champion exactly
refuses in one line unless ``--data`` and ``--costs`` are given, or the champion file records the dataset and the cost
file its run read (:mod:`evolve.commands.run_context`); then its best expressible setting, tuned on the valid split
at the champion's run's gamma, is written and the gap on the test split is printed (to stdout with ``--output``, else
to stderr). A dataset given must be the champion's own or a subset of it, and a cost file its run's measurements. The file
drafts with the champion's harvest drafter (its dataset's metadata). A name that a kind knows as a competitor row
and not a rule (``survival_prefix``) is refused with why no engine runs it and the nearest setting. The text goes to stdout, or atomically to ``--output`` (checked first as every
command's output is: :func:`evolve.report.output.check_output`). CHAMPION is a champion JSON file, a run directory,
or the name of a registered rule or promoted champion (an expression rule). How the module plugs into speculative
sampling code, and the engines' knobs: docs/tutorial/deploy.md.
"""
from __future__ import annotations

from pathlib import Path

import click

from evolve.cli.bounds import MAX_CONCURRENCY
from evolve.cli.errors import CliCommand
from evolve.cli.inventory import OutputPath
from evolve.cli.types import CommaList
from evolve.commands.run_context import contexts, resolve_costs, resolve_data, resolve_gamma
from evolve.errors import InputError
from evolve.export.engines.deploy import (NeedsData, engine_config, gap_table, harvest_drafter, schedule_table,
                                          tuned_schedule)
from evolve.export.engines.registry import ENGINES, VERSIONS, engine_at
from evolve.export.engines import llama_cpp_python
from evolve.export.exporter import TARGETS, export_source, resolve_rule
from evolve.kinds.registry import KINDS
from evolve.report.output import check_output, write_output
from evolve.report.width import fit_width

#: Targets that write a rule as a draft model inside an engine's own speculative loop: name -> (spec, champions
#: directory) -> (rule, module text).
DRAFT_MODELS = {llama_cpp_python.NAME: llama_cpp_python.champion_module}


@click.command("export", cls=CliCommand, inputs=("champion",))
@click.argument("champion")
@click.option("--to", "target", type=click.Choice(list(TARGETS) + list(ENGINES) + list(DRAFT_MODELS)), required=True,
              help="numpy or torch (a standalone module), an engine (the file it reads): " + ", ".join(ENGINES)
                   + ", or llama-cpp-python (a verification-length policy as a draft model running inside its "
                     "speculative loop).")
@click.option("--data", type=click.Path(exists=True, file_okay=False), default=None,
              help="Dataset directory (valid and test splits) an engine's nearest setting is tuned and scored on "
                   "[default: the one the champion's run read, with its cost file]; the champion's own dataset or a "
                   "subset of it.")
@click.option("--costs", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Cost file of the tuning and of the printed gap (tokens per second), with --data; the champion's "
                   "run's measurements where its run read a cost file.")
@click.option("--concurrency", type=CommaList(click.IntRange(1, MAX_CONCURRENCY)), default=None, metavar="R,R,...",
              help="With --data and --costs, for an engine that takes a draft length per batch size (vLLM, "
                   "TensorRT-LLM): the best fixed length at each listed batch size, tuned on valid under the cost "
                   "file's batch curve, written as the engine's per-batch-size schedule (in place of one length); "
                   f"each R at most {MAX_CONCURRENCY}.")
@click.option("--engine-version", default=None, metavar="VERSION",
              help="The checked engine version to write for (default: the newest): "
                   + "; ".join(f"{n} {', '.join(v)}" for n, v in VERSIONS.items()) + ".")
@click.option("--output", type=OutputPath(dir_okay=False, path_type=Path), default=None,
              help="Write the module or configuration to FILE (atomically) instead of stdout.")
@click.option("--champions-dir", type=click.Path(file_okay=False), default=None, envvar="SPECDEC_CHAMPIONS_DIR",
              help="Directory of promoted champions searched for a CHAMPION name [default: heuristics/champions/].")
def export(champion: str, target: str, data: str | None, costs: str | None, concurrency: list[int] | None,
           engine_version: str | None, output: Path | None, champions_dir: str | None) -> None:
    """Write CHAMPION (a champion file, run directory or rule name) as a standalone module with a batched
    acceptance_threshold(**columns) over numpy arrays or torch tensors (for a relaxation champion:
    relaxation_weight(**columns) and relaxed_target, for block verification against (1 - w) p + w q), or as the
    configuration an engine reads (exact, or the engine's best setting tuned with --data and --costs)."""
    check_output(output, None, inputs=(champion, data, costs), champion_dirs=(champions_dir,))
    table = ""
    if target in ENGINES:
        if (data is None) != (costs is None):
            raise click.UsageError("--data and --costs go together (tuning needs a dataset and a cost file)")
        engine = engine_at(target, engine_version)
        rule, source = _resolve(champion, champions_dir, engine)
        rule.program_kind.check_rule(rule)
        found = contexts([source]) if Path(source).is_file() else []
        if data is not None:  # the champion's own dataset (or a subset of it) and its run's cost file, or refused
            data, costs = resolve_data(data, found, data, param="data"), resolve_costs(costs, found)
        gamma = resolve_gamma(None, found)
        drafter = harvest_drafter(source, data)
        schedule = throughput = None
        if concurrency:
            if data is None or not engine.schedule:
                raise click.UsageError(f"--concurrency needs --data and --costs and an engine that takes a per-batch-"
                                       f"size schedule ({', '.join(n for n, e in ENGINES.items() if e.schedule)})")
            schedule, throughput = tuned_schedule(rule, data, costs, tuple(concurrency))
        try:
            written = engine_config(rule, source, engine, data, costs, schedule, drafter, gamma)
        except NeedsData as exc:
            own = _own_context(found)
            if own is None:
                raise InputError(f"{exc} (--data DIR --costs FILE)") from None
            data, costs = own  # tuned where the champion was evolved, as a user who gave them would
            drafter = harvest_drafter(source, data)
            written = engine_config(rule, source, engine, data, costs, schedule, drafter, gamma)
        text = written.text
        if written.rows:
            table = fit_width(gap_table(engine, written.rows, data, costs))
        if schedule is not None:
            table += "\n" + fit_width(schedule_table(engine, text, schedule, tuple(concurrency), throughput))
    else:
        if data is not None or costs is not None or concurrency or engine_version is not None:
            raise click.UsageError(f"--data, --costs, --concurrency, --engine-version are engine options, not "
                                   f"for {target}")
        build = DRAFT_MODELS.get(target, lambda spec, where: export_source(spec, target, where))
        _resolve(champion, champions_dir, llama_cpp_python.ENGINE if target in DRAFT_MODELS else None)
        rule, text = build(champion, champions_dir)
        rule.program_kind.check_rule(rule)  # no module naming a verifier that does not resolve is written
    if output is None:
        click.echo(text, nl=False)
        if table:
            click.echo(table, nl=False, err=True)
        return
    write_output(text, output)
    if table:
        click.echo(table, nl=False)
    click.echo(f"rule {rule.name} exported for {target}", err=True)
    click.echo(f"wrote {output}", err=True)  # a line of its own: the path may be long


def _own_context(found) -> tuple[str, str] | None:
    """(dataset, cost file) a champion's run read (:mod:`evolve.commands.run_context`), when it records both and both
    are there; else None."""
    if not found or found[0].data_dir is None or found[0].costs is None:
        return None
    data, costs = found[0].data_dir, found[0].costs
    if not Path(data).is_dir() or not Path(costs).is_file():
        return None
    return resolve_data(data, found, data, param="data"), costs


def _resolve(spec: str, champions_dir: str | None, engine):
    """:func:`evolve.export.exporter.resolve_rule` of ``spec``; a name that is not a rule but that a kind knows as a
    competitor row (its engine entry's ``not_rules``, asked of every registered kind) is refused in one line with
    the kind's reason and nearest setting."""
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
