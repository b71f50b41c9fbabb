"""A run directory, written at once: its files staged in a hidden directory that is renamed into place.

:func:`write_run` writes, under the output directory, ``run-YYYYmmdd-HHMMSS-seedN`` (:func:`run_dir_name`):

* ``config.toml``: the resolved configuration (``python -m evolve run --config``
  repeats the run);
* ``run.json``: summary, data provenance (:func:`evolve.search.rundir.dataset_info`), package
  versions (:func:`versions`), ``champion_source`` (``evolved`` or
  ``seeded:NAME``) and, for a warm-started run, the seeded and skipped rules
  (:func:`evolve.search.run_documents.seeded_document`; ``config.toml`` names
  the seeds in comments);
* ``logbook.csv``: one row per generation (:data:`evolve.search.state.LOGBOOK_COLUMNS`);
* ``hall_of_fame.json``; ``champion.json`` and ``champion.py`` (the champion
  file format of :mod:`heuristics.champions`);
* ``front.json`` for a ``pareto`` run (:func:`evolve.search.run_documents.front_document`);
* any extra files the caller supplies (:data:`ExtraFiles`; ``python -m evolve run`` adds the
  fitness plot ``fitness.png``, drawn by :mod:`evolve.report.runplot`).

Every file is written atomically (:func:`evolve.files.atomic.atomic_write_text`) into a
hidden staging directory that is renamed into place at the end, so a run
directory is either complete or absent; a successful write removes the staging directories that a killed write of
the same run left, and those of other runs older than :data:`STALE_STAGING_SECONDS`.
"""
from __future__ import annotations

import json
import os
import platform
import shutil
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Mapping

from evolve.files.atomic import atomic_write_bytes, atomic_write_text, remove_stale_temps
from evolve.files.locks import mkdtemp_locked
from evolve.gp.primitives import PRIMITIVE_SET_VERSION
from evolve.search.config import RunConfig, to_toml
from evolve.search.interrupt import interrupted_comment
from evolve.search.result import SearchResult
from evolve.search.run_documents import (
    _objective_text, front_document, logbook_csv, seeded_comment, seeded_document, seeded_name,
)

#: Staging directories (``.run-*.tmp-XXXXXXXX``) older than this many seconds are left by a run killed
#: while writing its run directory and are removed by the next run writing into the same place.
STALE_STAGING_SECONDS = 3600.0
#: Extra files of a run directory: file name -> function of the search result giving the file's bytes.
ExtraFiles = Mapping[str, Callable[[SearchResult], bytes]]


def versions() -> dict[str, str]:
    """Versions of Python and the packages that determine a run's outcome."""
    from importlib import metadata
    out = {"python": platform.python_version(), "primitive_set": str(PRIMITIVE_SET_VERSION)}
    for pkg in ("specdec-evolve", "deap", "numpy", "numba"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = "unknown"
    return out


def _guard_text(result: SearchResult) -> str:
    """What a seeded champion's description adds when the champion guard chose it (empty otherwise)."""
    return "" if result.guard is None or result.guard.kept else " beyond the noise of valid's texts"


def run_dir_name(cfg: RunConfig, started: datetime) -> str:
    """``run-YYYYmmdd-HHMMSS-seedN`` (UTC; N is the random seed)."""
    return f"run-{started.strftime('%Y%m%d-%H%M%S')}-seed{cfg.seed}"


def write_run(result: SearchResult, out: Path, data_info: dict[str, Any], started: datetime,
              extra_files: ExtraFiles | None = None, checkpoint_dir: Path | None = None) -> Path:
    """Write a run directory under ``out`` and return its path.

    Files: ``config.toml`` (resolved config), ``run.json`` (summary, data
    provenance, versions), ``logbook.csv``, ``hall_of_fame.json``,
    ``champion.json`` (champion file format, :mod:`heuristics.champions`),
    ``champion.py``, for a ``pareto`` run ``front.json``
    (:func:`front_document`), and one file per entry of ``extra_files``
    (name -> function of ``result`` giving the bytes). Every file is written
    atomically into a hidden staging directory that is renamed into place at
    the end, so a run directory is either complete or absent (an exception
    from an extra file's function leaves nothing). The name is unique: a
    suffix ``-2``, ``-3``... is added when needed. ``checkpoint_dir`` (the
    kept checkpoint directory of an interrupted run) is recorded in
    ``run.json`` as ``checkpoint_dir``; ``data_info`` is the data provenance
    (:func:`evolve.search.rundir.dataset_info`).
    """
    from heuristics.champions import Champion, champion_json, champion_python

    cfg = result.config
    out.mkdir(parents=True, exist_ok=True)
    base = run_dir_name(cfg, started)
    stage, stage_lock = mkdtemp_locked(out, f".{base}.tmp-")  # locked: no cleaner takes it while it is written
    created = started.isoformat(timespec="seconds")
    provenance = {
        "run_dir": None, "seed": cfg.seed, "data_dir": str(cfg.data), "data": data_info,
        "config": cfg.to_dict(), "created": created, "versions": versions(),
        "generations_completed": result.generations, "interrupted": result.interrupted,
        "champion_source": result.champion_source,
    }
    context = cfg.cost_model.priced_context
    if context is not None:  # a cost file timed at two contexts, priced at the dataset's (evolve.harvest.context)
        provenance["costs_priced_at_context_tokens"] = context
    if result.guard is not None:
        provenance["champion_guard"] = result.guard.to_dict()
    seeded = seeded_document(result)
    if seeded is not None:
        provenance["seeded_rules"] = [s["name"] for s in seeded["seeded_rules"]]
    kind = cfg.program_kind
    how = f"{kind.title}s, {cfg.objective} objective{_objective_text(cfg)}, seed {cfg.seed}"
    seed_name = seeded_name(result.champion_source)
    try:
        final = _unique(out, base)
        provenance["run_dir"] = str(final)
        champ = Champion(
            name="champion", expression=result.champion.expression,
            description=(f"evolved on {data_info.get('dir')} ({how})" if seed_name is None else
                         f"the seeded rule {seed_name}: evolution on {data_info.get('dir')} found nothing "
                         f"better on valid{_guard_text(result)} ({how})"),
            features=result.features, objective=cfg.objective, kind=kind.name,
            metrics={"train": result.champion.train.to_dict(), "valid": result.champion.valid.to_dict()},
            provenance=provenance)
        atomic_write_text(stage / "config.toml", to_toml(cfg) + seeded_comment(result) + interrupted_comment(result))
        summary = {
            "run_dir": str(final), "created": created, "seed": cfg.seed, "kind": kind.name, "objective": cfg.objective,
            "features": list(result.features), "generations_completed": result.generations,
            "interrupted": result.interrupted, "evaluations": result.evaluations,
            "programs_scored": result.programs, "seconds": round(result.seconds, 3),
            "champion": result.champion.to_dict(), "champion_source": result.champion_source,
            "champion_guard": None if result.guard is None else result.guard.to_dict(),
            **(seeded or {}), "data": data_info, "versions": versions(), "config": cfg.to_dict(),
        }
        if result.front is not None:
            summary["front_size"] = len(result.front)
        if checkpoint_dir is not None:
            summary["checkpoint_dir"] = str(checkpoint_dir)
        atomic_write_text(stage / "run.json", json.dumps(summary, indent=2) + "\n")
        atomic_write_text(stage / "logbook.csv", logbook_csv(result.logbook))
        atomic_write_text(stage / "hall_of_fame.json",
                          json.dumps([e.to_dict() for e in result.hall_of_fame], indent=2) + "\n")
        atomic_write_text(stage / "champion.json", champion_json(champ))
        atomic_write_text(stage / "champion.py", champion_python(champ))
        for name, make in (extra_files or {}).items():
            atomic_write_bytes(stage / name, make(result))
        if result.front is not None:
            atomic_write_text(stage / "front.json", json.dumps(front_document(result), indent=2) + "\n")
        while True:
            try:
                os.rename(stage, final)
                break
            except OSError:
                if not final.exists():
                    raise
                final = _unique(out, base)  # another run took the name meanwhile
                _retarget(stage, final)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    finally:
        os.close(stage_lock)
    remove_stale_temps(out, base)  # left by a killed write of this run (a live writer's is never removed)
    remove_stale_temps(out, "run-*", min_age=STALE_STAGING_SECONDS)  # left by other runs killed while writing
    return final


def _unique(out: Path, base: str) -> Path:
    candidate = out / base
    k = 2
    while candidate.exists():
        candidate = out / f"{base}-{k}"
        k += 1
    return candidate


def _retarget(stage: Path, final: Path) -> None:
    """Rewrite the run directory path recorded in the staged files."""
    for name in ("run.json", "champion.json"):
        doc = json.loads((stage / name).read_text())
        if name == "run.json":
            doc["run_dir"] = str(final)
        else:
            doc["provenance"]["run_dir"] = str(final)
        atomic_write_text(stage / name, json.dumps(doc, indent=2) + "\n")


__all__ = ["ExtraFiles", "STALE_STAGING_SECONDS", "write_run", "run_dir_name", "versions"]
