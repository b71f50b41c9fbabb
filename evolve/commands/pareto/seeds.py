"""The robustness table of the pareto search: several runs' fronts against the families and the oracle bound.

``scripts/pareto_seeds.sh`` runs ``python -m evolve run --objective pareto`` for
three random seeds with the default options and three with ``--population 500
--generations 40``, scores each run's front with ``python benchmark.py pareto
--format json`` and hands the JSON files to this module::

    python -m evolve.commands.pareto.seeds FILE.json ...

One row per file (per run), with:

* the run's random seed, population and generations (from the run's
  ``config.toml``) and its search time in seconds (``run.json``; wall time,
  machine-dependent);
* at every budget above 0, the evolved curve's tokens per call and the share of
  the gap between the best family and the oracle bound that it closes:
  (evolved - best family) / (oracle bound - best family), in percent (negative
  when the evolved curve is below the best family; n/a when the bound equals
  the family value);
* whether the evolved curve beats every family at every budget above 0, and
  whether it has the largest hypervolume (the verdict of
  :meth:`evolve.report.pareto.curves.ParetoComparison.verdict`).

A last line gives the families' best values, the learned reference's values (with
the share of the gap it closes) and the bound, from the first file (the same in
every file when all runs were scored on the same split).
"""
from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path
from typing import Any, Sequence

from evolve.errors import InputError


def gap_closed(evolved: float | None, family: float | None, bound: float | None) -> float | None:
    """(evolved - family) / (bound - family) as a fraction, or None if a value is missing or bound <= family."""
    if evolved is None or family is None or bound is None or bound <= family:
        return None
    return (evolved - family) / (bound - family)


def _run_info(doc: dict[str, Any], path: str) -> dict[str, Any]:
    """Seed, population, generations and seconds of the (single) run a pareto JSON document scored."""
    runs = doc.get("runs") or []
    if len(runs) != 1:
        raise InputError(f"{path}: expected the comparison of exactly one run (found {len(runs)})")
    run_dir = Path(runs[0])
    try:
        cfg = tomllib.loads((run_dir / "config.toml").read_text())
        info = json.loads((run_dir / "run.json").read_text())
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: cannot read the run directory {run_dir} ({' '.join(str(exc).split())})") from None
    return {"seed": cfg["seed"], "population": cfg["population"], "generations": cfg["generations"],
            "seconds": info.get("seconds")}


def seed_row(doc: dict[str, Any], path: str = "comparison") -> dict[str, Any]:
    """One table row from a ``benchmark.py pareto --format json`` document of one run.

    Returns {"seed", "population", "generations", "seconds", "budgets": {key:
    {"evolved", "best_family", "family", "bound", "gap_closed", "learned",
    "learned_gap_closed"}}, "hypervolume",
    "family_hypervolume", "beats_all", "largest_hypervolume"}.

    Raises: InputError when the document has no evolved curve or its run directory is unreadable.
    """
    curves = doc.get("curves", {})
    if "evolved" not in curves:
        raise InputError(f"{path}: no evolved curve (was the comparison given a run directory?)")
    evolved = curves["evolved"]
    verdict = doc["verdict"]
    budgets = {}
    for key, margin in verdict["margins"].items():
        bound = doc["bound"]["upper_bound"].get(key)
        budgets[key] = {"evolved": margin["evolved"], "best_family": margin["best_family_value"],
                        "family": margin["best_family"], "bound": bound,
                        "gap_closed": gap_closed(margin["evolved"], margin["best_family_value"], bound)}
    learned = doc.get("references", {}).get("learned")
    for key, cell in budgets.items():
        value = learned["best_at_budget"].get(key) if learned else None
        cell["learned"] = value
        cell["learned_gap_closed"] = gap_closed(value, cell["best_family"], cell["bound"])
    families = [c for name, c in curves.items() if name != "evolved"]
    row = _run_info(doc, path)
    row.update(budgets=budgets, hypervolume=evolved["hypervolume"],
               family_hypervolume=max(c["hypervolume"] for c in families),
               beats_all=bool(verdict["beats_all_above_0"]),
               largest_hypervolume=verdict["largest_hypervolume"] == "evolved")
    return row


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.0f}%"


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    """The rows as a Markdown table, then one line with the best family and the bound at each budget."""
    if not rows:
        return "(no runs)\n"
    keys = list(rows[0]["budgets"])
    header = ["seed", "population x generations", "seconds"] \
        + [f"TV<={k} (gap closed)" for k in keys] + ["hypervolume", "beats every family", "largest hypervolume"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * 3 + "---:|" * (len(keys) + 1) + "---|---|"]
    for r in rows:
        cells = [str(r["seed"]), f"{r['population']} x {r['generations']}",
                 "n/a" if r["seconds"] is None else f"{r['seconds']:.0f}"]
        cells += [f"{r['budgets'][k]['evolved']:.4f} ({_pct(r['budgets'][k]['gap_closed'])})" for k in keys]
        cells += [f"{r['hypervolume']:.5f}", "yes" if r["beats_all"] else "no",
                  "yes" if r["largest_hypervolume"] else "no"]
        lines.append("| " + " | ".join(cells) + " |")
    first = rows[0]["budgets"]
    ref = "; ".join(f"TV<={k}: best family {first[k]['family']} {first[k]['best_family']:.4f}, "
                    f"oracle bound {first[k]['bound']:.4f}" for k in keys)
    lines += ["", "TV<=k: the evolved front's mean acceptance length (tokens per target call) within that TV-per-token "
                  "budget, and the share of the gap from the best family to the oracle bound it closes."]
    lines += ["", f"Families' largest hypervolume {max(r['family_hypervolume'] for r in rows):.5f}. {ref}."]
    if all(first[k]["learned"] is not None for k in keys):
        lines += ["", "learned reference (gap closed): " + "; ".join(
            f"TV<={k}: {first[k]['learned']:.4f} ({_pct(first[k]['learned_gap_closed'])})" for k in keys) + "."]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Print the table of the pareto JSON files named in ``argv`` (``sys.argv[1:]`` by default); returns 0."""
    paths = list(sys.argv[1:] if argv is None else argv)
    if not paths:
        raise InputError("name at least one JSON document of `python benchmark.py pareto` (format json)")
    rows = []
    for path in paths:
        try:
            doc = json.loads(Path(path).read_text())
        except (OSError, ValueError) as exc:
            raise InputError(f"{path}: cannot read a pareto JSON document ({' '.join(str(exc).split())})") from None
        rows.append(seed_row(doc, path))
    sys.stdout.write(format_table(rows))
    return 0


__all__ = ["gap_closed", "seed_row", "format_table", "main"]


if __name__ == "__main__":
    sys.exit(main())
