"""Command-line flags are named only in evolve/cli/: the layers below name parameters.

* No error or warning raised outside ``evolve/cli/`` spells out an option (``'--gamma'``, ``use --out``):
  the string constants inside every ``InputError(...)`` / ``InputWarning(...)`` call, and inside every
  ``warnings.warn(..., InputWarning)``, of the package sources are read from their syntax trees.
* A lower layer's error raised with ``param`` is shown by the command line with the option of that
  parameter (also through a command's ``aliases``), the same text as before the rule.
* The comma-list type of the command line refuses a bad list in one line naming the option and the
  first bad item.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from evolve.cli.errors import CliCommand, CliGroup, flag_of
from evolve.cli.drafters import value_type
from evolve.cli.types import LAYER_LIST, CommaList

WINDOW = value_type("pair", "SINK,RECENT")  # --draft-window's type
from evolve.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
#: An option spelled out in a message: ``'--gamma'``, ``"--out"``, `` `--format` ``, ``use --out``, ``(--rule``.
FLAG = re.compile(r"(?:^|[\s'\"`(\[=])--[a-z][a-z0-9-]*")
ERROR_NAMES = {"InputError", "InputWarning"}
#: Messages of files another change is rewriting now (path, text): each is to name its parameter there.
PENDING: set[tuple[str, str]] = set()


def _name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _texts(node: ast.AST):
    """The literal text of every string constant and f-string part below ``node``."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            yield sub.value


def _message_calls(tree: ast.AST):
    """Calls building an error or warning message: ``InputError(...)``, ``InputWarning(...)`` and
    ``warnings.warn(..., InputWarning)``."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _name(node.func)
        if name in ERROR_NAMES:
            yield node
        elif name == "warn" and any(_name(a) == "InputWarning" for a in [*node.args, *(k.value for k in node.keywords)]):
            yield node


def flagged_messages(root: Path = ROOT) -> list[str]:
    """``path:line: text`` of every message outside evolve/cli/ whose literal text spells out an option."""
    found = []
    sources = [*sorted((root / "evolve").rglob("*.py")), *sorted((root / "heuristics").rglob("*.py"))]
    for path in sources:
        rel = path.relative_to(root).as_posix()
        if rel.startswith("evolve/cli/"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=rel)
        for call in _message_calls(tree):
            for text in _texts(call):
                if FLAG.search(text) and (rel, text.strip()) not in PENDING:
                    found.append(f"{rel}:{call.lineno}: {text.strip()}")
    return found


def test_the_scan_finds_a_flag(tmp_path):
    """The scan itself: it sees flags in errors, warnings and hints, and nothing in other strings."""
    pkg = tmp_path / "evolve" / "x"
    pkg.mkdir(parents=True)
    (pkg / "m.py").write_text(
        "import warnings\n"
        "def f(v):\n"
        "    raise InputError(f\"option '--gamma': bad (value {v})\")\n"
        "def g():\n"
        "    return errors.InputError('no data; run with --out DIR')\n"
        "def h():\n"
        "    warnings.warn('pass `--force` to replace it', InputWarning)\n"
        "def ok():\n"
        "    raise InputError('must be at least 1', param='max_new_tokens')\n"
        "HELP = \"--gamma: the draft length\"\n")
    (tmp_path / "heuristics").mkdir()
    cli = tmp_path / "evolve" / "cli"
    cli.mkdir()
    (cli / "c.py").write_text("raise InputError(\"option '--gamma': bad\")\n")
    found = flagged_messages(tmp_path)
    assert [f.split(":")[1] for f in found] == ["3", "5", "7"], found


def test_no_raised_message_outside_the_cli_names_a_flag():
    found = flagged_messages()
    assert not found, "messages naming a command-line option outside evolve/cli/ (raise them with " \
                      "InputError(..., param=NAME) instead):\n" + "\n".join(found)


# --- the command line names the option of a lower layer's parameter ----------------------------------------

def test_lower_layer_param_error_is_shown_with_its_flag(tmp_path, monkeypatch):
    """``--cost-ratio nan`` passes click's range (nan compares false) and is refused by
    :func:`evolve.eval.costs.ratio_costs`, which names the parameter ``cost_ratio``; the command shows
    ``--cost-ratio``."""
    import benchmark

    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(benchmark.cli, ["simulate", "--cost-ratio", "nan", "--lengths", "20", "--samples", "1",
                                             "--no-plot"])
    assert res.exit_code == 2, res.output
    assert res.output == "error: option '--cost-ratio': must be a finite number >= 0 (value nan)\n"
    from evolve.eval.costs import ratio_costs
    with pytest.raises(InputError) as err:  # the same error from Python names the parameter
        ratio_costs(float("nan"))
    assert err.value.param == "cost_ratio" and str(err.value) == "cost_ratio: must be a finite number >= 0 (value nan)"


def test_a_knob_of_another_model_is_named_by_its_option(tmp_path):
    import generate_data

    res = CliRunner().invoke(generate_data.cli, ["--model", "independent", "--vocab-size", "5",
                                                 "--out", str(tmp_path / "d")])
    assert res.exit_code == 2 and not (tmp_path / "d").exists()
    assert res.output == "error: option '--vocab-size': applies to model vocab, not to model independent\n"


def _command(**attrs):
    from evolve.sim.models import SyntheticModel

    @click.command("demo", cls=CliCommand, **attrs)
    @click.option("--vocab", type=int, default=1)
    @click.option("--seed", type=int, default=0)
    def demo(vocab, seed):
        SyntheticModel(vocab_size=vocab, seed=seed)
    return demo


def test_aliases_map_a_parameter_to_an_option_of_another_name():
    plain = CliRunner().invoke(_command(), [])
    assert plain.exit_code == 2 and plain.output == "error: vocab_size: must be an integer in [2, 1000000] (value 1)\n"
    aliased = CliRunner().invoke(_command(aliases={"vocab_size": "vocab"}), [])
    assert aliased.output == "error: option '--vocab': must be an integer in [2, 1000000] (value 1)\n"
    seed = CliRunner().invoke(_command(aliases={"vocab_size": "vocab"}), ["--vocab", "5", "--seed", "-1"])
    assert seed.output == "error: option '--seed': must be an integer in [0, 2**63) (value -1)\n"
    assert flag_of(_command(aliases={"vocab_size": "vocab"}), "vocab_size") == "--vocab"
    assert flag_of(_command(), "nothing") is None


def test_a_group_does_not_name_its_subcommands_errors():
    """The error of a subcommand is named by the subcommand's options only (here it has none of that name)."""
    @click.group(cls=CliGroup)
    @click.option("--gamma", type=int, default=1)
    def group(gamma):
        pass

    @group.command("sub")
    def sub():
        raise InputError("must be at least 1 (value 0)", param="gamma")

    res = CliRunner().invoke(group, ["sub"])
    assert res.exit_code == 2 and res.output == "error: gamma: must be at least 1 (value 0)\n"


# --- comma lists -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("value, needle", [
    ("10,x", "'x' is not a valid integer (item 2 of '10,x')"),
    ("10,0", "0 is not in the range 1<=x<=64 (item 2 of '10,0')"),
    ("", "the list is empty"),
    ("4,,8", "item 2 is empty (value '4,,8')"),
])
def test_comma_list_errors_name_the_option_and_the_first_bad_item(value, needle):
    @click.command(cls=CliCommand)
    @click.option("--widths", type=CommaList(click.IntRange(1, 64)), default="3,1")
    def cmd(widths):
        click.echo(repr(widths))

    assert CliRunner().invoke(cmd, []).output == "(3, 1)\n"
    assert CliRunner().invoke(cmd, ["--widths", " 4, 8 "]).output == "(4, 8)\n"
    res = CliRunner().invoke(cmd, ["--widths", value])
    assert res.exit_code == 2 and res.output == f"error: Invalid value for '--widths': {needle}\n", res.output


def test_layer_list_and_window():
    assert LAYER_LIST.convert("9, 2,4-6,4", None, None) == (2, 4, 5, 6, 9)
    assert WINDOW.convert("4, 64", None, None) == (4, 64)
    assert CommaList(float).convert((0.5, "0.25"), None, None) == (0.5, 0.25)
    with pytest.raises(click.BadParameter, match="'6-4': the range ends before it starts"):
        LAYER_LIST.convert("6-4", None, None)
    with pytest.raises(click.BadParameter, match=r"expected SINK,RECENT \(2 comma-separated items\), got 3"):
        WINDOW.convert("1,2,3", None, None)
