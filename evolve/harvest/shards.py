"""Sharded harvesting on Dask: the prompts split into shards, each harvested as one Dask task.

``python generate_data.py harvest ... --scheduler ADDRESS|local --shards S`` runs
:func:`harvest_sharded` instead of :func:`evolve.harvest.loop.harvest`:

1. the processing order of all texts (:func:`evolve.harvest.prompts.processing_order`)
   is cut into ``S`` contiguous shards (:func:`shard_texts`), the same cut whatever
   is left to do;
2. every shard with a text not yet in any part file is one Dask task
   (:func:`harvest_shard`): the worker loads the models once per process
   (:func:`worker_setup`; a worker keeps them for its next shards), checks that
   its models and prompts give the client's settings fingerprint, generates the
   shard's texts still to do with each text's own random stream
   (``numpy.random.default_rng([seed, text])``,
   :func:`evolve.harvest.loop.text_rng`) and returns their records;
3. the client writes each finished shard as one part file,
   ``OUT/.harvest/parts/shard-KKKKK-of-SSSSS.parquet`` (shard ``K`` of ``S``,
   :func:`evolve.harvest.resume.shard_part_path`; atomically: temporary file +
   rename) holding the records and the info of all its texts, and at the end
   assembles the splits, ``texts.jsonl`` and ``metadata.json`` from all parts
   (:func:`evolve.harvest.resume.consolidate`).

Because a text's records depend only on the models, the options, the seed and
the text's index, the dataset equals that of a one-process harvest with the
same seed (given the same torch build, device and thread count). A killed
harvest resumes with the same command: the shards whose part file exists are
skipped, the others run again whole (a shard killed while running has no part).
Texts already in a part of another form, the one-text parts of a one-process
harvest or the shard parts of a harvest with another ``--shards``, are not
redone: a shard runs only its texts in no part, and its part holds only those
(a part written again under the same name keeps the texts it held). A text in
two part files is refused (:func:`evolve.harvest.resume.finished_texts`). A task
lost with its worker is run again by Dask. The workers must read the model
files and the prompts file at the same paths as the client (a shared file
system); the output is written by the client only.

A tree harvest (``tree_nodes``) shards the same way: a worker decodes its texts by tree steps
(:func:`evolve.harvest.tree_harvest.run_tree_texts`) and returns each text's tree table with its
records; the client writes the tree tables as the one-process harvest does, one
``text-NNNNNN.trees.parquet`` per text, before the shard's part (which marks the texts done).
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from evolve.cluster import ClusterOptions, dask_client
from evolve.errors import InputError
from evolve.harvest.config import HarvestConfig
from evolve.harvest.loop import HarvestResult, Setup, build, prepare, prompt_room, text_columns, text_rng
from evolve.files.digest import sha256_file
from evolve.harvest.progress import ProgressBar, stderr_console
from evolve.engine.drafters import chosen_drafters
from evolve.harvest.prompts import (assign_question_splits, check_context, encode_prompt, processing_order,
                                    read_prompt_file, split_rule)
from evolve.harvest.resume import (
    GENERATOR, MANIFEST_FILE, SETTINGS_KEYS, LastRun, check_out_dir, consolidate, finished_texts, fingerprint,
    read_parts, settings_fingerprint,
    shard_part_path, tree_part_path, write_shard_part, write_tree_part,
)
from evolve.files.atomic import atomic_write_text

#: The worker's loaded models: the configuration (as JSON) -> :class:`evolve.harvest.loop.Setup`.
_SETUPS: dict[str, Setup] = {}


@dataclass(frozen=True)
class ShardJob:
    """One shard: the harvest's configuration, the shard's index, its texts still to do, the settings
    fingerprint the worker's models and prompts must give (None: only describe the models), and torch's
    CPU threads when the configuration does not fix them (None: torch's choice)."""

    config: HarvestConfig
    shard: int
    texts: tuple[int, ...]
    settings: dict[str, Any] | None = None
    torch_threads: int | None = None


@dataclass
class ShardOutcome:
    """A finished shard: per text, its index, records (schema DataFrame) and ``texts.jsonl`` entry; the
    generated tokens, the target's forward seconds and the models' description; for a tree harvest, each
    text's tree table by index."""

    shard: int
    texts: list[tuple[int, pd.DataFrame, dict[str, Any]]] = field(default_factory=list)
    trees: dict[int, pd.DataFrame] = field(default_factory=dict)
    tokens: int = 0
    forward_seconds: float = 0.0
    description: dict[str, Any] = field(default_factory=dict)


def shard_texts(order: list[int], shards: int) -> list[list[int]]:
    """``order`` cut into ``shards`` contiguous pieces of nearly equal size (empty pieces dropped)."""
    n = len(order)
    return [order[k * n // shards:(k + 1) * n // shards] for k in range(shards) if (k + 1) * n // shards > k * n // shards]


def worker_setup(config: HarvestConfig) -> Setup:
    """The loaded models of ``config`` in this process (:func:`evolve.harvest.loop.build`, once per process)."""
    key = json.dumps({k: v for k, v in vars(config).items() if k not in ("out", "batch_size")}, sort_keys=True,
                     default=str)
    if key not in _SETUPS:
        _SETUPS.clear()  # one pair of models per worker
        _SETUPS[key] = build(config)
    return _SETUPS[key]


def text_info(index: int, split: str, line: int, prompt: str, prompt_tokens: int, tokenizer, result) -> dict[str, Any]:
    """The ``texts.jsonl`` entry of one finished text (the keys the one-process harvest writes)."""
    return {"seq_id": index, "split": split, "line": line, "prompt": prompt,
            "completion": tokenizer.decode(result.tokens, skip_special_tokens=False),
            "completion_ids": result.tokens, "prompt_tokens": prompt_tokens, "tokens": len(result.tokens),
            "finish": result.finish, "target_calls": result.target_calls, "blocks": len(result.blocks)}


def harvest_shard(job: ShardJob) -> ShardOutcome:
    """Generate the texts of one shard on this worker (see the module doc). Runs as a Dask task.

    Raises: InputError when this worker's models or prompts give another settings fingerprint than the
    client's (different files at the same paths).
    """
    config = job.config
    setup = worker_setup(config)
    if config.threads is None and job.torch_threads is not None:
        import torch
        torch.set_num_threads(job.torch_threads)
    outcome = ShardOutcome(job.shard, description=setup.description)
    if job.settings is None:
        return outcome
    prompts = read_prompt_file(config.prompts).select(config.categories)
    mine = fingerprint(config, setup.description, sha256_file(config.prompts))
    if mine != job.settings:
        raise InputError(f"shard {job.shard}: the models or prompts this worker reads differ from the client's "
                         f"(settings {json.dumps(mine, sort_keys=True)[:200]})")
    splits = assign_question_splits(prompts, config.seed)
    split_of = {t: name for name, idx in splits.items() for t in idx}
    tokenizer = setup.target.tokenizer
    encoded = {t: encode_prompt(tokenizer, prompts.texts[t].prompt, prompts.where(t), setup.engine.vocab)
               for t in job.texts}
    for t, ids in encoded.items():
        check_context(ids, prompts.where(t), *prompt_room(config, setup.target))
    before = setup.engine.forward_seconds()
    texts = ((t, encoded[t], text_rng(config.seed, t)) for t in job.texts)
    if config.tree_nodes is None:
        results = ((t, result, None) for t, result in setup.engine.run_texts(
            texts, config.gamma, config.max_new_tokens, config.batch_size))
    else:
        from evolve.harvest.tree_harvest import run_tree_texts

        results = run_tree_texts(setup.engine, texts, config.tree_nodes, config.tree_width, config.max_new_tokens)
    for t, result, trees in results:
        text, columns = prompts.texts[t], text_columns(prompts, t)
        info = text_info(t, split_of[t], text.line, text.prompt, len(encoded[t]), tokenizer, result)
        if prompts.structured:
            info.update(columns, turn=text.turn)
        if trees is not None:
            info["trees"] = int(trees["tree"].nunique())
            outcome.trees[t] = trees.assign(**columns)
        outcome.texts.append((t, result.frame(t).assign(**columns), info))
        outcome.tokens += len(result.tokens)
    outcome.texts.sort(key=lambda item: item[0])
    outcome.forward_seconds = setup.engine.forward_seconds() - before
    return outcome


def write_shard(path: Path, outcome: ShardOutcome, work: Path | None = None) -> None:
    """Write a finished shard's texts as one part file at ``path`` (atomically, see
    :func:`evolve.harvest.resume.write_shard_part`), after its texts' tree tables (a tree harvest: one
    file per text under ``work``, :func:`evolve.harvest.resume.tree_part_path`). A part already at
    ``path`` (the shard ran before while some of its texts were in other part files since deleted) is kept
    merged in: its texts are not among ``outcome``'s, which are only texts in no part. Texts are stored by
    increasing index. Raises: InputError for a damaged part already at ``path``."""
    digests = {t: write_tree_part(tree_part_path(work if work is not None else path.parent.parent, t), trees)
               for t, trees in outcome.trees.items()}
    texts = [(frame, dict(info, trees_sha256=digests[t]) if t in digests else info) for t, frame, info in outcome.texts]
    if path.exists():
        texts += read_parts(path)
    write_shard_part(path, sorted(texts, key=lambda item: item[1]["seq_id"]))


def harvest_sharded(config: HarvestConfig, shards: int, cluster: ClusterOptions | None = None,
                    progress: bool = True, console=None) -> HarvestResult:
    """Run (or resume) a harvest as ``shards`` Dask tasks and write the dataset into ``config.out``.

    Args:
        config: the options (see :class:`evolve.harvest.config.HarvestConfig`).
        shards: number of shards (>= 1).
        cluster: where the tasks run (None: a local cluster, one worker per shard, at most one per core).
        progress: show the progress bar (texts, tokens) on ``console`` (default: stderr).

    Returns: :class:`evolve.harvest.loop.HarvestResult`. Ctrl-C stops waiting for the shards still
    running; the finished ones are kept and consolidated, and the same command resumes.

    Raises: InputError as :func:`evolve.harvest.loop.harvest`, for a bad shard count, or when the
    cluster cannot be reached or a worker's files differ.
    """
    if shards < 1:
        raise InputError(f"shards: must be at least 1 (value {shards})")
    prompts, splits, prompts_sha, out, work = prepare(config)
    shared = next((d for d in chosen_drafters(config) if d.cross_request), None)
    if shared is not None:
        raise InputError(f"drafter '{shared.name}' shares a cache across texts, filled one text at a time in order, "
                         f"which shards cannot share; harvest it in one process", param="shards")
    if any(text.turn > 1 for text in prompts.texts):
        raise InputError(f"{config.prompts} has multi-turn questions, which a sharded harvest cannot decode (a later "
                         f"turn needs its question's earlier answers); harvest it in one process", param="prompts")
    check_out_dir(out, work, settings_fingerprint(config, prompts_sha), SETTINGS_KEYS)  # before the models load
    order = processing_order(splits)
    pieces = shard_texts(order, shards)
    console = console or stderr_console()
    t0 = time.perf_counter()
    tokens, forward, interrupted = 0, 0.0, False
    with dask_client(cluster or ClusterOptions(), len(pieces)) as (client, threads):
        description = client.submit(harvest_shard, ShardJob(config, -1, ()), pure=False).result().description
        settings = fingerprint(config, description, prompts_sha)
        check_out_dir(out, work, settings)
        atomic_write_text(work / MANIFEST_FILE, json.dumps(
            {"generator": GENERATOR, "fingerprint": settings, "texts_total": len(prompts.texts)}, indent=2))
        done = finished_texts(work)
        todo = [(k, tuple(t for t in piece if t not in done)) for k, piece in enumerate(pieces)]
        todo = [(k, texts) for k, texts in todo if texts]
        done_before = len(order) - sum(len(texts) for _, texts in todo)
        bar = ProgressBar(console, len(order), done_before, enabled=progress)
        futures = [client.submit(harvest_shard, ShardJob(config, k, texts, settings, threads), pure=False, retries=1,
                                 key=f"harvest-shard-{k}-{time.time_ns()}") for k, texts in todo]
        try:
            with bar:
                from distributed import as_completed
                for future in as_completed(futures):
                    outcome: ShardOutcome = future.result()
                    write_shard(shard_part_path(work, outcome.shard, len(pieces)), outcome, work)
                    for _ in outcome.texts:
                        bar.text_done()
                    tokens += outcome.tokens
                    forward += outcome.forward_seconds
                    bar.tokens(tokens, time.perf_counter() - t0)
        except KeyboardInterrupt:
            interrupted = True
            client.cancel(futures)
    seconds = time.perf_counter() - t0
    consolidated, stats, n_done = consolidate(out, config, description, splits, prompts_sha,
                                              LastRun(seconds, tokens, forward),
                                              split_rule=split_rule(prompts) if prompts.structured else None)
    return HarvestResult(out, n_done, len(order), interrupted, consolidated, stats, tokens, seconds)


__all__ = ["ShardJob", "ShardOutcome", "shard_texts", "worker_setup", "text_info", "harvest_shard", "write_shard",
           "harvest_sharded"]
