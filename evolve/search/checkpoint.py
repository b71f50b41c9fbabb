"""Checkpoints of a search: what is saved between two epochs, and the file that holds it.

A search is cut into epochs of ``migration_interval`` generations. After each
epoch the run directory gets ``checkpoint.pkl`` (:data:`CHECKPOINT_FILE`),
replaced atomically (written under a temporary name, then renamed; a process
killed at any point, ``kill -9`` included, leaves the previous checkpoint or
the new one, never a mix). It holds a :class:`Snapshot`:

* every island's population with its fitness values (and NSGA-II crowding
  distances), its hall of fame, the generation reached and the states of
  Python's ``random`` and numpy's global generator (:class:`Island`);
* the logbook so far, the evaluation counts and the wall time so far;
* the warm start (the seeded rules are rebuilt from it);
* for a one-population search, the evaluators' remembered metrics, so that
  the resumed run counts ``new_programs`` exactly as the uninterrupted one.

File layout: a first line ``specdec-evolve checkpoint 1``, a second line of
JSON (:func:`header`: the resolved configuration, the features, the SHA-256
of the train and valid files, the generation reached, the size and SHA-256 of
the payload), then the payload, a Python pickle of the snapshot. The header
can be read without unpickling anything (:func:`read_header`); a resume
compares it with the run's configuration and data before it loads the
payload (:func:`check_resumable`). Pickles run code when loaded: resume only
run directories you (or your cluster) wrote.
"""
from __future__ import annotations

import hashlib
import json
import os
import pickle
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from evolve.errors import InputError
from evolve.traces.io import atomic_write_bytes

#: File name of the checkpoint inside a run directory.
CHECKPOINT_FILE = "checkpoint.pkl"
#: First line of a checkpoint file (the number is the format version).
MAGIC = b"specdec-evolve checkpoint 1\n"
#: Configuration keys that may differ between a checkpoint and a resume: where results go, and where the
#: data are read (a moved dataset is fine; its files must have the same SHA-256).
EXECUTION_KEYS: tuple[str, ...] = ("out", "data")


@dataclass
class Island:
    """One population between two generations.

    ``hof`` is the :class:`evolve.search.individuals.HallOfFame` (None for a
    ``pareto`` run, whose candidates are the first front of the population);
    ``generation`` the last generation completed (0: the initial population
    is scored); ``rng`` and ``np_rng`` the states of Python's ``random`` and of
    numpy's global generator at that point (None until :meth:`keep_rng`).
    """

    population: list
    hof: Any
    generation: int
    rng: Any = None
    np_rng: Any = None

    def keep_rng(self) -> None:
        """Store the current states of ``random`` and ``numpy.random`` in the island."""
        self.rng, self.np_rng = random.getstate(), np.random.get_state()

    def restore_rng(self) -> None:
        """Set ``random`` and ``numpy.random`` to the states the island holds."""
        random.setstate(self.rng)
        np.random.set_state(self.np_rng)


@dataclass
class Snapshot:
    """The state of a search after ``generation`` generations (every island has reached it).

    ``logbook``: rows so far; ``evaluations``, ``programs``: individuals
    scored and distinct programs run so far; ``seconds``: search wall time so
    far; ``warm``: the :class:`evolve.search.warm_start.WarmStart` (None when
    off); ``interrupted``: the snapshot was taken because a stop was
    requested (Ctrl-C); ``caches``: evaluator caches of a one-population
    search (:meth:`evolve.search.state.SearchState.cache_state`).
    """

    generation: int
    islands: list[Island]
    logbook: list[dict[str, float]]
    evaluations: int
    programs: int
    seconds: float
    warm: Any = None
    interrupted: bool = False
    caches: Any = None


def file_sha256(path: str | os.PathLike) -> str | None:
    """SHA-256 (hex) of a file's bytes, or None when it cannot be read."""
    try:
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        return h.hexdigest()
    except OSError:
        return None


def header(config: dict[str, Any], features: tuple[str, ...], data_sha256: dict[str, Any], created: str,
           snapshot: Snapshot | None) -> dict[str, Any]:
    """The JSON header of a checkpoint (without the payload fields, which :func:`write_checkpoint` adds).

    Args:
        config: the resolved configuration (``RunConfig.to_dict()``).
        features: the run's terminal features.
        data_sha256: {"train": hex digest, "valid": hex digest} of the split files.
        created: ISO time at which the run started (UTC).
        snapshot: the state saved (None: the run has started, no epoch is done yet).
    """
    return {"config": config, "features": list(features), "data_sha256": data_sha256, "created": created,
            "generation": None if snapshot is None else snapshot.generation,
            "generations": config.get("generations"),
            "interrupted": False if snapshot is None else snapshot.interrupted}


def write_checkpoint(path: str | os.PathLike, head: dict[str, Any], snapshot: Snapshot | None) -> None:
    """Atomically replace the checkpoint file ``path`` with ``head`` and the pickled ``snapshot``."""
    payload = b"" if snapshot is None else pickle.dumps(snapshot, protocol=pickle.HIGHEST_PROTOCOL)
    head = {**head, "payload_bytes": len(payload), "payload_sha256": hashlib.sha256(payload).hexdigest()}
    atomic_write_bytes(path, MAGIC + json.dumps(head, sort_keys=True).encode("utf-8") + b"\n" + payload)


def _split(path: Path) -> tuple[dict[str, Any], bytes]:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{path}: no checkpoint (not a run directory of `python -m evolve run`, or a run "
                         "that finished)") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read the checkpoint ({' '.join(str(exc).split())})") from None
    if not raw.startswith(MAGIC):
        raise InputError(f"{path}: not a checkpoint of this program (first line {raw[:40]!r})")
    end = raw.find(b"\n", len(MAGIC))
    try:
        head = json.loads(raw[len(MAGIC):end]) if end >= 0 else None
    except (json.JSONDecodeError, UnicodeDecodeError):
        head = None
    if not isinstance(head, dict) or not isinstance(head.get("config"), dict):
        raise InputError(f"{path}: the checkpoint header is not valid JSON")
    return head, raw[end + 1:]


def read_header(path: str | os.PathLike) -> dict[str, Any]:
    """The JSON header of the checkpoint file ``path`` (nothing is unpickled). Raises InputError."""
    return _split(Path(path))[0]


def read_checkpoint(path: str | os.PathLike) -> tuple[dict[str, Any], Snapshot | None]:
    """(header, snapshot) of the checkpoint file ``path``; the snapshot is None before the first epoch.

    The primitive set of the header's features is built first (DEAP finds the
    class of the ephemeral constants by name when the trees are unpickled).

    Raises: InputError for a missing, unreadable, truncated or altered file
    (the payload's size and SHA-256 are checked against the header).
    """
    from evolve.gp.primitives import build_pset

    path = Path(path)
    head, payload = _split(path)
    if len(payload) != head.get("payload_bytes") or hashlib.sha256(payload).hexdigest() != head.get("payload_sha256"):
        raise InputError(f"{path}: the checkpoint payload does not match its header (truncated or altered)")
    if not payload:
        return head, None
    build_pset(tuple(head.get("features") or ()))
    try:
        snapshot = pickle.loads(payload)
    except Exception as exc:  # noqa: BLE001 - any unpickling failure means an unusable file
        raise InputError(f"{path}: cannot load the checkpoint ({type(exc).__name__}: {exc})") from None
    if not isinstance(snapshot, Snapshot):
        raise InputError(f"{path}: the checkpoint holds a {type(snapshot).__name__}, not a search snapshot")
    return head, snapshot


def check_resumable(head: dict[str, Any], config: dict[str, Any], data_sha256: dict[str, Any], where: str) -> None:
    """Refuse (InputError naming the first difference) a resume whose settings or data differ from the checkpoint.

    Args:
        head: the checkpoint header (:func:`read_header`).
        config: the configuration the resume would use (``RunConfig.to_dict()``).
        data_sha256: SHA-256 of the train and valid files the resume would read.
        where: how the run directory is named in the message.
    """
    saved = head.get("config", {})
    for key in sorted(set(saved) | set(config)):
        if key in EXECUTION_KEYS:
            continue
        a, b = saved.get(key), config.get(key)
        if isinstance(a, list) or isinstance(b, list):
            a, b = list(a) if isinstance(a, (list, tuple)) else a, list(b) if isinstance(b, (list, tuple)) else b
        if a != b:
            raise InputError(f"{where}: cannot resume: setting '{key}' is {b!r} but the checkpoint was made with "
                             f"{a!r} (a resumed run must use the settings it started with)")
    for split in ("train", "valid"):
        a, b = head.get("data_sha256", {}).get(split), data_sha256.get(split)
        if a != b:
            raise InputError(f"{where}: cannot resume: the {split} split of {config.get('data')} changed since "
                             f"the run started (SHA-256 {str(b)[:12]}..., checkpoint {str(a)[:12]}...)")


__all__ = ["CHECKPOINT_FILE", "MAGIC", "EXECUTION_KEYS", "Island", "Snapshot", "file_sha256", "header", "write_checkpoint",
           "read_header", "read_checkpoint", "check_resumable"]
