"""A harvest's files: part files of finished texts, the manifest that resumes it, the final dataset.

Finished texts are written at once (atomically: temporary file + rename; a part's
existence marks its texts done) into ``OUT/.harvest/parts/``:

* the one-process harvest writes one part per text, ``text-NNNNNN.parquet``
  (:func:`part_path`, :func:`write_part`); a tree harvest (``--tree-nodes``,
  :mod:`evolve.harvest.tree_harvest`) first writes the text's tree table beside it,
  ``text-NNNNNN.trees.parquet`` (:func:`tree_part_path`, :func:`write_tree_part`), so the
  records part still marks the text done and a text redone on resume overwrites both;
* the sharded harvest (:mod:`evolve.harvest.shards`) writes one part per shard,
  ``shard-KKKKK-of-SSSSS.parquet`` (:func:`shard_part_path`,
  :func:`write_shard_part`): the records of all its texts and each text's info.

``OUT/.harvest/manifest.json`` holds the settings the harvest must be resumed with
(:func:`fingerprint`). Both kinds of part may be present together (a harvest
resumed in the other mode, or with another shard count): :func:`finished_texts`
maps every finished text to the one part holding it, and refuses two parts
holding the same text. On completion or Ctrl-C the parts are consolidated
(:func:`consolidate`) into ``train/valid/test.parquet``, ``texts.jsonl`` (prompt
and completion of every text) and ``metadata.json`` with
:func:`evolve.traces.io.write_dataset`; the result does not depend on which form of part
holds a text. A tree harvest adds ``train/valid/test.trees.parquet``, its texts' tree tables in
the same order. Running the same command again resumes: finished texts are kept,
the interrupted ones are redone from their own seeds, and different settings are
refused (:func:`check_out_dir`).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from itertools import accumulate
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from evolve.errors import InputError
from evolve.harvest.config import HarvestConfig
from evolve.engine.models import _short
from evolve.harvest.prompts import HELD_OUT_FRACTION
from evolve.traces.binding import FILES_KEY, check_bound
from evolve.files.digest import sha256_bytes
from evolve.files.parquet import parquet_bytes, read_parquet_bytes
from evolve.traces.io import METADATA_FILE, SPLITS, Traces, load_metadata, write_dataset
from evolve.files.atomic import atomic_write_bytes
from evolve.files.guard import register_dataset_files
from evolve.traces.schema import COLUMNS, TEXT_COLUMNS, split_stats

GENERATOR = "harvest"
#: 2: records carry ``block_residual_mass`` and ``target_rank`` (a run of version 1 cannot be resumed).
GENERATOR_VERSION = 2
WORK_DIR = ".harvest"
MANIFEST_FILE = "manifest.json"
TEXTS_FILE = "texts.jsonl"
register_dataset_files([TEXTS_FILE])
COLUMN_ORDER = [c.name for c in COLUMNS]
#: Keys of ``texts.jsonl`` that only the texts of a structured prompts file have (:mod:`evolve.harvest.prompts`):
#: the question's category and id, the turn, (a later turn) the decoded context it was prompted with, and the
#: text's target calls (so per-category figures count the calls without a draft, :mod:`evolve.commands.compare`).
TEXT_KEYS: tuple[str, ...] = ("category", "question_id", "turn", "context", "target_calls")
#: Keys of ``texts.jsonl`` of a harvest whose drafter shares a cache across texts (suffix decoding): the token ids of
#: the prompt and of the response, from which the cache is filled again in order (:mod:`evolve.engine.suffix`).
REQUEST_KEYS: tuple[str, ...] = ("prompt_ids", "completion_ids")
PARTS_DIR = "parts"
_TEXT_PART = re.compile(r"text-(\d{6,})\.parquet")
_SHARD_PART = re.compile(r"shard-(\d{5,})-of-(\d{5,})\.parquet")


#: Keys of a :func:`fingerprint` that the options alone give (no model loaded): checked before the models load
#: (:func:`settings_fingerprint`).
SETTINGS_KEYS: tuple[str, ...] = ("generator_version", "gamma", "max_new_tokens", "temperature", "seed", "dtype",
                                  "prompts_sha256", "top_k", "top_p", "backend", "tree_nodes", "tree_width",
                                  "categories")


def fingerprint(config: HarvestConfig, description: dict[str, Any], prompts_sha: str) -> dict[str, Any]:
    """The settings a harvest must be resumed with: every option and file hash that changes its records.

    ``description`` is the models' description of :func:`evolve.harvest.loop.build`. The batch size
    is not part of it: a harvest may be resumed with another ``--batch-size`` (the records of a text
    do not depend on its batch but for float round-off, see :mod:`evolve.harvest.loop`).
    """
    d = description
    return {
        "target_sha256": d["target"]["sha256"],
        "drafter": {k: v for k, v in d["drafter"].items() if k not in ("path",)},
        "chat_template": d["chat_template"], **settings_fingerprint(config, prompts_sha)}


def settings_fingerprint(config: HarvestConfig, prompts_sha: str) -> dict[str, Any]:
    """The part of :func:`fingerprint` the options and the prompts file give (:data:`SETTINGS_KEYS`): compared with
    a harvest's manifest before any model is loaded, so a changed setting is refused at once."""
    return {
        "generator_version": GENERATOR_VERSION,
        "gamma": config.gamma, "max_new_tokens": config.max_new_tokens,
        "temperature": config.temperature, "seed": config.seed, "dtype": config.dtype,
        "prompts_sha256": prompts_sha,
        # top-k/top-p enter only when used, so the harvests made before these options resume as before
        **({"top_k": config.top_k} if config.top_k else {}),
        **({"top_p": config.top_p} if config.top_p < 1.0 else {}),
        **({"backend": config.backend} if config.backend != "torch" else {}),
        **({"tree_nodes": config.tree_nodes, "tree_width": config.tree_width} if config.tree_nodes is not None
           else {}),
        **({"categories": list(config.categories)} if config.categories is not None else {}),
    }


def _diff(a: dict, b: dict, prefix: str = "") -> str:
    for key in sorted(set(a) | set(b)):
        va, vb = a.get(key), b.get(key)
        if isinstance(va, dict) and isinstance(vb, dict):
            sub = _diff(va, vb, f"{prefix}{key}.")
            if sub:
                return sub
        elif va != vb:
            return f"{prefix}{key}: {_brief(va)} then, {_brief(vb)} now"
    return ""


def _brief(v) -> str:
    text = json.dumps(v, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def part_path(work: Path, index: int) -> Path:
    """The part file of text ``index`` (one-process harvest): ``WORK/parts/text-NNNNNN.parquet``."""
    return work / PARTS_DIR / f"text-{index:06d}.parquet"


def tree_part_path(work: Path, index: int) -> Path:
    """The tree table of text ``index`` (one-process tree harvest): ``WORK/parts/text-NNNNNN.trees.parquet``
    (not a part of its own: :func:`finished_texts` goes by the records part)."""
    return work / PARTS_DIR / f"text-{index:06d}.trees.parquet"


def shard_part_path(work: Path, shard: int, shards: int) -> Path:
    """The part file of shard ``shard`` (0-based) of ``shards`` (sharded harvest):
    ``WORK/parts/shard-KKKKK-of-SSSSS.parquet``. ``shards`` is the number of non-empty shards
    (``--shards``, or the number of texts if that is smaller). Given the prompts and the seed (both
    in the :func:`fingerprint`), ``shard`` and ``shards`` fix the shard's texts
    (:func:`evolve.harvest.shards.shard_texts`), so a resume with the same ``--shards`` finds the
    shards already done by name."""
    return work / PARTS_DIR / f"shard-{shard:05d}-of-{shards:05d}.parquet"


def _write_table(path: Path, df: pd.DataFrame, key: bytes, value: Any) -> None:
    import pyarrow as pa

    table = pa.Table.from_pandas(df, preserve_index=False)
    meta = dict(table.schema.metadata or {})
    meta[key] = json.dumps(value).encode("utf-8")
    atomic_write_bytes(path, parquet_bytes(table=table.replace_schema_metadata(meta)))


def write_part(path: Path, df: pd.DataFrame, info: dict[str, Any]) -> None:
    """Write a text's records ``df`` atomically as parquet, with ``info`` (JSON) in the schema metadata."""
    _write_table(path, df, b"harvest", info)


def write_tree_part(path: Path, df: pd.DataFrame) -> str:
    """Write a text's tree table ``df`` (:data:`evolve.traces.tree_tables.TREE_COLUMNS`) atomically as parquet; returns
    its SHA-256, which the text's records part records (``trees_sha256``, :func:`read_tree_part`)."""
    raw = parquet_bytes(df)
    atomic_write_bytes(path, raw)
    return sha256_bytes(raw)


def read_tree_part(path: Path, info: dict[str, Any] | None = None) -> pd.DataFrame:
    """A text's tree table written by :func:`write_tree_part`: the columns of
    :data:`evolve.traces.tree_tables.TREE_COLUMNS`, and of ``RELAX_COLUMNS``, ``SUFFIX_TREE_COLUMNS`` and the text columns
    (:data:`evolve.traces.schema.TEXT_COLUMNS`) when it has them. ``info``: the text's entry in its records part,
    whose ``trees_sha256`` (parts of earlier versions have none) the table's bytes must have
    (:func:`evolve.traces.binding.check_bound`). Raises: InputError when it is missing or damaged, or not the table
    written with the text's records."""
    from evolve.traces.tree_tables import RELAX_COLUMN_NAMES, SUFFIX_TREE_COLUMN_NAMES, TREE_COLUMN_NAMES

    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: missing or damaged tree table ({_short(exc)}); delete the text's part "
                         f"{path.name.replace('.trees', '')} to redo it") from None
    if info is not None and "trees_sha256" in info:
        check_bound(path, sha256_bytes(raw), {FILES_KEY: {path.name: {"sha256": info["trees_sha256"]}}},
                    what="tree table", recorded_in=f"the part file of text {info.get('seq_id')}")
    try:
        df = read_parquet_bytes(raw)
        missing = [c for c in TREE_COLUMN_NAMES if c not in df.columns]
        if missing:
            raise ValueError(f"no column {missing[0]}")
    except Exception as exc:
        raise InputError(f"{path}: missing or damaged tree table ({_short(exc)}); delete the text's part "
                         f"{path.name.replace('.trees', '')} to redo it") from None
    optional = []
    for names in (RELAX_COLUMN_NAMES, SUFFIX_TREE_COLUMN_NAMES):
        present = [c for c in names if c in df.columns]
        optional += present if len(present) == len(names) else []
    text = [c for c in TEXT_COLUMNS if c in df.columns]
    return df[list(TREE_COLUMN_NAMES) + optional + text]


def write_shard_part(path: Path, texts: Sequence[tuple[pd.DataFrame, dict[str, Any]]]) -> None:
    """Write the finished texts of one shard atomically as one parquet file.

    ``texts``: per text, its records (a schema DataFrame, one row per drafted token; a text may
    have none) and its info (the dict :func:`write_part` stores, with ``seq_id``). The records are
    stored one text after the other; the schema metadata ``harvest_texts`` holds the infos and
    each text's row count, so :func:`read_parts` gives the same (records, info) pairs back.
    Raises: ValueError for an empty ``texts``.
    """
    if not texts:
        raise ValueError("write_shard_part: no texts")
    frames = [df for df, _ in texts]
    nonempty = [df for df in frames if len(df)]
    df = pd.concat(nonempty, ignore_index=True) if nonempty else frames[0]
    _write_table(path, df, b"harvest_texts", {"texts": [info for _, info in texts],
                                              "rows": [len(f) for f in frames]})


def _damaged(path: Path, exc: Exception) -> InputError:
    return InputError(f"{path}: damaged harvest part file ({_short(exc)}); delete it to redo its texts")


def read_parts(path: Path) -> list[tuple[pd.DataFrame, dict[str, Any]]]:
    """The (records, info) of every text in a part file of either form (:func:`write_part`,
    :func:`write_shard_part`), in the file's order. Raises: InputError for a damaged file."""
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
        meta = table.schema.metadata or {}
        if b"harvest_texts" in meta:
            content = json.loads(meta[b"harvest_texts"])
            infos, rows = list(content["texts"]), [int(n) for n in content["rows"]]
            if len(infos) != len(rows) or sum(rows) != table.num_rows:
                raise ValueError(f"{sum(rows)} rows listed, {table.num_rows} stored")
        else:
            infos, rows = [json.loads(meta[b"harvest"])], [table.num_rows]
    except Exception as exc:
        raise _damaged(path, exc) from None
    df = table.to_pandas()
    if len(infos) == 1:
        return [(df, infos[0])]
    ends = list(accumulate(rows))
    return [(df.iloc[end - n:end].reset_index(drop=True), info) for n, end, info in zip(rows, ends, infos)]


def part_texts(path: Path) -> list[int]:
    """The texts a part file holds: from the name of a one-text part, from the schema metadata
    (the file's footer only) of a shard part. Raises: InputError for a damaged shard part."""
    m = _TEXT_PART.fullmatch(path.name)
    if m:
        return [int(m.group(1))]
    import pyarrow.parquet as pq

    try:
        return [int(i["seq_id"]) for i in json.loads(pq.read_schema(path).metadata[b"harvest_texts"])["texts"]]
    except Exception as exc:
        raise _damaged(path, exc) from None


def finished_texts(work: Path) -> dict[int, Path]:
    """Every finished text of the harvest in ``work`` -> the part file holding it (parts of both kinds).

    Temporary files of unfinished writes (``.NAME.tmp-...``) and other names are ignored.
    Raises: InputError when two part files hold the same text (a text must never be counted
    twice), or for a damaged shard part.
    """
    directory = work / PARTS_DIR
    if not directory.is_dir():
        return {}
    done: dict[int, Path] = {}
    for path in sorted(directory.iterdir()):
        if not (_TEXT_PART.fullmatch(path.name) or _SHARD_PART.fullmatch(path.name)):
            continue
        for t in part_texts(path):
            if t in done:
                raise InputError(f"{directory}: text {t} is in two part files ({done[t].name} and {path.name}); "
                                 f"delete one of them and run the same command again")
            done[t] = path
    return done


def check_out_dir(out: Path, work: Path, settings: dict[str, Any] | None, keys: tuple[str, ...] | None = None
                  ) -> None:
    """Refuse an output directory holding another generator's dataset, or (with ``settings``, a :func:`fingerprint`,
    or with ``keys`` the part of one of those keys, :func:`settings_fingerprint`) a harvest made with other
    settings."""
    manifest = work / MANIFEST_FILE
    if manifest.exists():
        if settings is None:
            return
        try:
            old = json.loads(manifest.read_text())["fingerprint"]
            if keys is not None:
                old = {k: v for k, v in old.items() if k in keys}
        except (ValueError, KeyError, TypeError, AttributeError):
            raise InputError(f"{manifest}: damaged harvest manifest; remove {work} to start over") from None
        diff = _diff(old, settings)
        if diff:
            raise InputError(f"{out} holds a harvest made with other settings ({diff}); "
                             f"choose another directory or remove {work} to start over", param="out")
        return
    if (out / METADATA_FILE).exists():
        meta = load_metadata(out)
        if meta.get("generator") != GENERATOR:
            raise InputError(f"{out} holds a dataset made by generator "
                             f"{meta.get('generator')!r}; choose another directory for the harvest", param="out")


@dataclass(frozen=True)
class LastRun:
    """What one harvest process did, for ``metadata.json``'s ``last_run``: wall ``seconds``, ``tokens``
    generated, and ``forward_seconds`` (time inside model forward passes)."""

    seconds: float = 0.0
    tokens: int = 0
    forward_seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """``{"seconds", "generated_tokens", "tokens_per_second", "forward_seconds"}`` (seconds rounded to ms)."""
        return {"seconds": round(self.seconds, 3), "generated_tokens": self.tokens,
                "tokens_per_second": self.tokens / self.seconds if self.seconds > 0 else 0.0,
                "forward_seconds": round(self.forward_seconds, 3)}


def consolidate(out: Path, config: HarvestConfig, description: dict[str, Any], splits: dict[str, list[int]],
                prompts_sha: str, last_run: LastRun = LastRun(),
                split_rule: str | None = None) -> tuple[bool, dict[str, dict], int]:
    """Gather the finished texts' part files (of both kinds, see :func:`finished_texts`) into
    train/valid/test, texts.jsonl and metadata.json. Each split lists its texts in the order of
    ``splits[name]``, whichever part holds them, so the files equal those of a one-process harvest.

    ``last_run`` (:class:`LastRun`) describes this run and goes into ``metadata.json`` under ``last_run``. A tree harvest (``config.tree_nodes``)
    also writes ``{split}.trees.parquet`` (the texts' tree tables in the same order), its settings under
    ``tree`` and per split ``statistics.{split}.trees`` (:func:`tree_stats`). ``split_rule``: the split rule in
    words (:func:`evolve.harvest.prompts.split_rule`; None: that of a plain prompts file).

    Returns (written, {split: stats}, texts done). Nothing is written unless every split has a
    finished text. Raises: InputError for a damaged part file, a text in two part files, or a finished
    text of a tree harvest whose tree table is missing or damaged.
    """
    work = out / WORK_DIR
    parts = finished_texts(work)
    by_text: dict[int, tuple[pd.DataFrame, dict[str, Any]]] = {}
    for path in sorted(set(parts.values())):
        for df, info in read_parts(path):
            by_text[info["seq_id"]] = (df, info)
    frames: dict[str, list[pd.DataFrame]] = {s: [] for s in SPLITS}
    tree_frames: dict[str, list[pd.DataFrame]] = {s: [] for s in SPLITS}
    infos: list[dict[str, Any]] = []
    for name in SPLITS:
        for t in splits[name]:
            if t in by_text:
                df, info = by_text[t]
                frames[name].append(df)
                infos.append(info)
                if config.tree_nodes is not None:
                    tree_frames[name].append(read_tree_part(tree_part_path(work, t), info))
    n_done = len(infos)
    total = sum(len(v) for v in splits.values())
    if any(not frames[s] for s in SPLITS):
        return False, {}, n_done
    # an optional column written only by newer code (``block_residual_phi``) is kept only if every part has it
    order = [c for c in COLUMN_ORDER if all(c in f.columns for s in SPLITS for f in frames[s])]
    tables = {s: pd.concat(frames[s], ignore_index=True)[order] for s in SPLITS}
    stats: dict[str, dict] = {}
    for s in SPLITS:
        traces = Traces.from_frame(tables[s], source=f"harvest {s} split", split=s)
        stats[s] = split_statistics(traces.columns, [i for i in infos if i["split"] == s])
    trees: dict[str, pd.DataFrame] = {}
    tree_meta: dict[str, Any] = {}
    if config.tree_nodes is not None:
        from evolve.engine.drafters import chosen_drafters
        from evolve.engine.suffix_tree import suffix_tree_settings
        from evolve.engine.tree_draft import tree_settings

        deterministic = any(d.deterministic_trees for d in chosen_drafters(config))
        tree_meta["tree"] = (suffix_tree_settings if deterministic else tree_settings)(config.tree_nodes,
                                                                                       config.tree_width)
        for s in SPLITS:
            trees[f"{s}.trees"] = pd.concat(tree_frames[s], ignore_index=True)
            stats[s]["trees"] = tree_stats(trees[f"{s}.trees"])
    is_complete = n_done == total
    metadata = {
        "generator": GENERATOR,
        "generator_version": GENERATOR_VERSION,
        "description": "genuine speculative-decoding blocks of a local target model and drafter (standard rule)",
        "seed": config.seed,
        "config": {**config.to_dict(), "prompts_sha256": prompts_sha,
                   "prompts_path": str(Path(config.prompts).resolve()), **description,
                   "split_rule": split_rule or (f"rng = numpy.random.default_rng(seed); perm = rng.permutation(n); "
                                                f"h = max(1, round({HELD_OUT_FRACTION} n)); valid = perm[:h], "
                                                f"test = perm[h:2h], train = perm[2h:]"),
                   "text_rng": "numpy.random.default_rng([seed, seq_id])"},
        "splits": {s: splits[s] for s in SPLITS},
        "complete": is_complete,
        "texts_done": n_done,
        "texts_total": total,
        "versions": _versions(),
        "last_run": last_run.to_dict(),
        "statistics": stats,
        **tree_meta,
    }
    texts = "".join(json.dumps({k: i[k] for k in ("seq_id", "split", "line", "prompt", "completion", "tokens",
                                                  "prompt_tokens", "finish", *(TEXT_KEYS if "turn" in i else ()),
                                                  *(REQUEST_KEYS if "prompt_ids" in i else ())) if k in i})
                    + "\n"
                    for i in sorted(infos, key=lambda i: i["seq_id"]))
    write_dataset(out, {**tables, **trees}, metadata, extras={TEXTS_FILE: texts.encode("utf-8")})
    return True, stats, n_done


def split_statistics(columns: dict[str, Any], texts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """A split's statistics in metadata.json: :func:`evolve.traces.schema.split_stats` of its record ``columns``,
    then from its ``texts`` (their ``texts.jsonl`` entries: ``tokens``, ``finish``, ``target_calls``) the texts,
    generated tokens, target calls and tokens per target call (left out when a text lacks ``target_calls``, as an
    older harvest's do) and the texts ended by end-of-sequence."""
    gen = sum(int(t["tokens"]) for t in texts)
    out = dict(split_stats(columns), texts=len(texts), generated_tokens=gen)
    if all("target_calls" in t for t in texts):
        calls = sum(int(t["target_calls"]) for t in texts)
        out.update(target_calls=calls, tokens_per_target_call=gen / calls if calls else 0.0)
    out["eos_finished"] = sum(t.get("finish") == "eos" for t in texts)
    return out


def tree_stats(df: pd.DataFrame) -> dict[str, float | int]:
    """Per-split figures of a tree table: trees, nodes, mean nodes per tree, mean depth of the deepest node,
    and the mean exact expected tokens per call of SpecInfer and traversal verification."""
    per_tree = df.groupby(["seq_id", "tree"], sort=False).agg(
        nodes=("node", "size"), depth=("depth", "max"), specinfer=("specinfer_tokens", "first"),
        traversal=("traversal_tokens", "first")) if len(df) else None
    if per_tree is None or not len(per_tree):
        return {"trees": 0, "nodes": 0, "mean_nodes": 0.0, "mean_max_depth": 0.0, "mean_specinfer_tokens": 0.0,
                "mean_traversal_tokens": 0.0}
    return {"trees": int(len(per_tree)), "nodes": int(len(df)), "mean_nodes": float(per_tree["nodes"].mean()),
            "mean_max_depth": float(per_tree["depth"].mean()),
            "mean_specinfer_tokens": float(per_tree["specinfer"].mean()),
            "mean_traversal_tokens": float(per_tree["traversal"].mean())}


def _versions() -> dict[str, str]:
    import sys

    vers = {"python": sys.version.split()[0]}
    for mod in ("torch", "transformers", "gguf"):
        try:
            vers[mod] = __import__(mod).__version__
        except Exception:  # optional packages
            pass
    return vers
