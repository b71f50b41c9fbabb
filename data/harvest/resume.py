"""A harvest's files: one part file per finished text, the manifest that resumes it, the final dataset.

Each finished text is written at once to ``OUT/.harvest/parts/text-NNNNNN.parquet``
(atomically; its existence marks the text done) and ``OUT/.harvest/manifest.json``
holds the settings it must be resumed with (:func:`fingerprint`). On completion or
Ctrl-C the parts are consolidated (:func:`consolidate`) into
``train/valid/test.parquet``, ``texts.jsonl`` (prompt and completion of every
text) and ``metadata.json`` with :func:`data.io.write_dataset`. Running the same
command again resumes: finished texts are kept, the interrupted one is redone
from its own seed, and different settings are refused (:func:`check_out_dir`).
"""
from __future__ import annotations

import io
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pandas as pd

from data.errors import InputError
from data.harvest.config import HarvestConfig
from data.harvest.models import _short
from data.harvest.prompts import HELD_OUT_FRACTION
from data.io import METADATA_FILE, SPLITS, Traces, atomic_write_bytes, atomic_write_text, load_metadata, write_dataset
from data.schema import COLUMNS, split_stats

GENERATOR = "harvest"
#: 2: records carry ``block_residual_mass`` and ``target_rank`` (a run of version 1 cannot be resumed).
GENERATOR_VERSION = 2
WORK_DIR = ".harvest"
MANIFEST_FILE = "manifest.json"
TEXTS_FILE = "texts.jsonl"
COLUMN_ORDER = [c.name for c in COLUMNS]


def fingerprint(config: HarvestConfig, description: dict[str, Any], prompts_sha: str) -> dict[str, Any]:
    """The settings a harvest must be resumed with: every option and file hash that changes its records.

    ``description`` is the models' description of :func:`data.harvest.engine.build`. The batch size
    is not part of it: a harvest may be resumed with another ``--batch-size`` (the records of a text
    do not depend on its batch but for float round-off, see :mod:`data.harvest.engine`).
    """
    d = description
    return {
        "generator_version": GENERATOR_VERSION,
        "target_sha256": d["target"]["sha256"],
        "drafter": {k: v for k, v in d["drafter"].items() if k not in ("path",)},
        "gamma": config.gamma, "max_new_tokens": config.max_new_tokens,
        "temperature": config.temperature, "seed": config.seed, "dtype": config.dtype,
        "prompts_sha256": prompts_sha, "chat_template": d["chat_template"],
        # top-k/top-p enter only when used, so the harvests made before these options resume as before
        **({"top_k": config.top_k} if config.top_k else {}),
        **({"top_p": config.top_p} if config.top_p < 1.0 else {}),
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
    """The part file of text ``index``: ``WORK/parts/text-NNNNNN.parquet``."""
    return work / "parts" / f"text-{index:06d}.parquet"


def write_part(path: Path, df: pd.DataFrame, info: dict[str, Any]) -> None:
    """Write a text's records ``df`` atomically as parquet, with ``info`` (JSON) in the schema metadata."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(df, preserve_index=False)
    meta = dict(table.schema.metadata or {})
    meta[b"harvest"] = json.dumps(info).encode("utf-8")
    buf = io.BytesIO()
    pq.write_table(table.replace_schema_metadata(meta), buf)
    atomic_write_bytes(path, buf.getvalue())


def read_part(path: Path) -> tuple[pd.DataFrame, dict[str, Any]]:
    """A part file's (records, info). Raises: InputError for a damaged file."""
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
        info = json.loads((table.schema.metadata or {})[b"harvest"])
    except Exception as exc:
        raise InputError(f"{path}: damaged harvest part file ({_short(exc)}); delete it to redo that text") from None
    return table.to_pandas(), info


def check_out_dir(out: Path, work: Path, settings: dict[str, Any] | None) -> None:
    """Refuse an output directory holding another generator's dataset, or (with ``settings``, a :func:`fingerprint`)
    a harvest made with other settings."""
    manifest = work / MANIFEST_FILE
    if manifest.exists():
        if settings is None:
            return
        try:
            old = json.loads(manifest.read_text())["fingerprint"]
        except (ValueError, KeyError, TypeError):
            raise InputError(f"{manifest}: damaged harvest manifest; remove {work} to start over") from None
        diff = _diff(old, settings)
        if diff:
            raise InputError(f"option '--out': {out} holds a harvest made with other settings ({diff}); "
                             f"use another --out or remove {work} to start over")
        return
    if (out / METADATA_FILE).exists():
        meta = load_metadata(out)
        if meta.get("generator") != GENERATOR:
            raise InputError(f"option '--out': {out} holds a dataset made by generator "
                             f"{meta.get('generator')!r}; choose another directory for the harvest")


def consolidate(out: Path, config: HarvestConfig, description: dict[str, Any], splits: dict[str, list[int]],
                prompts_sha: str, run_seconds: float = 0.0, run_tokens: int = 0,
                run_forward_seconds: float = 0.0) -> tuple[bool, dict[str, dict], int]:
    """Gather the finished texts' part files into train/valid/test, texts.jsonl and metadata.json.

    ``run_seconds``, ``run_tokens`` and ``run_forward_seconds`` (time inside model forward passes)
    describe this run and go into ``metadata.json`` under ``last_run``.

    Returns (written, {split: stats}, texts done). Nothing is written unless every split has a
    finished text. Raises: InputError for a damaged part file.
    """
    work = out / WORK_DIR
    frames: dict[str, list[pd.DataFrame]] = {s: [] for s in SPLITS}
    infos: list[dict[str, Any]] = []
    for name in SPLITS:
        for t in splits[name]:
            path = part_path(work, t)
            if path.exists():
                df, info = read_part(path)
                frames[name].append(df)
                infos.append(info)
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
        mine = [i for i in infos if i["split"] == s]
        gen = sum(i["tokens"] for i in mine)
        calls = sum(i["target_calls"] for i in mine)
        stats[s] = dict(split_stats(traces.columns), texts=len(mine), generated_tokens=gen,
                        tokens_per_target_call=gen / calls if calls else 0.0,
                        eos_finished=sum(i["finish"] == "eos" for i in mine))
    is_complete = n_done == total
    metadata = {
        "generator": GENERATOR,
        "generator_version": GENERATOR_VERSION,
        "description": "genuine speculative-decoding blocks of a local target model and drafter (standard rule)",
        "seed": config.seed,
        "config": {**{k: v for k, v in asdict(config).items()}, "prompts_sha256": prompts_sha,
                   "prompts_path": str(Path(config.prompts).resolve()), **description,
                   "split_rule": (f"rng = numpy.random.default_rng(seed); perm = rng.permutation(n); "
                                  f"h = max(1, round({HELD_OUT_FRACTION} n)); valid = perm[:h], "
                                  f"test = perm[h:2h], train = perm[2h:]"),
                   "text_rng": "numpy.random.default_rng([seed, seq_id])"},
        "splits": {s: splits[s] for s in SPLITS},
        "complete": is_complete,
        "texts_done": n_done,
        "texts_total": total,
        "versions": _versions(),
        "last_run": {"seconds": round(run_seconds, 3), "generated_tokens": run_tokens,
                     "tokens_per_second": run_tokens / run_seconds if run_seconds > 0 else 0.0,
                     "forward_seconds": round(run_forward_seconds, 3)},
        "statistics": stats,
    }
    texts = "".join(json.dumps({k: i[k] for k in ("seq_id", "split", "line", "prompt", "completion", "tokens",
                                                  "finish")}) + "\n"
                    for i in sorted(infos, key=lambda i: i["seq_id"]))
    atomic_write_text(out / TEXTS_FILE, texts)
    write_dataset(out, tables, metadata)
    return True, stats, n_done


def _versions() -> dict[str, str]:
    import sys

    vers = {"python": sys.version.split()[0]}
    for mod in ("torch", "transformers", "gguf"):
        try:
            vers[mod] = __import__(mod).__version__
        except Exception:  # optional packages
            pass
    return vers
