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
sampling code, and the engines' knobs: docs/tutorial/deploy.md. The command line checks which options go together;
the work is :mod:`evolve.commands.export`'s.
"""
from __future__ import annotations

from pathlib import Path

import click

from evolve.cli.bounds import MAX_CONCURRENCY
from evolve.cli.errors import CliCommand
from evolve.cli.inventory import OutputPath
from evolve.cli.types import CommaList
from evolve.commands.export import DRAFT_MODELS, ExportOptions, export_command
from evolve.errors import InputError
from evolve.export.engines.deploy import NeedsData
from evolve.export.engines.registry import ENGINES, VERSIONS, engine_at
from evolve.export.exporter import TARGETS


@click.command("export", cls=CliCommand, inputs=("champion",))
@click.argument("champion")
@click.option("--to", "target", type=click.Choice(list(TARGETS) + list(ENGINES) + list(DRAFT_MODELS)), required=True,
              help="numpy or torch (a standalone module), an engine (the file it reads): " + ", ".join(ENGINES)
                   + ", or a verification-length policy as a draft model running inside an engine's own "
                     "speculative loop: llama-cpp-python (a LlamaDraftModel for Llama.generate) or "
                     "transformers-generate (a CandidateGenerator for transformers' generate()).")
@click.option("--data", type=click.Path(exists=True, file_okay=False), default=None,
              help="Dataset directory (valid and test splits) an engine's nearest setting is tuned and scored on "
                   "[default: the one the champion's run read, with its cost file]; the champion's own dataset or a "
                   "subset of it.")
@click.option("--costs", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Cost file of the tuning and of the printed gap (tokens per second), with --data; the champion's "
                   "run's measurements where its run read a cost file. For llama-cpp-python and "
                   "transformers-generate: the engine's own cost file (benchmark.py perf --write-costs FILE --engine "
                   "llama-cpp-python or transformers); the champion is priced "
                   "under it on --data (default: its run's dataset) beside plain decoding and fixed draft lengths, "
                   "and the fastest on valid is written. A file timed in another engine is refused.")
@click.option("--concurrency", type=CommaList(click.IntRange(1, MAX_CONCURRENCY), distinct=True), default=None, metavar="R,R,...",
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
    if target in ENGINES:
        if (data is None) != (costs is None):
            raise click.UsageError("--data and --costs go together (tuning needs a dataset and a cost file)")
        if concurrency and (data is None or not engine_at(target, engine_version).schedule):
            raise click.UsageError(f"--concurrency needs --data and --costs and an engine that takes a per-batch-"
                                   f"size schedule ({', '.join(n for n, e in ENGINES.items() if e.schedule)})")
    else:
        priced = target in DRAFT_MODELS
        if priced and data is not None and costs is None:
            raise click.UsageError(f"--data goes with --costs for {target} (the module is priced in its engine under "
                                   f"the cost file)")
        given = [flag for flag, value in (("--data", None if priced else data), ("--costs", None if priced else costs),
                                          ("--concurrency", concurrency), ("--engine-version", engine_version)) if value]
        if given:
            raise click.UsageError(f"{', '.join(given)}: {'an engine option' if len(given) == 1 else 'engine options'}"
                                   f", not for {target}")
    options = ExportOptions(champion, target, data, costs, tuple(concurrency or ()), engine_version, output,
                            champions_dir)
    try:
        exported = export_command(options)
    except NeedsData as exc:
        raise InputError(f"{exc} (--data DIR --costs FILE)") from None
    if output is None:
        click.echo(exported.text, nl=False)
        if exported.table:
            click.echo(exported.table, nl=False, err=True)
        return
    if exported.table:
        click.echo(exported.table, nl=False)
    click.echo(f"rule {exported.rule.name} exported for {target}", err=True)
    click.echo(f"wrote {output}", err=True)  # a line of its own: the path may be long
