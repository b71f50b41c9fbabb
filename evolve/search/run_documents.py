"""The documents of a run directory that are made from a search result.

* ``front.json`` of a ``pareto`` run (:func:`front_document`);
* the warm start's part of ``run.json`` (:func:`seeded_document`) and the
  comment lines of ``config.toml`` naming the seeds (:func:`seeded_comment`);
* ``logbook.csv`` (:func:`logbook_csv`);
* ``checkpoint_dir`` of ``run.json``, read back: the run directory written when a run was stopped by
  Ctrl-C, found from its kept checkpoint directory (:func:`interrupted_run_dir`).
"""
from __future__ import annotations

import csv
import io
import json
import math
import os
from pathlib import Path
from typing import Any

from evolve.eval.objectives import PARETO_OBJECTIVES, speed_at_tv
from evolve.search.config import RunConfig
from evolve.search.result import SearchResult
from evolve.search.state import LOGBOOK_COLUMNS, score


def seeded_name(source: str) -> str | None:
    """NAME of a champion source ``"seeded:NAME"``; None for ``"evolved"`` (or any other source)."""
    return source[len("seeded:"):] if source.startswith("seeded:") else None


def seeded_document(result: SearchResult) -> dict[str, Any] | None:
    """``{"seeded_rules": [...], "skipped_rules": [...]}`` of a warm-started run (None without warm start).

    Each seeded rule: ``name``, ``expression``, ``reason`` (why it was chosen)
    and its run objective on ``train`` and ``valid``
    (:func:`evolve.search.state.score`); each skipped rule: ``name`` and ``reason``.
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
            item["train"] = _finite(score(entry.train, cfg))
            item["valid"] = _finite(score(entry.valid, cfg))
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
    spec = cfg.objective_spec
    if not spec.needs_blocks:
        return ""
    text = f", gamma {cfg.gamma}, TV budget {cfg.tv_budget:g}"
    return text + (f", TV cap {cfg.tv_cap:g}" if spec.multi else "")


def front_document(result: SearchResult) -> dict[str, Any]:
    """The ``front.json`` object of a ``pareto`` run.

    Keys: ``objectives`` (names and directions), ``gamma``, ``tv_cap``,
    ``tv_budget``, ``champion`` (its expression; with the warm start it may be
    a seeded rule that is not on the front), ``front``: one object per
    member, ascending TV per token on train, with ``expression``, ``size``,
    ``depth``, ``objectives`` {``train``, ``valid``: {tokens_per_call,
    tv_per_token, size}}, ``speed_at_tv`` {``train``, ``valid``} (with
    ``tv_budget``) and the full ``train`` and ``valid`` metrics.

    The front of a multi-objective run under an objective without block metrics (a registered one, such as
    docs/reference/api.md's ``accept_vs_tv``) has that objective's own values instead: ``objectives`` names them
    ``OBJECTIVE[i]`` with the direction of its weight, each member's ``objectives`` {``train``, ``valid``: the
    list of its fitness values}, and no ``speed_at_tv`` (it needs the block metrics).
    """
    cfg = result.config
    spec = cfg.objective_spec
    if not spec.needs_blocks:
        return _own_front_document(result, spec)
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


def _own_front_document(result: SearchResult, spec: Any) -> dict[str, Any]:
    """``front.json`` of a multi-objective run under an objective without block metrics (:func:`front_document`)."""
    cfg = result.config
    names = [f"{spec.name}[{i}]" for i in range(len(spec.weights))]
    members = []
    for e in result.front or []:
        objectives = {split: [float(v) for v in spec.fitness_values(m, e.size, cfg)]
                      for split, m in (("train", e.train), ("valid", e.valid))}
        members.append({"expression": e.expression, "size": e.size, "depth": e.depth, "objectives": objectives,
                        "train": e.train.to_dict(), "valid": e.valid.to_dict()})
    return {"objectives": [{"name": n, "direction": "max" if w > 0 else "min"} for n, w in zip(names, spec.weights)],
            "gamma": None, "tv_cap": cfg.tv_cap, "tv_budget": cfg.tv_budget, "champion": result.champion.expression,
            "front": members}


def logbook_csv(logbook: list[dict[str, float]]) -> str:
    """The logbook as CSV text (header :data:`evolve.search.state.LOGBOOK_COLUMNS`; floats to 6 digits)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(LOGBOOK_COLUMNS), lineterminator="\n")
    w.writeheader()
    for row in logbook:
        w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in row.items()})
    return buf.getvalue()


def interrupted_run_dir(checkpoint_dir: str | os.PathLike) -> Path | None:
    """The run directory written when the run of ``checkpoint_dir`` (``OUT/.run-...partial``) was stopped by
    Ctrl-C, or None.

    Such a run directory lies beside the checkpoint directory and its ``run.json`` names it
    (``checkpoint_dir``, compared by name since it may be recorded relative to another working
    directory). When several do (a resumed run stopped again), the one that completed the most
    generations. Unreadable or foreign ``run.json`` files are skipped.
    """
    partial = Path(checkpoint_dir)
    if not partial.name:
        partial = partial.resolve()
    best: tuple[int, str] | None = None
    found = None
    try:
        siblings = sorted(q for q in partial.parent.iterdir() if q.name.startswith("run-") and q.is_dir())
    except OSError:
        return None
    for run_dir in siblings:
        try:
            doc = json.loads((run_dir / "run.json").read_bytes().decode("utf-8"))
        except (OSError, ValueError, UnicodeDecodeError, RecursionError):
            continue
        kept = doc.get("checkpoint_dir") if isinstance(doc, dict) else None
        if not isinstance(kept, str) or Path(kept).name != partial.name or not (run_dir / "champion.json").is_file():
            continue
        done = doc.get("generations_completed")
        key = (done if isinstance(done, int) and not isinstance(done, bool) else -1, run_dir.name)
        if best is None or key > best:
            best, found = key, run_dir
    return found


__all__ = ["seeded_name", "seeded_document", "seeded_comment", "front_document", "logbook_csv",
           "interrupted_run_dir"]
