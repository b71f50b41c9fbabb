"""The tables of README.md and docs/*.md, each produced by the project's own report functions.

A documented table sits in a Markdown file between two marker lines::

    <!-- table: NAME -->
    ...generated text...
    <!-- /table -->

``python -m evolve.docs`` replaces every block's text with the output of the
producer registered under NAME (:data:`TABLES`, plus the option tables of
:mod:`evolve.cli.docs`); ``python -m evolve.docs --check`` only compares and
names the first stale block. A producer is a function of a :class:`Workspace`
(datasets generated on demand, deterministically, into a temporary directory)
that returns the block's Markdown text.

What the tables hold and where they come from:

* datasets: the default dataset of ``python generate_data.py`` (vocab model,
  seed 42, 1000 train sequences) and ``--model independent`` with the same seed
  (:func:`evolve.traces.synth.generate.generate_dataset`), written to the workspace;
* comparisons: :mod:`evolve.commands.compare.table` on the test split with the
  registered rules only (promoted champions are left out), rendered as
  Markdown without the ``Time`` column (wall time varies by machine);
* the pareto table: :mod:`evolve.commands.pareto.command` on the default test split with
  the evolved front stored in ``docs/fronts/pareto_default.json`` (the front of
  one long run, see :data:`PARETO_FRONT_COMMAND`; the search itself is too slow
  to repeat here, the scoring of its rules is not);
* simulator tables: :mod:`evolve.commands.simulate` with the command's defaults;
* the rediscovery table: two runs of :func:`evolve.search.rundir.run` with the
  default settings but from random trees only (no warm start), their champions
  scored on test against standard rejection;
* reference tables read from the code: schema columns (:mod:`evolve.traces.schema`),
  registered rules and rule families (:mod:`heuristics`), and the module map
  (module docstrings read with :mod:`ast`, nothing imported).

Paths of the temporary workspace never reach a table: they are replaced by the
directory a user would pass (``data``, ``data/independent``).
"""
from __future__ import annotations

import ast
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from evolve.errors import InputError
from evolve.files.atomic import atomic_write_text
from evolve.report.markdown import drop_columns, fenced, markdown_table

#: Repository root (README.md, docs/, the packages).
ROOT = Path(__file__).resolve().parents[2]
#: The fixture of the pareto table, relative to :data:`ROOT`.
PARETO_FRONT = Path("docs/fronts/pareto_default.json")
#: The command whose final front the fixture holds (run after ``python generate_data.py``).
PARETO_FRONT_COMMAND = ("python -m evolve run --objective pareto --population 2000 "
                        "--generations 300 --max-depth 10 --seed 1")
#: Packages of the module map, bottom floor first.
PACKAGES: tuple[str, ...] = ("evolve", "heuristics")

_OPEN = re.compile(r"^<!-- table: ([A-Za-z0-9_]+) -->\n", re.M)
_CLOSE = "<!-- /table -->"


# --- the workspace ----------------------------------------------------------------------------

#: Datasets a producer may ask for: name -> (generator model, directory a user would write it to).
DATASETS: dict[str, tuple[str, str]] = {
    "default": ("vocab", "data"),
    "independent": ("independent", "data/independent"),
}


class Workspace:
    """Datasets and run directories of one refresh, in a temporary directory removed by :meth:`close`.

    Every dataset is generated at most once, with the defaults of
    ``python generate_data.py`` (seed 42, 1000 train sequences) and the model of
    :data:`DATASETS`, so the same code gives the same tables on every machine.
    """

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="specdec-docs-"))
        self._datasets: dict[str, Path] = {}

    def dataset(self, name: str) -> Path:
        """Directory of dataset ``name`` (a key of :data:`DATASETS`), generated on first use."""
        if name not in self._datasets:
            from evolve.traces.synth import generate
            model, _ = DATASETS[name]
            path = self.root / name
            generate.write(generate.generate_dataset(model), path)
            self._datasets[name] = path
        return self._datasets[name]

    def scratch(self, name: str) -> Path:
        """A fresh empty directory ``name`` inside the workspace."""
        path = self.root / "scratch" / name
        path.mkdir(parents=True, exist_ok=False)
        return path

    def public(self, text: str) -> str:
        """``text`` with every generated dataset's path replaced by the directory a user would use."""
        for name, path in sorted(self._datasets.items(), key=lambda kv: -len(str(kv[1]))):
            text = text.replace(str(path), DATASETS[name][1])
        return text

    def close(self) -> None:
        """Remove the temporary directory."""
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> "Workspace":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# --- helpers ----------------------------------------------------------------------------------


# --- dataset and comparison tables --------------------------------------------------------------

def dataset_table(ws: Workspace, name: str = "default") -> str:
    """The per-split statistics ``python generate_data.py`` prints, for dataset ``name``."""
    from evolve.traces.io import load_metadata
    from evolve.traces.synth.generate import format_stats
    meta = load_metadata(ws.dataset(name))
    return fenced(format_stats(meta["statistics"]))


def comparison_table(ws: Workspace, name: str) -> str:
    """``python benchmark.py --data DIR --format markdown`` on the test split, registered rules only, no Time."""
    from evolve.commands.compare.table import baseline_entries, run_comparison
    from evolve.report.compare.format import format_markdown
    comparison = run_comparison(ws.dataset(name), "test", baseline_entries(), repeats=1)
    table = drop_columns(format_markdown(comparison), {"Time"})
    notes = "".join(f"\nNote: {n}\n" for n in comparison.notes)
    return ws.public(table + notes)


def pareto_table(ws: Workspace) -> str:
    """``python benchmark.py pareto`` on the default test split, the evolved curve from :data:`PARETO_FRONT`."""
    from evolve.report.pareto.format import format_table
    from evolve.commands.pareto.command import run_pareto
    fixture = ROOT / PARETO_FRONT
    if not fixture.is_file():
        raise InputError(f"{PARETO_FRONT}: missing (the front of `{PARETO_FRONT_COMMAND}`)")
    run_dir = ws.scratch("pareto_run")
    shutil.copyfile(fixture, run_dir / "front.json")
    comp = run_pareto(ws.dataset("default"), "test", [run_dir])
    text = format_table(comp).replace(str(run_dir / "front.json"), str(PARETO_FRONT))
    return fenced(ws.public(text))


def rediscovery_table(ws: Workspace) -> str:
    """``python -m evolve run --from-scratch`` (random initial trees) on both datasets; champions scored on test.

    Columns: dataset, the champion's expression, its test fitness and standard
    rejection's, the difference, and the champion's expected TV (0 = lossless).
    """
    from evolve.report.compare.rows import REFERENCE_RULE
    from evolve.commands.compare.table import baseline_entries, champion_entries, run_comparison
    from evolve.search import config, rundir
    rows = []
    for name in ("default", "independent"):
        data = ws.dataset(name)
        cfg = config.resolve({"data": str(data), "out": str(ws.scratch(f"run_{name}")), "warm_start": False})
        info = rundir.run(cfg)
        entries = [e for e in baseline_entries() if e.rule.name == REFERENCE_RULE]
        entries += champion_entries([info.run_dir / "champion.json"])
        comparison = run_comparison(data, "test", entries, repeats=1)
        ref, champ = comparison.rows[0], comparison.rows[1]
        rows.append([f"`{DATASETS[name][1]}` ({DATASETS[name][0]})", f"`{champ.expression}`",
                     f"{champ.metrics.fitness:.3f}", f"{ref.metrics.fitness:.3f}", f"{champ.delta_fitness:+.3f}",
                     f"{champ.metrics.expected_tv:.4f}"])
    return markdown_table(["data (model)", "evolved champion", "test fitness", "standard_rejection",
                           "Δ fitness", "champion E[TV]"], rows, right={2, 3, 4, 5}, measured=True)


def simulate_table(ws: Workspace, trees: bool = False) -> str:
    """``python benchmark.py simulate`` (or ``--trees --lengths 1000 --samples 10``) with default options."""
    from evolve.commands import simulate
    from evolve.report.simulate import format_table
    if trees:
        sim = simulate.run_trees(length=1000, samples=10)
    else:
        sim = simulate.run_sweep(simulate.resolve_rule(None, None))
    return fenced(format_table(sim))


# --- reference tables read from the code -------------------------------------------------------

def schema_table(ws: Workspace) -> str:
    """Every schema column: name, dtype, required or optional, valid range, meaning (:data:`evolve.traces.schema.COLUMNS`)."""
    from evolve.traces.schema import COLUMNS
    dtype = {"int": "int64", "float": "float64", "bool": "bool", "str": "string"}
    rows = [[f"`{c.name}`", dtype[c.value_type], "required" if c.required else "optional",
             "" if c.value_type in ("bool", "str") else c.range_text(), c.doc] for c in COLUMNS]
    return markdown_table(["column", "dtype", "presence", "range", "meaning"], rows)


def rules_table(ws: Workspace) -> str:
    """Every registered rule: name, lossless, optional columns read, expression over the primitive set."""
    from heuristics.registry import get_rule, rule_names
    rows = []
    for name in rule_names():
        rule = get_rule(name)
        body = f"`{rule.expression}`" if rule.expression is not None else "(Python function)"
        rows.append([f"`{name}`", "yes" if rule.lossless else "no", ", ".join(rule.columns_needed) or "-", body])
    return markdown_table(["rule", "lossless", "reads", "expression"], rows)


def families_table(ws: Workspace) -> str:
    """Every published rule family (:func:`heuristics.registry.families`) and its sweep grid."""
    from heuristics.registry import families
    rows = []
    for f in families().values():
        if f.parameter is None:
            grid = "one rule"
        else:
            grid = f"{len(f.grid)} values, {min(f.grid):g} to {max(f.grid):g}"
        rows.append([f"`{f.name}`", f.parameter or "-", "-" if f.default is None else f"{f.default:g}", grid,
                     ", ".join(f.columns) or "-"])
    return markdown_table(["family", "parameter", "default", "sweep grid", "reads"], rows)


def module_docstring(path: Path) -> str:
    """First paragraph of a Python file's module docstring, on one line, reST markup turned into Markdown.

    ``''`` if the module has no docstring. The file is parsed, not imported.
    """
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    if not doc:
        return ""
    para = " ".join(doc.strip().split("\n\n")[0].split())
    para = re.sub(r":[a-z]+:`~?([^`]+)`", r"`\1`", para)   # :class:`X` -> `X`
    return para.replace("``", "`")


def module_map_table(ws: Workspace) -> str:
    """Every module of :data:`PACKAGES` and the top-level scripts with its docstring's first line."""
    files = [ROOT / "generate_data.py", ROOT / "benchmark.py"]
    for pkg in PACKAGES:
        files += sorted(p for p in (ROOT / pkg).rglob("*.py") if "__pycache__" not in p.parts)
    rows = []
    for path in files:
        rel = path.relative_to(ROOT).as_posix()
        line = module_docstring(path)
        if path.name == "__init__.py" and not line:
            continue
        rows.append([f"`{rel}`", line])
    return markdown_table(["module", "what it holds"], rows)


# --- the registry -------------------------------------------------------------------------------

@dataclass(frozen=True)
class DocTable:
    """A documented table: its name (the marker's NAME), producer, and whether it is slow (> ~20 s)."""

    name: str
    produce: Callable[[Workspace], str]
    slow: bool = False


TABLES: dict[str, DocTable] = {t.name: t for t in (
    DocTable("dataset_default", dataset_table),
    DocTable("benchmark_default", lambda ws: comparison_table(ws, "default")),
    DocTable("benchmark_independent", lambda ws: comparison_table(ws, "independent")),
    DocTable("pareto_default", pareto_table, slow=True),
    DocTable("rediscovery", rediscovery_table, slow=True),
    DocTable("simulate_sweep", simulate_table),
    DocTable("simulate_trees", lambda ws: simulate_table(ws, trees=True), slow=True),
    DocTable("schema_columns", schema_table),
    DocTable("rules_registry", rules_table),
    DocTable("rule_families", families_table),
    DocTable("module_map", module_map_table),
)}


# --- finding and refreshing blocks -------------------------------------------------------------------

def doc_files(root: Path = ROOT) -> list[Path]:
    """README.md and every Markdown file under docs/, sorted."""
    return [root / "README.md"] + sorted((root / "docs").rglob("*.md"))


def blocks(text: str, source: str = "<text>") -> list[tuple[str, int, int]]:
    """The table blocks of a Markdown text: (name, start, end) of each block's body, in order.

    Raises: InputError naming ``source`` and the line of a block without its closing marker.
    """
    out = []
    for m in _OPEN.finditer(text):
        end = text.find(_CLOSE, m.end())
        nxt = _OPEN.search(text, m.end())
        if end < 0 or (nxt is not None and nxt.start() < end):
            line = text.count("\n", 0, m.start()) + 1
            raise InputError(f"{source}: line {line}: table '{m.group(1)}' has no closing '{_CLOSE}'")
        out.append((m.group(1), m.end(), end))
    return out


def replace_blocks(text: str, tables: dict[str, str], source: str = "<text>") -> str:
    """``text`` with the body of every block named in ``tables`` replaced by its new text."""
    parts, pos = [], 0
    for name, start, end in blocks(text, source):
        if name in tables:
            parts += [text[pos:start], tables[name]]
            pos = end
    return "".join(parts) + text[pos:]


@dataclass
class Refresh:
    """What :func:`refresh` found: stale (file, table) pairs in document order, and the files it rewrote."""

    stale: list[tuple[Path, str]]
    written: list[Path]
    produced: list[str]


def refresh(producers: dict[str, DocTable], names: list[str] | None = None, check: bool = False,
            include_slow: bool = True, root: Path = ROOT) -> Refresh:
    """Regenerate (or with ``check`` only compare) the table blocks of :func:`doc_files`.

    Args:
        producers: {name: DocTable} of every known table.
        names: only these tables (default: every table a document uses).
        check: compare only; nothing is written.
        include_slow: with False, slow tables are left as they are.
        root: repository root.

    Every table is produced once before any file is written; each changed
    file is then replaced atomically (temporary file + rename).

    Raises: InputError for an unknown table name in a document or in ``names``,
    or a block without its closing marker.
    """
    texts = {p: p.read_text(encoding="utf-8") for p in doc_files(root)}
    used: list[str] = []
    for path, text in texts.items():
        for name, _, _ in blocks(text, str(path.relative_to(root))):
            if name not in producers:
                raise InputError(f"{path.relative_to(root)}: unknown table '{name}' "
                                 f"(known: {', '.join(sorted(producers))})")
            if name not in used:
                used.append(name)
    for name in names or []:
        if name not in producers:
            raise InputError(f"unknown table '{name}' (known: {', '.join(sorted(producers))})")
    wanted = [n for n in used if (names is None or n in names) and (include_slow or not producers[n].slow)]
    with Workspace() as ws:
        new = {name: producers[name].produce(ws) for name in wanted}
    stale, written = [], []
    for path, text in texts.items():
        for name, start, end in blocks(text):
            if name in new and text[start:end] != new[name]:
                stale.append((path, name))
        if not check:
            updated = replace_blocks(text, new)
            if updated != text:
                atomic_write_text(path, updated)
                written.append(path)
    return Refresh(stale, written, wanted)


__all__ = ["TABLES", "DocTable", "Workspace", "Refresh", "refresh", "blocks", "replace_blocks", "doc_files",
           "PARETO_FRONT", "PARETO_FRONT_COMMAND", "ROOT"]
