"""``python -m evolve export CHAMPION --to numpy|torch [--output FILE]``: a rule as a standalone module.

Writes the module text of :mod:`evolve.export` (it imports only ``math`` and the chosen
library) to stdout, or atomically to ``--output`` (checked first as every command's output is:
:func:`evolve.report.output.check_output`). CHAMPION is a champion JSON file, a run
directory, or the name of a registered rule or promoted champion (an expression rule).
How the module plugs into speculative sampling code: docs/tutorial/deploy.md.
"""
from __future__ import annotations

from pathlib import Path

import click

from evolve.cli.errors import CliCommand
from evolve.cli.inventory import OutputPath
from evolve.export.exporter import TARGETS, export_source
from evolve.report.output import check_output, write_output


@click.command("export", cls=CliCommand, inputs=("champion",))
@click.argument("champion")
@click.option("--to", "target", type=click.Choice(list(TARGETS)), required=True,
              help="Array library of the module: numpy or torch.")
@click.option("--output", type=OutputPath(dir_okay=False, path_type=Path), default=None,
              help="Write the module to FILE (atomically) instead of stdout.")
@click.option("--champions-dir", type=click.Path(file_okay=False), default=None, envvar="SPECDEC_CHAMPIONS_DIR",
              help="Directory of promoted champions searched for a CHAMPION name [default: heuristics/champions/].")
def export(champion: str, target: str, output: Path | None, champions_dir: str | None) -> None:
    """Write CHAMPION (a champion file, run directory or rule name) as a standalone module with a batched
    acceptance_threshold(**columns) over numpy arrays or torch tensors (for a relaxation champion:
    relaxation_weight(**columns) and relaxed_target, for block verification against (1 - w) p + w q)."""
    check_output(output, None, inputs=(champion,), champion_dirs=(champions_dir,))
    rule, text = export_source(champion, target, champions_dir)
    rule.program_kind.check_rule(rule)  # no module naming a verifier that does not resolve is written
    if output is None:
        click.echo(text, nl=False)
        return
    write_output(text, output)
    click.echo(f"wrote {output} (rule {rule.name}, {target})", err=True)
