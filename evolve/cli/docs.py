"""``python -m evolve.docs``: regenerate, or check, the tables of README.md and docs/.

    python -m evolve.docs                 # rewrite every table block in place
    python -m evolve.docs --check         # exit 1 naming the first stale table, write nothing
    python -m evolve.docs --table NAME    # only that table (repeatable)
    python -m evolve.docs --skip-slow     # leave the slow tables (searches, pareto, trees) as they are

The table producers are :data:`evolve.commands.doctables.TABLES` plus, defined
here because they read the click commands, one option table per command
(``options_<command>``, a hyphen written as an underscore): every option with its default and help text, as
``--help`` prints them; and, read from the engine targets' own data
(:data:`evolve.export.engines.registry.ENGINES`, which the report floor does not import), one knob table
per engine (``engine_knobs_<engine>``, the name's other characters as ``_``) and the table of what each
engine writes for each kind of program (``engine_kinds``). Bad input (an unknown table) exits with code 2.
"""
from __future__ import annotations

import re
import time

import click

from evolve.cli.errors import CliCommand
from evolve.export.engines.base import Engine
from evolve.export.engines.registry import ENGINES
from evolve.kinds.registry import KINDS
from evolve.commands.doctables import ROOT, TABLES, DocTable, refresh
from evolve.report.markdown import markdown_table


def _commands() -> dict[str, click.Command]:
    """Every documented click command by table suffix (subcommands of a group listed on their own)."""
    from evolve.cli.benchmark import cli as benchmark_cli
    from evolve.cli.evolve import cli as evolve_cli
    from evolve.cli.generate import cli as generate_cli
    out: dict[str, click.Command] = {"generate": generate_cli, "benchmark": benchmark_cli}
    for group, prefix in ((generate_cli, ""), (benchmark_cli, ""), (evolve_cli, "evolve_")):
        for name, cmd in group.commands.items():
            out[prefix + name] = cmd
    out["docs"] = docs
    return out


def option_table(command: click.Command) -> str:
    """A Markdown table of ``command``'s arguments and options (subcommands excluded), as ``--help`` shows them."""
    # every command of the project takes -h as well as --help: CliCommand/CliGroup put it in their context_settings
    ctx = click.Context(command, info_name=command.name, **command.context_settings)
    rows = []
    for param in command.get_params(ctx):
        if isinstance(param, click.Argument):
            rows.append([f"`{param.name.upper()}`", "argument (required)" if param.required else "argument"])
            continue
        record = param.get_help_record(ctx)
        if record is None:
            continue
        opts, help_text = record
        rows.append([f"`{opts}`", " ".join(help_text.split())])
    return markdown_table(["option", "meaning"], rows)


def knob_table(engine: Engine) -> str:
    """A Markdown table of ``engine``'s documented knobs: name, type, range, default, the source file defining it."""
    return markdown_table(["knob", "type", "range", "default", "defined in"],
                          [[f"`{k.name}`", k.type, k.range, k.default, k.source] for k in engine.knobs])


def engine_kinds_table() -> str:
    """A Markdown table: for every engine and kind of program, the setting family it writes (exact where the champion
    is one of them, else tuned with --data/--costs) or, refused, its nearest setting."""
    rows = []
    for engine in ENGINES.values():
        cells = []
        for kind in KINDS.values():
            support = engine.support(kind)
            cells.append(support.nearest if support is not None else
                         f"refused (nearest: {engine.refusals.get(kind, 'none')})")
        rows.append([engine.name, *cells])
    return markdown_table(["engine", *KINDS], rows)


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "_", name)


def producers() -> dict[str, DocTable]:
    """Every documented table: the report tables, the option table of every command and the engine tables."""
    out = dict(TABLES)
    for name, cmd in _commands().items():
        key = "options_" + name.replace("-", "_")  # a table name is [A-Za-z0-9_]+ (train-drafter: train_drafter)
        out[key] = DocTable(key, lambda ws, cmd=cmd: option_table(cmd))
    for engine in ENGINES.values():
        name = f"engine_knobs_{_slug(engine.name)}"
        out[name] = DocTable(name, lambda ws, engine=engine: knob_table(engine))
    out["engine_kinds"] = DocTable("engine_kinds", lambda ws: engine_kinds_table())
    return out


@click.command("docs", cls=CliCommand)
@click.option("--check", is_flag=True, help="Only compare; exit 1 naming the first stale table, write nothing.")
@click.option("--table", "tables", multiple=True, metavar="NAME",
              help="Only this table (repeatable) [default: every table the documents use].")
@click.option("--skip-slow", is_flag=True,
              help="Leave the slow tables (the searches, the pareto table, the tree comparison) as they are.")
def docs(check: bool, tables: tuple[str, ...], skip_slow: bool) -> int:
    """Regenerate the tables between `<!-- table: NAME -->` and `<!-- /table -->` in README.md and docs/."""
    started = time.perf_counter()
    result = refresh(producers(), list(tables) or None, check=check, include_slow=not skip_slow)
    seconds = time.perf_counter() - started
    if check:
        if result.stale:
            path, name = result.stale[0]
            click.echo(f"stale table '{name}' in {path.relative_to(ROOT)} ({len(result.stale)} stale in all); "
                       "run `python -m evolve.docs`", err=True)
            return 1
        click.echo(f"{len(result.produced)} tables up to date ({seconds:.1f} s)", err=True)
        return 0
    for path in result.written:
        click.echo(f"updated {path.relative_to(ROOT)}", err=True)
    click.echo(f"{len(result.produced)} tables produced, {len(result.written)} files updated ({seconds:.1f} s)",
               err=True)
    return 0
