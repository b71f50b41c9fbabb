"""One verification-length policy for all of Spec-Bench's task groups, or one per group? (``benchmark.py groups``)

``scripts/spec_bench_groups.sh`` answers it on a harvest of a categorised prompts file: the dataset of each task
group (``generate_data.py subset``, :mod:`evolve.harvest.subset`) gets its own search (the same settings as the
search on all categories), and the benchmark of the group's test split compares, under one cost file, the single
policy (the champion of the search on all categories), the group's policy (its own search's champion), the best
fixed length tuned on the group's valid split and the confidence threshold tuned there, and plain decoding
(``--format json`` of ``benchmark.py``, one ``bench.json`` per group). This module tabulates those files:

RUNS/single.json is the single policy's champion file; RUNS/GROUP/group.json the group's champion file,
RUNS/GROUP/data the group's dataset and RUNS/GROUP/bench.json its benchmark (:func:`group_files` lists what is read).
Per group: tokens per second of each row and its speedup over plain decoding (the cost file's). The last line
combines the groups as one workload: tokens per second = sum of the groups' generated test tokens / sum of (tokens /
tokens per second), with "per group" taking each group's own policy (and the best fixed length of each group). A
group whose search returned a seeded competitor (evolution found nothing better on valid, or the champion guard kept
it) is marked.

What cannot be tabulated side by side is refused in one line naming the file (and both sides): a missing or
malformed file (a champion, a benchmark whose rows are not objects or whose figures are not finite positive
numbers, a dataset that is missing or no subset of categories, its statistics without the test split's generated
tokens); champions of different kinds; a group's champion evolved on another dataset than the group's (and the
single policy on a dataset the group's is not a subset of), group datasets that are subsets of different sources,
runs of different seeds, draft lengths or cost files (:mod:`evolve.commands.run_context`); two groups holding a
category in common (the combined line would count its texts twice); a benchmark of another
dataset than the group's (its ``data`` record: the test split's digest). A benchmark is read on its test split's rows
and headroom records (one of several splits holds the others too); one without the test split is refused.
"""
from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from evolve.commands.run_context import RunContext, check_readable, differing_file, run_context, same_costs, subset_source
from evolve.errors import InputError, printable
from evolve.report.groups import COLUMNS
from evolve.report.spec_bench import groups_of
from evolve.files.digest import cached_sha256_file, same_digest
from evolve.traces.io import METADATA_FILE, load_metadata, read_json, split_path

#: The files of a runs directory (module doc).
SINGLE_FILE = "single.json"
GROUP_FILE = "group.json"
BENCH_FILE = "bench.json"
DATA_DIR = "data"


def group_dirs(runs: str | os.PathLike) -> list[Path]:
    """The group directories of ``runs``: those holding a ``bench.json``, a ``group.json`` or a ``data`` directory
    (sorted by name; a group missing one of them is refused when read, never left out)."""
    root = Path(runs)
    try:
        return sorted(p for p in root.iterdir() if p.is_dir() and any(
            (p / name).exists() for name in (BENCH_FILE, GROUP_FILE, DATA_DIR)))
    except OSError:
        return []


def group_files(runs: str | os.PathLike) -> list[tuple[str, Path]]:
    """(what, path) of every file and directory ``benchmark.py groups`` reads in ``runs``: ``single.json``, and of
    each group directory its champion, benchmark and dataset (the command's input inventory,
    :mod:`evolve.cli.inventory`)."""
    root = Path(runs)
    found = [("the single policy", root / SINGLE_FILE)]
    for d in group_dirs(root):
        found += [("a group's champion", d / GROUP_FILE), ("a group's benchmark", d / BENCH_FILE),
                  ("a group's dataset", d / DATA_DIR)]
    return found


def _champion(path: Path, what: str):
    """The champion of ``path`` and its run's context; InputError naming the file (and ``what`` it is)."""
    from evolve.commands.compare.table import champion_from_file

    if not path.is_file():
        raise InputError(f"{path}: {'not a file' if path.exists() else 'no such file'} ({what})")
    return champion_from_file(path), run_context(path)


def _positive(value: Any, where: str, key: str) -> float:
    """``value`` as a finite positive float; InputError naming ``where`` and ``key`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise InputError(f"{where}: key '{key}' must be a finite positive number (value "
                         f"{printable(repr(value))[:40]})")
    return float(value)


#: The split a group's benchmark is read on (the group's held-out prompts).
TEST_SPLIT = "test"


def _rows(bench: Any, path: Path) -> list[tuple[int, dict]]:
    """(index, row) of the test split's rows of a benchmark's JSON ``bench`` read from ``path`` (a benchmark of several
    splits holds the others too); InputError naming the file when the rows are not a list of objects or none is of
    the test split."""
    rows = bench.get("rows") if isinstance(bench, dict) else None
    if not isinstance(rows, list):
        raise InputError(f"{path}: not a benchmark's JSON (its format json: an object with 'rows')")
    for i, r in enumerate(rows):
        if not isinstance(r, dict):
            raise InputError(f"{path}: row {i} is not an object")
    found = [(i, r) for i, r in enumerate(rows) if r.get("split") == TEST_SPLIT]
    if not found:
        raise InputError(f"{path}: no row of the {TEST_SPLIT} split (the group's benchmark scores its dataset's "
                         f"{TEST_SPLIT} split)")
    return found


def _bench_of(bench: Any, path: Path, data: Path) -> None:
    """Refuse a benchmark (its JSON ``bench``, read from ``path``) that records another test split than ``data``'s (its
    ``data.test.sha256``)."""
    data_key = bench.get("data") if isinstance(bench, dict) else None
    if data_key is None:  # a benchmark written before its JSON recorded the splits' digests
        return
    recorded = data_key.get(TEST_SPLIT) if isinstance(data_key, dict) else None
    if not isinstance(recorded, dict):
        raise InputError(f"{path}: key 'data.{TEST_SPLIT}' must be an object of {{source, sha256}} (a benchmark's "
                         f"JSON of the {TEST_SPLIT} split)")
    digest = recorded.get("sha256")
    test = split_path(data, TEST_SPLIT)
    if isinstance(digest, str) and test is not None and not same_digest(digest, cached_sha256_file(test)):
        raise InputError(f"{path}: a benchmark of another test split ({recorded.get('source')}) than {test}; "
                         f"benchmark the group's dataset")


def _categories(data: Path) -> tuple[tuple[str, ...], int]:
    """(categories, generated test tokens) of a group's dataset; InputError naming the directory or file."""
    if not data.is_dir():
        raise InputError(f"{data}: no such directory (the group's dataset: generate_data.py subset)")
    meta_path = data / METADATA_FILE
    if not meta_path.is_file():
        raise InputError(f"{meta_path}: {'not a file' if meta_path.exists() else 'no such file'} (the group's "
                         f"dataset: generate_data.py subset)")
    meta = load_metadata(data)
    cats = (meta.get("subset") or {}).get("categories") if isinstance(meta.get("subset"), dict) else None
    if not isinstance(cats, list) or not cats or not all(isinstance(c, str) and c for c in cats):
        raise InputError(f"{meta_path}: not a subset of categories (no 'subset.categories': generate_data.py "
                         f"subset writes it)")
    tokens = ((meta.get("statistics") or {}).get("test") or {}).get("generated_tokens")
    if type(tokens) is not int or tokens <= 0:
        raise InputError(f"{meta_path}: key 'statistics.test.generated_tokens' must be a whole number > 0 (value "
                         f"{printable(repr(tokens))[:40]})")
    return tuple(cats), tokens


def _same_run(first: tuple[Path, Any, RunContext, Any], other: tuple[Path, Any, RunContext, Any]) -> None:
    """Refuse two champions that cannot stand side by side: other kinds, seeds, gamma or cost files (naming both)."""
    (a, rule_a, ctx_a, seed_a), (b, rule_b, ctx_b, seed_b) = first, other
    if rule_a.kind != rule_b.kind:
        raise InputError(f"{b} is a {rule_b.kind} champion and {a} a {rule_a.kind} one: the table compares "
                         f"policies of one kind")
    if seed_a is not None and seed_b is not None and seed_a != seed_b:
        raise InputError(f"{b} was evolved with seed {seed_b} and {a} with seed {seed_a}: runs of one seed go side "
                         f"by side")
    if ctx_a.gamma is not None and ctx_b.gamma is not None and ctx_a.gamma != ctx_b.gamma:
        raise InputError(f"{b} was evolved with gamma {ctx_b.gamma} and {a} with gamma {ctx_a.gamma}")
    if ctx_a.costs is not None and ctx_b.costs is not None and Path(ctx_a.costs).is_file() \
            and Path(ctx_b.costs).is_file() and not same_costs(ctx_a.costs, ctx_b.costs):
        raise InputError(f"{b} was evolved under the cost file {ctx_b.costs} and {a} under {ctx_a.costs}")


def _provenance(path: Path) -> dict:
    """The ``provenance`` object of a champion file (empty when it has none)."""
    doc = read_json(path)
    prov = doc.get("provenance") if isinstance(doc, dict) else None
    return prov if isinstance(prov, dict) else {}


def _seed(prov: dict) -> Any:
    """The run's seed a champion's provenance records, or None."""
    seed = prov.get("seed")
    return seed if type(seed) is int else None


def _seeded(prov: dict) -> bool:
    """Whether a champion's provenance says it is a seeded competitor (``champion_source`` ``seeded:NAME``: evolution
    found nothing better on valid, or the champion guard kept the competitor)."""
    return str(prov.get("champion_source", "")).startswith("seeded")


def _group(d: Path, single: tuple[Path, Any, RunContext, Any], sources: dict[Path, Path]
           ) -> tuple[dict[str, Any], tuple[Path, Any, RunContext, Any]]:
    """(the row of one group directory (see :func:`group_rows`), its champion as (file, rule, context, seed))."""
    data = d / DATA_DIR
    cats, tokens = _categories(data)
    rule, ctx = _champion(d / GROUP_FILE, "the group's champion: its search's champion.json")
    prov = _provenance(d / GROUP_FILE)
    group = (d / GROUP_FILE, rule, ctx, _seed(prov))
    _same_run(single, group)
    other = differing_file(data, ctx)
    if other is not None:
        check_readable(data)  # a damaged file is named by its reader
        raise InputError(f"{d / GROUP_FILE} was evolved on {ctx.data_dir}, not on the group's dataset {data} ({other} "
                         f"has another SHA-256 than the split its run read)")
    other = differing_file(data, single[2])
    if other is not None:
        raise InputError(f"{data} is not a subset of the dataset {single[0]} was evolved on ({single[2].data_dir}; "
                         f"{other} differs)")
    source = subset_source(data)
    if source is not None:
        for other, seen in sources.items():
            if seen.resolve() != source.resolve():
                raise InputError(f"{data} is a subset of {source} and {other} of {seen}: groups of one harvest go "
                                 f"side by side")
        sources[data] = source
    bench = d / BENCH_FILE
    if not bench.is_file():
        raise InputError(f"{bench}: {'not a file' if bench.exists() else 'no such file'} (the group's benchmark: "
                         f"benchmark.py's JSON)")
    doc = read_json(bench)
    rows = _rows(doc, bench)
    _bench_of(doc, bench, data)

    def tps(pred, what: str) -> float:
        for i, r in rows:
            if pred(r) and r.get("tokens_per_second") is not None:
                return _positive(r["tokens_per_second"], f"{bench}, row {i}", "tokens_per_second")
        raise InputError(f"{bench}: no row of {what} with tokens per second (the benchmark needs a cost file and "
                         f"both champions)")

    def champion(expr):
        return lambda r: r.get("role") == "champion" and r.get("expression") == expr

    return {
        "label": groups_of(cats)[0].label if len(groups_of(cats)) == 1 else ", ".join(cats), "categories": cats,
        "tokens": tokens,
        "tps": {COLUMNS[0]: tps(champion(single[1].expression), "the single policy"),
                COLUMNS[1]: tps(champion(rule.expression), "the group's policy"),
                COLUMNS[2]: tps(lambda r: r.get("heuristic") == "best_fixed_gamma", "best_fixed_gamma"),
                COLUMNS[3]: tps(lambda r: r.get("heuristic") == "confidence_threshold", "confidence_threshold")},
        "plain_tps": _plain(rows, bench),
        "bound_tps": tps(lambda r: r.get("heuristic") == "length_oracle", "length_oracle"),
        "headroom": {COLUMNS[0]: _share(doc, bench, champion(single[1].expression), rows),
                     COLUMNS[1]: _share(doc, bench, champion(rule.expression), rows)},
        "seeded": _seeded(prov),
    }, group


def group_rows(runs: str | os.PathLike) -> list[dict[str, Any]]:
    """One dict per group directory of ``runs`` (module doc), in Spec-Bench's group order: ``label``,
    ``categories``, ``tokens`` (generated test tokens), ``tps`` (column -> tokens per second), ``plain_tps``,
    ``bound_tps`` (the ``length_oracle`` bound's), ``headroom`` (the single and the group's policy -> the share of the
    headroom its benchmark recorded, or None, :func:`_share`) and ``seeded`` (the group's champion is a seeded
    competitor, :func:`_seeded`).

    Raises: InputError naming the file (and both sides) for what cannot be tabulated side by side (module doc).
    """
    root = Path(runs)
    if not root.is_dir():
        raise InputError(f"{root}: no such directory", param="runs")
    single_path = root / SINGLE_FILE
    if not single_path.is_file():
        raise InputError(f"{single_path}: {'not a file' if single_path.exists() else 'no such file'} (the champion "
                         f"of the search on all categories)", param="runs")
    rule, ctx = _champion(single_path, "the champion of the search on all categories")
    single = (single_path, rule, ctx, _seed(_provenance(single_path)))
    sources: dict[Path, Path] = {}
    groups: list[tuple[Path, Any, RunContext, Any]] = []
    found = []
    owner: dict[str, Path] = {}
    for d in group_dirs(root):
        row, this = _group(d, single, sources)
        for category in row["categories"]:
            if category in owner:
                raise InputError(f"{d / DATA_DIR} and {owner[category] / DATA_DIR} both hold the category "
                                 f"'{printable(category)}': the groups of one workload hold different categories (each "
                                 f"text once in the combined line); remove one of them", param="runs")
            owner[category] = d
        found.append(row)
        for other in groups:
            _same_run(other, this)
        groups.append(this)
    if not found:
        raise InputError(f"{root}: no group directory (with a bench.json, group.json and data)", param="runs")
    order = {g.label: i for i, g in enumerate(groups_of(c for f in found for c in f["categories"]))}
    return sorted(found, key=lambda f: order.get(f["label"], len(order)))


def _share(doc: Any, bench: Path, pick, rows: list[tuple[int, dict]]) -> dict | None:
    """The test split's headroom record's figures (share, low, high: each a finite number or null) of the champion row
    ``pick`` selects in a benchmark's JSON ``doc`` read from ``bench`` (its ``headroom`` records name the row by its
    label), or None when the benchmark has none. Raises: InputError naming the file and key for a figure of another
    type."""
    labels = {r.get("heuristic") for _, r in rows if pick(r)}
    for j, rec in enumerate((doc.get("headroom") or ()) if isinstance(doc, dict) else ()):
        if not (isinstance(rec, dict) and rec.get("split") == TEST_SPLIT and rec.get("champion") in labels
                and isinstance(rec.get("headroom"), dict)):
            continue
        figures = {k: rec["headroom"].get(k) for k in ("share", "low", "high")}
        for k, v in figures.items():
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)):
                raise InputError(f"{bench}: key 'headroom[{j}].headroom.{k}' must be a finite number or null (value "
                                 f"{printable(repr(v))[:40]})")
        return figures
    return None


def _plain(rows: list[tuple[int, dict]], bench: Path) -> float:
    """Plain decoding's tokens per second of a benchmark: a row's tokens per second / its speedup."""
    for i, r in rows:
        if r.get("speedup") and r.get("tokens_per_second"):
            where = f"{bench}, row {i}"
            plain = _positive(r["tokens_per_second"], where, "tokens_per_second") / _positive(r["speedup"], where,
                                                                                                "speedup")
            return _positive(plain, where, "tokens_per_second / speedup")
    raise InputError(f"{bench}: no row with both a speedup and tokens per second")


__all__ = ["SINGLE_FILE", "GROUP_FILE", "BENCH_FILE", "DATA_DIR", "group_dirs", "group_files", "group_rows"]
