"""One verification-length policy for all of Spec-Bench's task groups, or one per group? (``benchmark.py groups``)

``scripts/spec_bench_groups.sh`` answers it on a harvest of a categorised prompts file: the dataset of each task
group (``generate_data.py subset``, :mod:`evolve.harvest.subset`) gets its own search (the same settings as the
search on all categories), and the benchmark of the group's test split compares, under one cost file, the single
policy (the champion of the search on all categories), the group's policy (its own search's champion), the best
fixed length tuned on the group's valid split and the confidence threshold tuned there, and plain decoding
(``--format json`` of ``benchmark.py``, one ``bench.json`` per group). This module tabulates those files:

RUNS/single.json is the single policy's champion file; RUNS/GROUP/group.json the group's champion file,
RUNS/GROUP/data the group's dataset and RUNS/GROUP/bench.json its benchmark. Per group: tokens per second of each
row and its speedup over plain decoding (the cost file's). The last line combines the groups as one workload:
tokens per second = sum of the groups' generated test tokens / sum of (tokens / tokens per second), with "per
group" taking each group's own policy (and the best fixed length of each group). A group whose search returned a
seeded competitor (evolution found nothing better on valid, or the champion guard kept it) is marked.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from evolve.errors import InputError
from evolve.report.groups import COLUMNS
from evolve.report.spec_bench import groups_of
from evolve.traces.io import load_metadata, read_json


def _expression(path: Path) -> str:
    from evolve.commands.compare.table import champion_from_file

    return champion_from_file(path).expression


def _seeded(path: Path) -> bool:
    """Whether a champion file holds a seeded competitor (``champion_source`` ``seeded:NAME``: evolution found
    nothing better on valid, or the champion guard kept the competitor)."""
    doc = read_json(path)
    prov = doc.get("provenance") if isinstance(doc, dict) else None
    return str((prov or {}).get("champion_source", "")).startswith("seeded")


def group_rows(runs: str | os.PathLike) -> list[dict[str, Any]]:
    """One dict per group directory of ``runs`` (module doc), in Spec-Bench's group order: ``label``,
    ``categories``, ``tokens`` (generated test tokens), ``tps`` (column -> tokens per second), ``plain_tps`` and
    ``seeded`` (the group's champion is a seeded competitor, :func:`_seeded`).

    Raises: InputError naming the file when a group's files are missing or a benchmark lacks a row.
    """
    root = Path(runs)
    single = root / "single.json"
    if not single.is_file():
        raise InputError(f"{single}: no such file (the champion of the search on all categories)", param="runs")
    single_expr = _expression(single)
    found = []
    for d in sorted(p for p in root.iterdir() if (p / "bench.json").is_file()):
        meta = load_metadata(d / "data")
        cats = tuple((meta.get("subset") or {}).get("categories") or ())
        if not cats:
            raise InputError(f"{d / 'data' / 'metadata.json'}: not a subset of categories (generate_data.py subset)")
        bench = read_json(d / "bench.json")
        rows = bench.get("rows") if isinstance(bench, dict) else None
        if not isinstance(rows, list):
            raise InputError(f"{d / 'bench.json'}: not a benchmark's JSON (its format json)")
        group_expr = _expression(d / "group.json")

        def tps(pred, what: str) -> float:
            for r in rows:
                if pred(r) and r.get("tokens_per_second") is not None:
                    return float(r["tokens_per_second"])
            raise InputError(f"{d / 'bench.json'}: no row of {what} with tokens per second (the benchmark "
                             f"needs a cost file and both champions)")

        def champion(expr):
            return lambda r: r.get("role") == "champion" and r.get("expression") == expr

        found.append({
            "label": groups_of(cats)[0].label if len(groups_of(cats)) == 1 else ", ".join(cats), "categories": cats,
            "tokens": int(meta["statistics"]["test"]["generated_tokens"]),
            "tps": {COLUMNS[0]: tps(champion(single_expr), "the single policy"),
                    COLUMNS[1]: tps(champion(group_expr), "the group's policy"),
                    COLUMNS[2]: tps(lambda r: r.get("heuristic") == "best_fixed_gamma", "best_fixed_gamma"),
                    COLUMNS[3]: tps(lambda r: r.get("heuristic") == "confidence_threshold", "confidence_threshold")},
            "plain_tps": _plain(rows, d),
            "bound_tps": tps(lambda r: r.get("heuristic") == "length_oracle", "length_oracle"),
            "headroom": {COLUMNS[0]: _share(bench, champion(single_expr), rows),
                         COLUMNS[1]: _share(bench, champion(group_expr), rows)},
            "seeded": _seeded(d / "group.json"),
        })
    if not found:
        raise InputError(f"{root}: no group directory with a bench.json", param="runs")
    order = {g.label: i for i, g in enumerate(groups_of(c for f in found for c in f["categories"]))}
    return sorted(found, key=lambda f: order.get(f["label"], len(order)))


def _share(bench: dict, pick, rows: list[dict]) -> dict | None:
    """The headroom record's figures (share, low, high) of the champion row ``pick`` selects in a benchmark's JSON
    (its ``headroom`` records name the row by its label), or None when the benchmark has none."""
    labels = {r.get("heuristic") for r in rows if pick(r)}
    for rec in bench.get("headroom") or ():
        if isinstance(rec, dict) and rec.get("champion") in labels and isinstance(rec.get("headroom"), dict):
            return {k: rec["headroom"].get(k) for k in ("share", "low", "high")}
    return None


def _plain(rows: list[dict], d: Path) -> float:
    """Plain decoding's tokens per second of a benchmark: a row's tokens per second / its speedup."""
    for r in rows:
        if r.get("speedup") and r.get("tokens_per_second"):
            return float(r["tokens_per_second"]) / float(r["speedup"])
    raise InputError(f"{d / 'bench.json'}: no row with both a speedup and tokens per second")


__all__ = ["group_rows"]
