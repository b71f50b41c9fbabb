"""Bounded requests: every count, size and repeat a user gives on the command line has an upper bound stated in its
help, so no request asks for what cannot finish or would exhaust memory.

The cases are generated from the commands themselves: every parameter of every command of ``benchmark.py``,
``generate_data.py`` and ``python -m evolve`` (subcommands found by walking the groups) whose type takes integers (an
integer option, or a comma-separated list of integers or of layer indices) is one case. Each must have an upper bound,
``--help`` must state it, and the bound plus one must be refused in one line naming the option (exit 2).
"""
from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from evolve.cli.benchmark import cli as benchmark_cli
from evolve.cli.evolve import cli as evolve_cli
from evolve.cli.generate import cli as generate_cli
from evolve.cli.types import CommaList, LayerSpan

ROOTS = {"benchmark.py": benchmark_cli, "generate_data.py": generate_cli, "python -m evolve": evolve_cli}
#: Options whose cases are expected to fail (none: every integer option is bounded).
ELSEWHERE: dict = {}


def _walk(cmd: click.Command, path: tuple[str, ...]):
    yield path, cmd
    if isinstance(cmd, click.Group):
        for name, sub in sorted(cmd.commands.items()):
            yield from _walk(sub, path + (name,))


def _integer_item(t: click.ParamType):
    """The type of one integer the parameter type takes (itself, or a list's item), or None for no integers."""
    if isinstance(t, CommaList):
        return _integer_item(t.item_type)
    if isinstance(t, (click.types.IntParamType, LayerSpan)):
        return t
    return None


def _cases():
    out = []
    for root, cmd in ROOTS.items():
        for path, command in _walk(cmd, (root,)):
            ctx = click.Context(command, info_name=" ".join(path), **command.context_settings)
            for param in command.get_params(ctx):
                if not isinstance(param, click.Option) or _integer_item(param.type) is None:
                    continue
                flag = max(param.opts, key=len)
                reason = ELSEWHERE.get(path[:2]) or ELSEWHERE.get(flag)
                marks = [pytest.mark.xfail(reason=reason, strict=False)] if reason else []
                out.append(pytest.param(path, flag, id=f"{' '.join(path)} {flag}", marks=marks))
    return out


CASES = _cases()


def test_the_cases_cover_the_commands():
    commands = {path for path, _ in (c.values for c in CASES)}
    assert {("benchmark.py",), ("benchmark.py", "perf"), ("generate_data.py", "harvest"), ("python -m evolve", "run"),
            ("python -m evolve", "train-drafter")} <= commands
    assert len(CASES) > 60


def _command(path: tuple[str, ...]) -> click.Command:
    cmd = ROOTS[path[0]]
    for name in path[1:]:
        cmd = cmd.commands[name]
    return cmd


def _bound(t: click.ParamType) -> int | None:
    item = _integer_item(t)
    return item.most if isinstance(item, LayerSpan) else getattr(item, "max", None)


@pytest.mark.parametrize("path, flag", CASES)
def test_every_integer_option_is_bounded_and_says_so(path, flag):
    command = _command(path)
    ctx = click.Context(command, info_name=" ".join(path), **command.context_settings)
    param = next(p for p in command.get_params(ctx) if isinstance(p, click.Option) and flag in p.opts)
    most = _bound(param.type)
    assert most is not None, f"{' '.join(path)} {flag}: no upper bound"
    record = param.get_help_record(ctx)
    stated = record is not None and (f"x<={most}" in record[1].replace(" ", "")  # click's range of an IntRange
                                      or f"at most {most}" in " ".join(record[1].split()))  # a list's items
    assert stated, (flag, record)
    value = str(most + 1)
    if isinstance(param.type, CommaList):
        value = ",".join([str(most + 1)] * (param.type.length or 1))
    res = CliRunner().invoke(ROOTS[path[0]], [*path[1:], flag, value])
    assert res.exit_code == 2, (flag, value, res.output)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and flag in lines[0], res.stderr
    assert "Traceback" not in res.output
