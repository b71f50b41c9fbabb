"""A dataset of some question categories of a harvested one (``generate_data.py subset``).

A harvest of a structured prompts file (:mod:`evolve.harvest.prompts`) gives every record and tree row a
``category`` and draws its splits within each category, so every split holds every category. The subset of
categories C is the dataset a harvest of C's questions alone would have given with the same splits: every
split's records (and tree rows) of the texts of C, ``texts.jsonl``'s lines of those texts, and ``metadata.json``
with the splits' text ids, the per-split statistics recomputed from the kept records and texts (records,
sequences, acceptance figures, generated tokens, target calls where ``texts.jsonl`` has them, ...) and ``subset`` = {"of": the source
directory, "categories": C}. Every command reads it as any dataset: a search on it is a search for those
categories (Spec-Bench's task groups: one policy per group, docs/tutorial/spec-bench.md).
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pandas as pd

from evolve.errors import InputError
from evolve.files.atomic import atomic_write_text
from evolve.harvest.resume import TEXTS_FILE, split_statistics, tree_stats
from evolve.traces.io import SPLITS, Traces, load_metadata, load_split, write_dataset


def read_texts(data_dir: str | os.PathLike) -> list[dict[str, Any]]:
    """The lines of ``texts.jsonl`` of a harvested dataset (one dict per text, ``seq_id`` order as written).

    Raises: InputError naming the file and line when it is missing, unreadable or a line is not a JSON object
    with ``seq_id``, ``split`` and ``category``.
    """
    path = Path(data_dir) / TEXTS_FILE
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read the harvest's text list ({type(exc).__name__}); a subset needs a "
                         f"dataset harvested from a prompts file with categories") from None
    texts = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            t = json.loads(line)
        except ValueError:
            raise InputError(f"{path}, line {n}: not JSON") from None
        if not isinstance(t, dict) or any(k not in t for k in ("seq_id", "split", "category")):
            raise InputError(f"{path}, line {n}: a text needs 'seq_id', 'split' and 'category' (a harvest of a "
                             f"prompts file with categories writes them)")
        texts.append(t)
    return texts


def subset_dataset(data_dir: str | os.PathLike, categories: Iterable[str], out_dir: str | os.PathLike
                   ) -> dict[str, dict]:
    """Write the subset of ``categories`` of the harvested dataset ``data_dir`` into ``out_dir`` (module doc);
    return its per-split statistics.

    Raises: InputError for a dataset without categories, a category it does not have (naming the ones it has),
    a split left without records, ``out_dir`` equal to ``data_dir``, or the loader's errors.
    """
    src, out = Path(data_dir), Path(out_dir)
    if src.resolve() == out.resolve():
        raise InputError(f"{out}: is the source dataset; write the subset into another directory", param="out")
    chosen = sorted(set(categories))
    meta = load_metadata(src)
    texts = read_texts(src)
    have = sorted({str(t["category"]) for t in texts})
    missing = [c for c in chosen if c not in have]
    if missing:
        raise InputError(f"{src}: has no category '{missing[0]}' (it has {', '.join(have)})", param="categories")
    kept = [t for t in texts if t["category"] in chosen]
    seq_ids = np.asarray(sorted(int(t["seq_id"]) for t in kept), dtype=np.int64)
    tables: dict[str, Any] = {}
    stats: dict[str, dict] = {}
    for s in SPLITS:
        traces = load_split(src, s)
        if not traces.has("category"):
            raise InputError(f"{traces.source}: has no 'category' column; a subset needs a dataset harvested from a "
                             f"prompts file with categories")
        mask = np.isin(traces["category"], chosen)
        if not mask.any():
            raise InputError(f"{traces.source}: no record of {', '.join(chosen)}; the subset's {s} split would be "
                             f"empty", param="categories")
        part = Traces({k: v[mask] for k, v in traces.columns.items()}, traces.source, s)
        tables[s] = part
        stats[s] = split_statistics(part.columns, [t for t in kept if t["split"] == s])
        tree_file = src / f"{s}.trees.parquet"
        if tree_file.is_file():
            trees = pd.read_parquet(tree_file)
            trees = trees[np.isin(trees["seq_id"].to_numpy(), seq_ids)].reset_index(drop=True)
            tables[f"{s}.trees"] = trees
            stats[s]["trees"] = tree_stats(trees)
    keep = set(seq_ids.tolist())
    splits = {s: [i for i in (meta.get("splits") or {}).get(s, []) if i in keep] for s in SPLITS}
    metadata = {k: v for k, v in meta.items() if k not in ("schema_version", "format")}
    metadata.update(splits=splits, statistics=stats, texts_done=len(kept), texts_total=len(kept), complete=True,
                    subset={"of": str(src.resolve()), "categories": chosen})
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / TEXTS_FILE, "".join(json.dumps(t) + "\n" for t in kept))
    write_dataset(out, tables, metadata, meta.get("format", "parquet"))
    return stats


__all__ = ["read_texts", "subset_dataset"]
