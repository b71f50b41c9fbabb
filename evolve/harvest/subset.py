"""A dataset of some question categories of a harvested one (``generate_data.py subset``).

A harvest of a structured prompts file (:mod:`evolve.harvest.prompts`) gives every record and tree row a
``category`` and draws its splits within each category, so every split holds every category. The subset of
categories C is the dataset a harvest of C's questions alone would have given with the same splits: every
split's records (and tree rows) of the texts of C, ``texts.jsonl``'s lines of those texts, and ``metadata.json``
with the splits' text ids, the per-split statistics recomputed from the kept records and texts (records,
sequences, acceptance figures, generated tokens, target calls where ``texts.jsonl`` has them, ...) and ``subset`` = {"of": the source
directory, "categories": C}. Every command reads it as any dataset: a search on it is a search for those
categories (Spec-Bench's task groups: one policy per group, docs/tutorial/spec-bench.md). Which prompts a harvest
put in a split (:func:`split_prompts`) and the texts decoded before a split (:func:`request_history`) are read here
too, for live decoding of a split.

What the subset cannot honour is refused, each in one line naming the file: a source that is not a harvested
dataset (no directory, no ``metadata.json``, ``texts.jsonl`` without categories), malformed metadata or texts, texts
whose split differs from the metadata's, files of the source not written together
(:func:`evolve.traces.binding.check_bound`), and a category without a text in some split (its subset would not be
that category's harvest). The subset of an interrupted harvest keeps the source's state (``complete`` false, the
texts done and, when the source's prompts file is still there unchanged, how many texts of C it planned), and says
so; the files the output directory holds from an earlier dataset (tree tables) that the subset does not replace are
removed by :func:`evolve.traces.io.write_dataset`, which says so too (warnings, :class:`evolve.errors.InputWarning`).
"""
from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd

from evolve.errors import InputError, InputWarning, printable
from evolve.harvest.resume import TEXTS_FILE, split_statistics, tree_stats
from evolve.traces.binding import check_bound
from evolve.files.digest import same_digest, sha256_bytes, sha256_file
from evolve.harvest.prompts import read_prompt_file
from evolve.files.parquet import read_parquet_bytes
from evolve.traces.io import METADATA_FILE, SPLITS, Traces, load_metadata, load_split, write_dataset

#: Keys every line of ``texts.jsonl`` of a harvest of a prompts file with categories has.
REQUIRED_KEYS = ("seq_id", "split", "category")
#: Keys holding counts (whole numbers >= 0) where a line has them.
COUNT_KEYS = ("tokens", "target_calls", "prompt_tokens", "blocks", "turn", "line")


def _check_text(t: Any, path: Path, n: int, categories: bool = True) -> None:
    """One line of ``texts.jsonl`` by type and sense (``categories``: its ``category`` required); raises InputError
    naming the file, the line and the key."""
    def bad(key: str, what: str) -> InputError:
        return InputError(f"{path}, line {n}: key '{key}' {what} (value {printable(repr(t.get(key)))[:60]})")

    required = REQUIRED_KEYS if categories else tuple(k for k in REQUIRED_KEYS if k != "category")
    if not isinstance(t, dict) or any(k not in t for k in required):
        raise InputError(f"{path}, line {n}: a text needs {', '.join(repr(k) for k in required)}" +
                         (" (a harvest of a prompts file with categories writes them)" if categories else ""))
    if type(t["seq_id"]) is not int or t["seq_id"] < 0:
        raise bad("seq_id", "must be a whole number >= 0")
    if t["split"] not in SPLITS:
        raise bad("split", f"must be one of {', '.join(SPLITS)}")
    if (categories or "category" in t) and (not isinstance(t["category"], str) or not t["category"].strip()):
        raise bad("category", "must be a non-empty string")
    for key in ("prompt_ids", "completion_ids"):
        if key in t and (not isinstance(t[key], list) or not all(type(x) is int and x >= 0 for x in t[key])):
            raise bad(key, "must be a list of token ids (whole numbers >= 0)")
    for key in COUNT_KEYS:
        if key in t and (type(t[key]) is not int or t[key] < 0):
            raise bad(key, "must be a whole number >= 0")
    if "finish" in t and not isinstance(t["finish"], str):
        raise bad("finish", "must be a string")


def read_texts(data_dir: str | os.PathLike, meta: dict | None = None, categories: bool = True) -> list[dict[str, Any]]:
    """The lines of ``texts.jsonl`` of a harvested dataset (one dict per text, ``seq_id`` order as written),
    checked: every line a JSON object with a whole ``seq_id`` >= 0 (no text twice), a ``split`` of
    train/valid/test and a non-empty ``category`` (``categories`` False: where it has one), counts whole numbers
    >= 0; and the file the one the dataset's
    metadata (``meta``, default: read from ``data_dir``) was written with (:func:`evolve.traces.binding.check_bound`;
    a dataset of an earlier version by its texts per split).

    Raises: InputError naming the file (and the line and key) when it is missing, unreadable, not UTF-8, a line is
    not such a JSON object, or the file is not the dataset's.
    """
    path = Path(data_dir) / TEXTS_FILE
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read the harvest's text list ({type(exc).__name__}); a subset needs a "
                         f"dataset harvested from a prompts file with categories") from None
    try:
        lines = raw.decode("utf-8").split("\n")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    texts, seen = [], {}
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            t = json.loads(line)
        except (ValueError, RecursionError):
            raise InputError(f"{path}, line {n}: not JSON") from None
        _check_text(t, path, n, categories)
        if t["seq_id"] in seen:
            raise InputError(f"{path}, line {n}: text {t['seq_id']} repeats line {seen[t['seq_id']]}")
        seen[t["seq_id"]] = n
        texts.append(t)
    meta = load_metadata(data_dir) if meta is None else meta
    per_split = {f"statistics.{s}.texts": sum(t["split"] == s for t in texts) for s in SPLITS}
    check_bound(path, sha256_bytes(raw), meta, per_split, "text list")
    return texts


def request_history(data_dir: str | os.PathLike, split: str) -> tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]:
    """(prompt ids, response ids) of the texts a harvest with a shared cache (suffix decoding) decoded before the
    split ``split`` of ``data_dir``, in its order (:func:`evolve.harvest.prompts.split_order`, later turns after
    earlier ones): what each live row's cache holds before it decodes that split's texts, as the harvest's did.
    Raises: InputError naming ``texts.jsonl`` when its texts lack the token ids (``prompt_ids``, ``completion_ids``)."""
    before = SPLITS[:SPLITS.index(split)] if split in SPLITS else ()
    texts = [t for t in read_texts(data_dir, categories=False) if t["split"] in before]
    missing = next((t for t in texts if not isinstance(t.get("prompt_ids"), list)
                    or not isinstance(t.get("completion_ids"), list)), None)
    if missing is not None:
        raise InputError(f"{Path(data_dir) / TEXTS_FILE}: text {missing['seq_id']} has no token ids (prompt_ids, "
                         f"completion_ids), which a suffix-decoding harvest records; harvest it again",
                         param="data_dir")
    ordered = sorted(texts, key=lambda t: (SPLITS.index(t["split"]), t.get("turn", 1), t["seq_id"]))
    return tuple((tuple(map(int, t["prompt_ids"])), tuple(map(int, t["completion_ids"]))) for t in ordered)


def split_prompts(prompts_file: str | os.PathLike, data_dir: str | os.PathLike, split: str,
                  categories: Sequence[str] | None = None) -> list[int]:
    """Indices (0-based text indices of ``prompts_file``, :mod:`evolve.harvest.prompts`) of the prompts that the
    harvested dataset ``data_dir`` put in ``split`` (its ``metadata.json`` ``splits``).

    ``categories``: the categories selected (None: all), which must be those the dataset was harvested with (its
    text indices count the questions of those only).
    Raises: InputError (one line) when ``data_dir`` is no harvested dataset, was harvested from another
    prompts file (SHA-256 differs) or other categories, or has no such split.
    """
    read_prompt_file(prompts_file)  # a missing or unreadable file: its one-line error first
    meta = load_metadata(data_dir)
    config = meta.get("config") or {}
    if meta.get("generator") != "harvest" or "prompts_sha256" not in config:
        raise InputError(f"{data_dir}: not a harvested dataset (its metadata.json names no prompts file)",
                         param="data_dir")
    digest = sha256_file(prompts_file)
    if not same_digest(config["prompts_sha256"], digest):
        raise InputError(f"{prompts_file} is not the prompts file {data_dir} was harvested "
                         f"from ({config.get('prompts')}; SHA-256 differs)", param="prompts")
    theirs = config.get("categories")
    if (list(categories) if categories is not None else None) != theirs:
        raise InputError(f"{data_dir} was harvested with "
                         f"{'the categories ' + ','.join(theirs) if theirs else 'every category'}; decode its split "
                         f"with the same selection", param="categories")
    splits = meta.get("splits") or {}
    if split not in splits:
        raise InputError(f"{data_dir} has no split '{split}' (it has: {', '.join(splits)})", param="split")
    return [int(i) for i in splits[split]]


def _source(src: Path) -> dict[str, Any]:
    """The metadata of the source dataset ``src``, checked for what a subset reads. Raises InputError."""
    if not src.exists():
        raise InputError(f"{src}: no such directory (a harvested dataset)", param="data")
    if not src.is_dir():
        raise InputError(f"{src}: not a directory (a harvested dataset)", param="data")
    meta = load_metadata(src)
    where = src / METADATA_FILE
    if not meta:
        raise InputError(f"{src}: no {METADATA_FILE}, not a harvested dataset", param="data")
    splits = meta.get("splits")
    if not isinstance(splits, dict) or any(
            not isinstance(splits.get(s), list) or any(type(i) is not int or i < 0 for i in splits[s]) for s in SPLITS):
        raise InputError(f"{where}: key 'splits' must map train, valid and test to lists of text ids (whole numbers "
                         f">= 0)")
    if not isinstance(meta.get("complete", True), bool):
        raise InputError(f"{where}: key 'complete' must be true or false")
    return meta


def _planned(meta: dict[str, Any], chosen: list[str]) -> int | None:
    """How many texts of the categories ``chosen`` the harvest planned, counted in its prompts file when that is
    still where it was and unchanged (its SHA-256), else None."""
    from evolve.files.digest import same_digest, sha256_file
    from evolve.harvest.prompts import read_prompt_file

    config = meta.get("config") or {}
    path, digest = config.get("prompts_path"), config.get("prompts_sha256")
    try:
        if not isinstance(path, str) or not same_digest(digest, sha256_file(path)):
            return None
        prompts = read_prompt_file(path).select(config.get("categories"))
    except (OSError, InputError):
        return None
    return sum(t.category in chosen for t in prompts.texts)


def _trees(src: Path, split: str, meta: dict[str, Any], seq_ids: np.ndarray) -> pd.DataFrame | None:
    """The source's tree rows of ``split`` of the texts ``seq_ids`` (None without a tree table), the table checked
    against the source's records (:func:`evolve.traces.binding.check_bound`)."""
    from evolve.traces.tree_tables import tree_path

    path = tree_path(src, split)
    if not path.is_file():
        return None
    raw = path.read_bytes()
    try:
        trees = read_parquet_bytes(raw)
        keep = np.isin(trees["seq_id"].to_numpy(), seq_ids)
    except Exception as exc:  # noqa: BLE001 - a damaged table, of any error type
        raise InputError(f"{path}: cannot read the tree table ({type(exc).__name__})") from None
    check_bound(path, sha256_bytes(raw), meta, {f"statistics.{split}.trees.nodes": len(trees)}, "tree table")
    return trees[keep].reset_index(drop=True)


def _check_texts(texts: list[dict], meta: dict[str, Any], src: Path) -> None:
    """Every text is in the split the metadata puts it in."""
    split_of = {i: s for s in SPLITS for i in meta["splits"][s]}
    for t in texts:
        if split_of.get(t["seq_id"]) != t["split"]:
            raise InputError(f"{src / TEXTS_FILE}: text {t['seq_id']} is in split '{t['split']}', but "
                             f"{src / METADATA_FILE} key 'splits' puts it in "
                             f"{repr(split_of[t['seq_id']]) if t['seq_id'] in split_of else 'none'}")


def check_texts_match(texts: list[dict[str, Any]], traces: Traces, path: Path) -> None:
    """The lines of ``texts.jsonl`` (``path``; :func:`read_texts`) agree with the records of one split (``traces``):
    every text with records there is listed in that split, with the category its records carry (when they carry
    one). Raises: InputError naming both files, the text and the two values of the first disagreement."""
    if not traces.has("seq_id"):
        return
    listed = {t["seq_id"]: t for t in texts}
    seq = traces["seq_id"]
    ids, first = np.unique(seq, return_index=True)
    for sid, row in zip(ids.tolist(), first.tolist()):
        t = listed.get(sid)
        if t is None:
            raise InputError(f"{path}: lists no text {sid}, but {traces.source} holds its records (from row {row}); "
                             f"the text list and the records disagree")
        if t["split"] != traces.split:
            raise InputError(f"{path}: puts text {sid} in split '{t['split']}', but its records are in "
                             f"{traces.source} (split '{traces.split}', from row {row})")
        if traces.has("category") and t["category"] != traces["category"][row]:
            raise InputError(f"{path}: gives text {sid} the category '{printable(t['category'])}', its records in "
                             f"{traces.source} carry '{printable(str(traces['category'][row]))}' (row {row})")


def subset_dataset(data_dir: str | os.PathLike, categories: Iterable[str], out_dir: str | os.PathLike
                   ) -> dict[str, dict]:
    """Write the subset of ``categories`` of the harvested dataset ``data_dir`` into ``out_dir`` (module doc);
    return its per-split statistics.

    Raises: InputError for a missing directory or one that is no harvested dataset with categories, malformed
    metadata or texts, files of the source not written together, a category it does not have (naming the ones it
    has) or that has no text in some split, a split left without records, ``out_dir`` equal to ``data_dir``, or
    the loader's errors.
    """
    src, out = Path(data_dir), Path(out_dir)
    meta = _source(src)
    if src.resolve() == out.resolve():
        raise InputError(f"{out}: is the source dataset; write the subset into another directory", param="out")
    chosen = sorted(set(categories))
    texts = read_texts(src, meta)
    _check_texts(texts, meta, src)
    have = sorted({t["category"] for t in texts})
    missing = [c for c in chosen if c not in have]
    if missing:
        raise InputError(f"{src}: has no category '{printable(missing[0])}' (it has {', '.join(have)})",
                         param="categories")
    for c in chosen:
        empty = [s for s in SPLITS if not any(t["category"] == c and t["split"] == s for t in texts)]
        if empty:
            raise InputError(f"{src}: category '{printable(c)}' has no text in the {empty[0]} split (an interrupted "
                             f"harvest?); its subset would not be the harvest of that category", param="categories")
    kept = [t for t in texts if t["category"] in chosen]
    seq_ids = np.asarray(sorted(t["seq_id"] for t in kept), dtype=np.int64)
    tables: dict[str, Any] = {}
    stats: dict[str, dict] = {}
    for s in SPLITS:
        traces = load_split(src, s)
        if not traces.has("category"):
            raise InputError(f"{traces.source}: has no 'category' column; a subset needs a dataset harvested from a "
                             f"prompts file with categories")
        check_texts_match(texts, traces, src / TEXTS_FILE)
        mask = np.isin(traces["category"], chosen)
        if not mask.any():
            raise InputError(f"{traces.source}: no record of {', '.join(chosen)}; the subset's {s} split would be "
                             f"empty", param="categories")
        part = Traces({k: v[mask] for k, v in traces.columns.items()}, traces.source, s)
        tables[s] = part
        stats[s] = split_statistics(part.columns, [t for t in kept if t["split"] == s])
        trees = _trees(src, s, meta, seq_ids)
        if trees is not None:
            tables[f"{s}.trees"] = trees
            stats[s]["trees"] = tree_stats(trees)
    keep = set(seq_ids.tolist())
    complete = meta.get("complete", True)
    metadata = {k: v for k, v in meta.items() if k not in ("schema_version", "format")}
    metadata.update(splits={s: [i for i in meta["splits"][s] if i in keep] for s in SPLITS}, statistics=stats,
                    texts_done=len(kept), texts_total=len(kept) if complete else _planned(meta, chosen),
                    complete=complete, subset={"of": str(src.resolve()), "categories": chosen})
    if not complete:
        total = metadata["texts_total"]
        warnings.warn(f"{src}: an interrupted harvest; the subset holds the {len(kept)} texts of "
                      f"{', '.join(chosen)} done{f' of {total} planned' if total is not None else ''} and stays "
                      f"incomplete (complete: false in its metadata)", InputWarning, stacklevel=2)
    out.mkdir(parents=True, exist_ok=True)
    texts_text = "".join(json.dumps(t) + "\n" for t in kept)
    write_dataset(out, tables, metadata, meta.get("format", "parquet"), extras={TEXTS_FILE: texts_text.encode()})
    return stats


__all__ = ["check_texts_match", "read_texts", "request_history", "split_prompts", "subset_dataset"]
