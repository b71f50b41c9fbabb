"""``python benchmark.py groups``: one verification-length policy for all task groups, or one per group
(:mod:`evolve.commands.groups`; the runs come from ``scripts/spec_bench_groups.sh``)."""
from __future__ import annotations

from pathlib import Path

import click

from evolve.cli.errors import CliCommand
from evolve.cli.inventory import groups_references
from evolve.cli.output import FORMAT_BY_SUFFIX, echo_outputs, output_options
from evolve.report.groups import FORMATS
from evolve.errors import counted


@click.command("groups", cls=CliCommand, references={"runs": groups_references})
@click.option("--runs", required=True, type=click.Path(file_okay=False, path_type=Path), metavar="DIR",
              help="Directory of scripts/spec_bench_groups.sh: single.json and one directory per task group (data, "
                   "group.json, bench.json).")
@output_options(FORMATS, FORMAT_BY_SUFFIX)
def groups(runs: Path, fmt: str | None, output: Path | None) -> None:
    """Tokens per second on each task group's test split of the single policy, the group's own policy, and the
    group's best fixed length and confidence threshold; then all groups as one workload."""
    from evolve.report.output import check_output, resolve_format, write_output
    from evolve.commands.groups import group_rows
    from evolve.report.groups import format_groups

    check_output(output)
    fmt = resolve_format(fmt, output, FORMATS)
    rows = group_rows(runs)
    text = format_groups(rows, fmt)
    if output is not None:
        write_output(text, output)
    echo_outputs(text, output, counted(len(rows), "group"), None)
