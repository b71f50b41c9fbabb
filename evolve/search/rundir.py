"""A whole run: load the data, search, and write the run directory.

:func:`run` reads the ``train`` and ``valid`` splits of ``cfg.data`` (never
``test``), runs :func:`evolve.search.algorithms.search` and writes a new run
directory under ``cfg.out`` (:func:`write_run`):

* ``config.toml``: the resolved configuration (``python -m evolve run --config``
  repeats the run);
* ``run.json``: summary, data provenance (:func:`dataset_info`), package
  versions (:func:`versions`), ``champion_source`` (``evolved`` or
  ``seeded:NAME``) and, for a warm-started run, the seeded and skipped rules
  (:func:`seeded_document`; ``config.toml`` names the seeds in comments);
* ``logbook.csv``: one row per generation (:data:`evolve.search.algorithms.LOGBOOK_COLUMNS`);
* ``hall_of_fame.json``; ``champion.json`` and ``champion.py`` (the champion
  file format of :mod:`heuristics.champions`);
* ``front.json`` for a ``pareto`` run (:func:`front_document`);
* any extra files the caller supplies (``python -m evolve run`` adds the
  fitness plot ``fitness.png``, drawn by :mod:`evolve.report.runplot`).

Every file is written atomically (:func:`data.io.atomic_write_text`) into a
hidden staging directory that is renamed into place at the end, so a run
directory is either complete or absent.
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import os
import platform
import shutil
import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Mapping

from data.io import Traces, atomic_write_bytes, atomic_write_text, load_split
from data.paths import check_output_dir, write_or_rescue
from evolve.eval.evaluator import EvalData
from evolve.eval.objectives import PARETO_OBJECTIVES, speed_at_tv
from evolve.gp.primitives import PRIMITIVE_SET_VERSION
from evolve.search.algorithms import LOGBOOK_COLUMNS, SearchResult, score, search
from evolve.search.config import BLOCK_FITNESS, RunConfig, resolve_features, to_toml
from evolve.search.interrupt import interrupted_comment

#: How the output directory is named in messages.
OUT_WHAT = "out (where run directories are created)"
#: Extra files of a run directory: file name -> function of the search result giving the file's bytes.
ExtraFiles = Mapping[str, Callable[[SearchResult], bytes]]


@dataclass
class RunInfo:
    """What :func:`run` wrote: the run directory, the search result and the data provenance."""

    run_dir: Path
    result: SearchResult
    data: dict[str, Any] = field(default_factory=dict)


def load_search_data(cfg: RunConfig) -> tuple[Traces, Traces]:
    """Load and validate the train and valid splits of ``cfg.data`` (the test split is never read).

    Raises: InputError for a missing or invalid dataset (the message says how to create one).
    """
    return load_split(cfg.data, "train"), load_split(cfg.data, "valid")


def run(cfg: RunConfig, progress: Callable[[dict[str, float]], None] | None = None,
        stop: Callable[[], bool] | None = None, extra_files: ExtraFiles | None = None) -> RunInfo:
    """Load the data, evolve, and write a new run directory under ``cfg.out``.

    Args:
        cfg: resolved configuration (:func:`evolve.search.config.resolve`).
        progress: called with each generation's logbook row.
        stop: polled after each generation (e.g. from
            :func:`evolve.search.interrupt.graceful_interrupt`).
        extra_files: more files for the run directory (see :func:`write_run`).

    Returns: :class:`RunInfo` with the run directory.

    Raises: InputError for bad data or an unusable output directory (checked
    before the search, :func:`data.paths.check_output_dir`); nothing is written
    in that case. If writing still fails at the end, the run directory is
    written into a rescue directory and the InputError names it
    (:func:`data.paths.write_or_rescue`).
    """
    out = check_output_dir(cfg.out, (cfg.data,), OUT_WHAT)
    train_t, valid_t = load_search_data(cfg)
    train, valid = EvalData.from_traces(train_t), EvalData.from_traces(valid_t)
    available = tuple(f for f in train.available if f in valid.available)
    features = resolve_features(cfg, available, cfg.data)
    started = datetime.now(timezone.utc)
    result = search(cfg, train, valid, features, on_generation=progress, should_stop=stop)
    data_info = dataset_info(cfg.data, train_t, valid_t)
    run_dir = write_or_rescue(lambda d: write_run(result, d, data_info, started, extra_files), out, OUT_WHAT, True)
    return RunInfo(run_dir, result, data_info)


def dataset_info(data_dir: str, train: Traces, valid: Traces) -> dict[str, Any]:
    """Provenance of the data a run read: directory, generator metadata, tokens and SHA-256 file digests."""
    meta = train.metadata or {}
    info: dict[str, Any] = {"dir": str(data_dir)}
    for key in ("generator", "generator_version", "seed", "schema_version", "format"):
        if key in meta:
            info[key] = meta[key]
    if "config" in meta:
        info["generator_config"] = meta["config"]
    info["tokens"] = {"train": train.n, "valid": valid.n}
    info["sha256"] = {t.split: _sha256(t.source) for t in (train, valid)}
    return info


def _sha256(path: str) -> str | None:
    try:
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        return h.hexdigest()
    except OSError:
        return None


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


def run_dir_name(cfg: RunConfig, started: datetime) -> str:
    """``run-YYYYmmdd-HHMMSS-seedN`` (UTC; N is the random seed)."""
    return f"run-{started.strftime('%Y%m%d-%H%M%S')}-seed{cfg.seed}"


def write_run(result: SearchResult, out: Path, data_info: dict[str, Any], started: datetime,
              extra_files: ExtraFiles | None = None) -> Path:
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
    suffix ``-2``, ``-3``... is added when needed.
    """
    from heuristics.champions import Champion, champion_json, champion_python

    cfg = result.config
    out.mkdir(parents=True, exist_ok=True)
    base = run_dir_name(cfg, started)
    stage = Path(tempfile.mkdtemp(dir=out, prefix=f".{base}.tmp-"))
    created = started.isoformat(timespec="seconds")
    provenance = {
        "run_dir": None, "seed": cfg.seed, "data_dir": str(cfg.data), "data": data_info,
        "config": cfg.to_dict(), "created": created, "versions": versions(),
        "generations_completed": result.generations, "interrupted": result.interrupted,
        "champion_source": result.champion_source,
    }
    seeded = seeded_document(result)
    if seeded is not None:
        provenance["seeded_rules"] = [s["name"] for s in seeded["seeded_rules"]]
    how = f"{cfg.fitness} fitness{_objective_text(cfg)}, seed {cfg.seed}"
    seed_name = seeded_name(result.champion_source)
    try:
        final = _unique(out, base)
        provenance["run_dir"] = str(final)
        champ = Champion(
            name="champion", expression=result.champion.expression,
            description=(f"evolved on {data_info.get('dir')} ({how})" if seed_name is None else
                         f"the seeded rule {seed_name}: evolution on {data_info.get('dir')} found nothing "
                         f"better on valid ({how})"),
            features=result.features, fitness=cfg.fitness,
            metrics={"train": result.champion.train.to_dict(), "valid": result.champion.valid.to_dict()},
            provenance=provenance)
        atomic_write_text(stage / "config.toml", to_toml(cfg) + seeded_comment(result) + interrupted_comment(result))
        summary = {
            "run_dir": str(final), "created": created, "seed": cfg.seed, "fitness": cfg.fitness,
            "features": list(result.features), "generations_completed": result.generations,
            "interrupted": result.interrupted, "evaluations": result.evaluations,
            "programs_scored": result.programs, "seconds": round(result.seconds, 3),
            "champion": result.champion.to_dict(), "champion_source": result.champion_source,
            **(seeded or {}), "data": data_info, "versions": versions(), "config": cfg.to_dict(),
        }
        if result.front is not None:
            summary["front_size"] = len(result.front)
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
    return final


def seeded_name(source: str) -> str | None:
    """NAME of a champion source ``"seeded:NAME"``; None for ``"evolved"`` (or any other source)."""
    return source[len("seeded:"):] if source.startswith("seeded:") else None


def seeded_document(result: SearchResult) -> dict[str, Any] | None:
    """``{"seeded_rules": [...], "skipped_rules": [...]}`` of a warm-started run (None without warm start).

    Each seeded rule: ``name``, ``expression``, ``reason`` (why it was chosen)
    and its run objective on ``train`` and ``valid``
    (:func:`evolve.search.algorithms.score`); each skipped rule: ``name`` and ``reason``.
    """
    warm = result.warm_start
    if warm is None:
        return None
    doc = warm.to_dict()
    values = {e.expression: e for e in result.seeded}
    cfg = result.config
    for item in doc["seeded_rules"]:
        entry = values.get(item["expression"])
        if entry is not None:
            item["train"] = _finite(score(entry.train, cfg.fitness, cfg.tv_budget))
            item["valid"] = _finite(score(entry.valid, cfg.fitness, cfg.tv_budget))
    return doc


def _finite(value: float) -> float | None:
    """``value``, or None when it is not finite (JSON has no infinity)."""
    return value if math.isfinite(value) else None


def seeded_comment(result: SearchResult) -> str:
    """Comment lines for ``config.toml`` naming the seeded rules (empty without warm start).

    Comments, not keys: the seeds follow from the configuration and the data,
    so ``--config config.toml`` repeats the run without them.
    """
    if result.warm_start is None:
        return ""
    lines = [f"# warm start: {len(result.warm_start.seeds)} seeded rules (run.json lists them with the reasons)"]
    lines += [f"#   {s.name} = {s.expression}" for s in result.warm_start.seeds]
    return "\n".join(lines) + "\n"


def _objective_text(cfg: RunConfig) -> str:
    """``, gamma 5, TV budget 0.01`` for block objectives (empty otherwise)."""
    if cfg.fitness not in BLOCK_FITNESS:
        return ""
    text = f", gamma {cfg.gamma}, TV budget {cfg.tv_budget:g}"
    return text + (f", TV cap {cfg.tv_cap:g}" if cfg.fitness == "pareto" else "")


def front_document(result: SearchResult) -> dict[str, Any]:
    """The ``front.json`` object of a ``pareto`` run.

    Keys: ``objectives`` (names and directions), ``gamma``, ``tv_cap``,
    ``tv_budget``, ``champion`` (its expression; with the warm start it may be
    a seeded rule that is not on the front), ``front``: one object per
    member, ascending TV per token on train, with ``expression``, ``size``,
    ``depth``, ``objectives`` {``train``, ``valid``: {tokens_per_call,
    tv_per_token, size}}, ``speed_at_tv`` {``train``, ``valid``} (with
    ``tv_budget``) and the full ``train`` and ``valid`` metrics.
    """
    cfg = result.config
    members = []
    for e in result.front or []:
        objectives = {split: {"tokens_per_call": m.tokens_per_call, "tv_per_token": m.tv_per_token,
                              "size": e.size} for split, m in (("train", e.train), ("valid", e.valid))}
        members.append({"expression": e.expression, "size": e.size, "depth": e.depth, "objectives": objectives,
                        "speed_at_tv": {"train": speed_at_tv(e.train, cfg.tv_budget),
                                        "valid": speed_at_tv(e.valid, cfg.tv_budget)},
                        "train": e.train.to_dict(), "valid": e.valid.to_dict()})
    directions = dict(zip(PARETO_OBJECTIVES, ("max", "min", "min")))
    return {"objectives": [{"name": k, "direction": v} for k, v in directions.items()], "gamma": cfg.gamma,
            "tv_cap": cfg.tv_cap, "tv_budget": cfg.tv_budget, "champion": result.champion.expression,
            "front": members}


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


def logbook_csv(logbook: list[dict[str, float]]) -> str:
    """The logbook as CSV text (header :data:`evolve.search.algorithms.LOGBOOK_COLUMNS`; floats to 6 digits)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(LOGBOOK_COLUMNS), lineterminator="\n")
    w.writeheader()
    for row in logbook:
        w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in row.items()})
    return buf.getvalue()


__all__ = ["RunInfo", "ExtraFiles", "run", "write_run", "load_search_data", "dataset_info", "versions",
           "run_dir_name", "front_document", "logbook_csv", "seeded_document", "seeded_comment", "seeded_name"]
