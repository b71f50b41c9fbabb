"""A whole run: load the data, search with checkpoints, write the run directory; resume a stopped run.

:func:`run` reads the ``train`` and ``valid`` splits of ``cfg.data`` (never
``test``), runs :func:`evolve.search.algorithms.search` (or, with ``islands``
> 1, :func:`evolve.search.islands.island_search` on Dask) and writes a new run
directory under ``cfg.out`` (:func:`evolve.search.run_files.write_run`: ``config.toml``, ``run.json`` with the data
provenance of :func:`dataset_info`, ``logbook.csv``, the hall of fame, the champion files, ``front.json`` of a
``pareto`` run and the caller's extra files), all at once: a run directory is either complete or absent.

Checkpoints: while the search runs, its state lives in a hidden checkpoint
directory next to where the run directory will be,
``OUT/.run-YYYYmmdd-HHMMSS-seedN.partial`` (:func:`checkpoint_dir_name`),
holding ``config.toml`` and ``checkpoint.json``
(:mod:`evolve.search.checkpoint`), replaced atomically after every epoch of
``migration_interval`` generations. A run killed at any point (``kill -9``, a
lost node, a scheduler's time limit) leaves that directory intact, and
:func:`resume` continues from the last checkpoint to exactly the champion and
logbook of an uninterrupted run (timing columns aside). The directory is
removed when the run directory has been written, except after a Ctrl-C
(``interrupted``): then it stays, ``run.json`` names it (``checkpoint_dir``)
and :func:`resume` finishes the run into a new run directory.

One writer per checkpoint directory: :func:`run` and :func:`resume` hold its
lock (:class:`evolve.files.locks.DirectoryLock`) from start to end, so a
second ``resume`` of the same checkpoint, or a resume while the run still
goes, is refused in one line naming the PID of the process that holds it.
:func:`resume` checks the checkpoint (one SHA-256 over header and payload,
every field by type and sense), the run's settings and data, and runs the
output guard of ``run --out`` on the directory the run directory goes to,
all before it takes the lock.

Pinned inputs: :func:`run` makes every setting that names a file (a cost file,
a verifier's champion file) an absolute path (:func:`evolve.search.checkpoint.absolute_inputs`),
records each file's SHA-256 in the checkpoint header (``inputs``,
:func:`evolve.search.checkpoint.pin_inputs`), reads it and checks the digest
again (:func:`evolve.search.checkpoint.read_pinned`); :func:`resume` reads the pinned files, whatever
its working directory, and refuses one that changed or vanished, naming it. While the run goes, a read of a
pinned file (the cost file, a tree table) that finds other content is refused (:mod:`evolve.files.pins`; the
pins are dropped when :func:`run` or :func:`resume` returns).
The dataset is read where the run read it (``data_dir_absolute``), and the
split digests recorded come from the very bytes that were parsed
(:attr:`evolve.traces.io.Traces.sha256`).
"""
from __future__ import annotations

import json
import os
import shutil
import warnings
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from evolve.cluster import ClusterOptions
from evolve.errors import InputError, InputWarning, os_error_text
from evolve.traces.io import Traces, load_split, split_path
from evolve.files.pins import released as pins_released
from evolve.files.atomic import atomic_write_text
from evolve.files.locks import DirectoryLock
from evolve.files.guard import check_output_dir, is_dataset_dir, write_or_rescue
from evolve.eval.evaluator import EvalData
from evolve.search.algorithms import search
from evolve.search.checkpoint import (
    CHECKPOINT_FILE, LEGACY_CHECKPOINT_FILE, Snapshot, absolute_inputs, check_pins, check_resumable, header, legacy_refusal,
    load_header, pin_inputs, pinned_paths, read_checkpoint, read_pinned, split_sha256, write_checkpoint,
)
from evolve.search.config import RunConfig, load_toml, resolve, resolve_features, to_toml
from evolve.search.result import SearchResult
from evolve.search.run_files import ExtraFiles, run_dir_name, write_run

#: How the output directory is named in messages.
OUT_WHAT = "out (where run directories are created)"
#: Suffix of the hidden checkpoint directory of a run in progress.
PARTIAL_SUFFIX = ".partial"


@dataclass
class RunInfo:
    """What :func:`run` wrote: the run directory, the search result and the data provenance.

    ``checkpoint_dir`` is the checkpoint directory kept after a Ctrl-C (None otherwise).
    """

    run_dir: Path
    result: SearchResult
    data: dict[str, Any] = field(default_factory=dict)
    checkpoint_dir: Path | None = None


def load_search_data(cfg: RunConfig) -> tuple[Traces, Traces]:
    """Load and validate the train and valid splits of ``cfg.data`` (the test split is never read).

    Raises: InputError for a missing or invalid dataset (the message says how to create one).
    """
    return load_split(cfg.data, "train"), load_split(cfg.data, "valid")


@pins_released
def run(cfg: RunConfig, progress: Callable[[dict[str, float]], None] | None = None,
        stop: Callable[[], bool] | None = None, extra_files: ExtraFiles | None = None,
        cluster: ClusterOptions | None = None, say: Callable[[str], None] | None = None) -> RunInfo:
    """Load the data, evolve (with checkpoints), and write a new run directory under ``cfg.out``.

    Args:
        cfg: resolved configuration (:func:`evolve.search.config.resolve`).
        progress: called with each generation's logbook row.
        stop: polled between generations (between epochs with islands), e.g. from
            :func:`evolve.search.interrupt.graceful_interrupt`.
        extra_files: more files for the run directory (see :func:`evolve.search.run_files.write_run`).
        cluster: where an island search runs (None: an embedded Dask LocalCluster).
        say: called with a line of progress for the work after the generations (cross-validation's folds).

    Returns: :class:`RunInfo` with the run directory.

    Raises: InputError for bad data or an unusable output directory (checked
    before the search, :func:`evolve.files.guard.check_output_dir`); nothing is written
    in that case. If writing still fails at the end, the run directory is
    written into a rescue directory and the InputError names it
    (:func:`evolve.files.guard.write_or_rescue`).
    """
    out = check_output_dir(cfg.out, (cfg.data, *pinned_paths(cfg)), OUT_WHAT)
    cfg = absolute_inputs(cfg)
    pins = pin_inputs(cfg.to_dict())
    read_pinned(cfg, pins, str(cfg.out), "start the run", "while the run read it")
    train_t, valid_t = load_search_data(cfg)
    cfg.cost_model  # noqa: B018 - a cost file that makes no sense is refused before anything is written
    train, valid = EvalData.from_traces(train_t), EvalData.from_traces(valid_t)
    available = tuple(f for f in train.available if f in valid.available)
    features = resolve_features(cfg, available, cfg.data)
    started = datetime.now(timezone.utc)
    data_info = dataset_info(cfg.data, train_t, valid_t)
    ckpt = _Checkpointed(out, cfg, features, data_info, started, pins)
    partial, lock = _start_checkpoints(ckpt)
    with lock:
        return _search_and_write(replace(ckpt, partial=partial), train, valid, None,
                                 _Caller(progress, stop, extra_files, cluster, say), fresh=True)


def checkpoint_dir_name(cfg: RunConfig, started: datetime) -> str:
    """``.run-YYYYmmdd-HHMMSS-seedN.partial``: the hidden checkpoint directory of a run in progress."""
    return f".{run_dir_name(cfg, started)}{PARTIAL_SUFFIX}"


def _busy(partial: Path) -> Callable[[str], str]:
    """The refusal of a second writer of the checkpoint directory ``partial``, given the holder."""
    return lambda who: (f"{partial}: another process ({who}) is running or resuming this run; a checkpoint has "
                        "one writer at a time (wait for it to end, or stop it and resume again)")


def _start_checkpoints(ckpt: "_Checkpointed") -> tuple[Path, DirectoryLock]:
    """Create the checkpoint directory (unique name) in ``ckpt.partial`` (the output directory here), take its
    lock, and write ``config.toml`` and a checkpoint without state yet. Returns the directory and its lock (held)."""
    out, cfg, started = ckpt.partial, ckpt.cfg, ckpt.started
    base = checkpoint_dir_name(cfg, started)
    lock = None
    try:
        out.mkdir(parents=True, exist_ok=True)
        k = 1
        while True:
            partial = out / (base if k == 1 else f"{base[:-len(PARTIAL_SUFFIX)]}-{k}{PARTIAL_SUFFIX}")
            try:
                partial.mkdir()
                break
            except FileExistsError:
                k += 1
        lock = DirectoryLock(partial, _busy(partial)).acquire()
        atomic_write_text(partial / "config.toml", to_toml(cfg))
        write_checkpoint(partial / CHECKPOINT_FILE, _header(replace(ckpt, partial=partial), None), None)
    except BaseException as exc:
        if lock is not None:
            lock.release()
        if isinstance(exc, OSError):
            raise InputError(f"{OUT_WHAT}: cannot create the checkpoint directory ({os_error_text(exc)})") from None
        raise
    return partial, lock


def _header(ckpt: "_Checkpointed", snapshot: Snapshot | None) -> dict[str, Any]:
    cfg = ckpt.cfg
    head = header(cfg.to_dict(), ckpt.features, ckpt.data_info.get("sha256", {}),
                  ckpt.started.isoformat(timespec="seconds"), snapshot)
    head["data_dir_absolute"] = os.path.abspath(cfg.data)
    if ckpt.pins is not None:
        head["inputs"] = ckpt.pins
    return head


@dataclass(frozen=True)
class _Caller:
    """What the caller of :func:`run` or :func:`resume` gives besides the run: the progress callback, the stop
    poll, the extra files of the run directory, where an island search runs, and ``say``, which gets a line of
    progress for work after the generations (the cross-validation's fold searches)."""

    progress: Callable[[dict[str, float]], None] | None = None
    stop: Callable[[], bool] | None = None
    extra_files: ExtraFiles | None = None
    cluster: ClusterOptions | None = None
    say: Callable[[str], None] | None = None


@dataclass(frozen=True)
class _Checkpointed:
    """A run with its checkpoint directory ``partial``, and what every checkpoint's header records: the
    configuration, the features searched, the dataset's provenance (:func:`dataset_info`), the start time and
    the pinned input files (:func:`evolve.search.checkpoint.pin_inputs`; None for a resumed checkpoint of an
    earlier version, which pinned none)."""

    partial: Path
    cfg: RunConfig
    features: tuple[str, ...]
    data_info: dict[str, Any]
    started: datetime
    pins: dict[str, dict[str, str]] | None = None


def _search_and_write(ckpt: _Checkpointed, train: EvalData, valid: EvalData, snapshot: Snapshot | None,
                      caller: _Caller, fresh: bool = False) -> RunInfo:
    """Search (from ``snapshot`` if given) with a checkpoint after every epoch, then write the run directory.

    ``fresh``: the checkpoint directory was made by this call's caller; it is removed again when the
    search fails before its first checkpoint (a resumed run's directory is always kept).
    """
    partial, cfg, features, data_info, started = ckpt.partial, ckpt.cfg, ckpt.features, ckpt.data_info, ckpt.started
    failed: list[str] = []

    def save(state: Snapshot) -> None:
        try:
            write_checkpoint(partial / CHECKPOINT_FILE, _header(ckpt, state), state)
        except OSError as exc:  # a full disk must not end a long search: warn once, keep going
            if not failed:
                warnings.warn(InputWarning(f"{partial}: checkpoint not written ({os_error_text(exc)}); the run "
                                           "goes on, but cannot be resumed from this point"), stacklevel=2)
            failed.append(str(exc))

    saved: list[int] = []

    def save_and_count(state: Snapshot) -> None:
        save(state)
        saved.append(state.generation)

    kwargs = {"on_generation": caller.progress, "should_stop": caller.stop, "on_epoch": save_and_count,
              "resume": snapshot}
    try:
        if cfg.islands > 1:
            from evolve.search.islands import island_search
            result = island_search(cfg, train, valid, features, data_info.get("sha256", {}), caller.cluster,
                                   **kwargs)
        else:
            result = search(cfg, train, valid, features, **kwargs)
        if cfg.selection == "cv" and not result.interrupted:
            from evolve.search.crossval import cross_validate
            result = cross_validate(result, cfg, train, valid, features, say=caller.say)
    except BaseException:
        if fresh and not saved:  # nothing to resume from: leave no checkpoint directory
            shutil.rmtree(partial, ignore_errors=True)
        raise
    keep = partial if result.interrupted else None
    run_dir = write_or_rescue(lambda d: write_run(result, d, data_info, started, caller.extra_files,
                                                  checkpoint_dir=keep), partial.parent, OUT_WHAT, True)
    if keep is None:
        try:
            os.unlink(partial / CHECKPOINT_FILE)
        except OSError:
            pass
        shutil.rmtree(partial, ignore_errors=True)
    return RunInfo(run_dir, result, data_info, keep)


def find_checkpoint_dir(path: str | os.PathLike) -> Path:
    """The checkpoint directory :func:`resume` continues for ``path``.

    ``path`` may be a checkpoint directory, a run directory of an interrupted
    run (its ``run.json`` names the checkpoint directory), or the output
    directory of the runs when it holds exactly one checkpoint directory.

    Raises: InputError (one line) when there is nothing to resume, or only a
    checkpoint of an older version (a pickle, never loaded).
    """
    p = Path(path)
    if not p.is_dir():
        raise InputError(f"{path}: no such directory")
    if (p / CHECKPOINT_FILE).is_file():
        return p
    if (p / LEGACY_CHECKPOINT_FILE).is_file():
        raise legacy_refusal(p / LEGACY_CHECKPOINT_FILE)
    if (p / "run.json").is_file():
        kept = _kept_checkpoint_dir(p / "run.json")
        if kept is not None and (kept / CHECKPOINT_FILE).is_file():
            return kept
        if kept is not None and (kept / LEGACY_CHECKPOINT_FILE).is_file():
            raise legacy_refusal(kept / LEGACY_CHECKPOINT_FILE)
        raise InputError(f"{path}: the run is complete (no checkpoint left to resume from)")
    found = sorted(q for q in p.glob(f".run-*{PARTIAL_SUFFIX}") if (q / CHECKPOINT_FILE).is_file())
    if len(found) == 1:
        return found[0]
    if found:
        raise InputError(f"{path}: holds {len(found)} stopped runs; name one of them, e.g. {found[-1]}")
    legacy = sorted(q for q in p.glob(f".run-*{PARTIAL_SUFFIX}") if (q / LEGACY_CHECKPOINT_FILE).is_file())
    if legacy:
        raise legacy_refusal(legacy[-1] / LEGACY_CHECKPOINT_FILE)
    raise InputError(f"{path}: no checkpoint to resume from (not a run of `python -m evolve run`, or it finished)")


def _kept_checkpoint_dir(run_json: Path) -> Path | None:
    """The checkpoint directory a run directory's ``run.json`` names (None: it names none)."""
    try:
        doc = json.loads(run_json.read_bytes().decode("utf-8"))
    except OSError as exc:
        raise InputError(f"{run_json}: cannot read ({os_error_text(exc)})") from None
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise InputError(f"{run_json}: not valid JSON (not a run summary of `python -m evolve run`)") from None
    if not isinstance(doc, dict):
        raise InputError(f"{run_json}: not a run summary of `python -m evolve run` (expected a JSON object, found "
                         f"{type(doc).__name__})")
    kept = doc.get("checkpoint_dir")
    if kept is None:
        return None
    if not isinstance(kept, str) or not kept.strip():
        raise InputError(f"{run_json}: field 'checkpoint_dir' must be the path of a checkpoint directory "
                         f"(value {kept!r})")
    return Path(kept)


def resume_config(path: str | os.PathLike) -> RunConfig:
    """The configuration of the run :func:`resume` would continue for ``path`` (its checkpoint's header,
    checked as :func:`resume` checks it). Raises InputError as :func:`resume`."""
    return load_header(find_checkpoint_dir(path) / CHECKPOINT_FILE)[1]


@pins_released
def resume(path: str | os.PathLike, progress: Callable[[dict[str, float]], None] | None = None,
           stop: Callable[[], bool] | None = None, extra_files: ExtraFiles | None = None,
           cluster: ClusterOptions | None = None, data: str | None = None,
           say: Callable[[str], None] | None = None) -> RunInfo:
    """Continue a stopped run from its last checkpoint and write its run directory (next to the checkpoint's).

    Args:
        path: see :func:`find_checkpoint_dir`.
        progress, stop, extra_files, cluster, say: as :func:`run` (the logbook rows
            of the generations already done are passed to ``progress`` first).
        data: the dataset directory, if it moved (default: where the run read it).

    Returns: :class:`RunInfo`; champion and logbook equal those of the run had
    it not stopped.

    Raises: InputError (one line, nothing written) when there is no checkpoint,
    when the checkpoint is damaged or makes no sense (its SHA-256, every field),
    when ``config.toml`` of the checkpoint directory was changed, when a file the
    run pinned (a cost file, a verifier's champion file) changed or vanished, when the data
    differ from the data the run started with (SHA-256) or are gone, when the
    run directory could not be written where it goes (the output guard of
    :func:`run`), or when another process runs or resumes the same run; the
    message gives the reason.
    """
    partial = find_checkpoint_dir(path)
    checkpoint = partial / CHECKPOINT_FILE
    head, cfg = load_header(checkpoint)
    check_pins(head, str(partial))
    if (partial / "config.toml").is_file():
        check_resumable(head, resolve(load_toml(partial / "config.toml")).to_dict(), head["data_sha256"],
                        str(partial))
    if data is not None:
        cfg = replace(cfg, data=str(data))
    elif head.get("data_dir_absolute") and Path(head["data_dir_absolute"]).is_dir():
        cfg = replace(cfg, data=head["data_dir_absolute"])  # where the run read it, whatever the working directory
    check_resume_output(partial, cfg)
    if not Path(cfg.data).is_dir() or any(split_path(cfg.data, s) is None for s in ("train", "valid")):
        raise InputError(f"the run's dataset {cfg.data} is gone (moved or deleted); give its new place to resume "
                         f"{partial} (its train and valid files must be those the run started with: their SHA-256 "
                         "is checked)", param="data")
    read_pinned(cfg, head.get("inputs"), str(partial), "resume", "since the run started")
    train_t, valid_t = load_search_data(cfg)
    data_info = dataset_info(cfg.data, train_t, valid_t)
    check_resumable(head, cfg.to_dict(), data_info["sha256"], str(partial))
    _, snapshot = read_checkpoint(checkpoint)
    train, valid = EvalData.from_traces(train_t), EvalData.from_traces(valid_t)
    features = tuple(head["features"])
    started = datetime.fromisoformat(head["created"])
    with _lock_checkpoint(partial, head):
        return _search_and_write(_Checkpointed(partial, cfg, features, data_info, started, head.get("inputs")),
                                 train, valid, snapshot, _Caller(progress, stop, extra_files, cluster, say))


def check_resume_output(partial: Path, cfg: RunConfig) -> Path:
    """The directory a resume of the checkpoint directory ``partial`` writes its run directory into (the one
    holding ``partial``), checked as ``run`` checks ``out`` (:func:`evolve.files.guard.check_output_dir`); a
    dataset directory is refused too. Raises InputError."""
    out = check_output_dir(partial.parent, (cfg.data,), OUT_WHAT)
    if is_dataset_dir(out):
        raise InputError(f"{OUT_WHAT}: {out} is a dataset directory, not a place for run directories (was the "
                         f"checkpoint directory {partial.name} moved into it?)")
    return out


def _lock_checkpoint(partial: Path, head: dict[str, Any]) -> DirectoryLock:
    """The lock of the checkpoint directory ``partial``, taken, with the checkpoint still the one read (``head``)."""
    try:
        lock = DirectoryLock(partial, _busy(partial)).acquire()
    except OSError as exc:
        if not (partial / CHECKPOINT_FILE).is_file():
            raise InputError(f"{partial}: no checkpoint any more (the run finished meanwhile)") from None
        raise InputError(f"{partial}: cannot lock the checkpoint directory ({os_error_text(exc)})") from None
    try:
        if load_header(partial / CHECKPOINT_FILE)[0]["sha256"] != head["sha256"]:
            raise InputError(f"{partial}: the checkpoint changed while it was being read (another process wrote "
                             "it meanwhile); resume again")
    except BaseException:
        lock.release()
        raise
    return lock


def checkpoint_status(path: str | os.PathLike) -> str | None:
    """One line on a stopped run whose checkpoint directory is ``path`` (None if ``path`` holds no checkpoint).

    Used by ``python -m evolve show`` on a directory without a champion.
    """
    p = Path(path)
    if (p / LEGACY_CHECKPOINT_FILE).is_file() and not (p / CHECKPOINT_FILE).is_file():
        return str(legacy_refusal(p / LEGACY_CHECKPOINT_FILE))
    if not (p / CHECKPOINT_FILE).is_file():
        return None
    try:
        head = load_header(p / CHECKPOINT_FILE)[0]
    except InputError as exc:
        return str(exc)
    gen, total = head.get("generation"), head.get("generations")
    done = "before its first checkpoint" if gen is None else f"after generation {gen} of {total}"
    return (f"{path}: no champion yet (the run stopped {done}); `python -m evolve resume {path}` continues it")


def dataset_info(data_dir: str, train: Traces, valid: Traces) -> dict[str, Any]:
    """Provenance of the data a run read: directory, generator metadata, tokens and SHA-256 file digests (a tree
    table's digest pinned for the run: :func:`evolve.search.checkpoint.split_sha256`)."""
    meta = train.metadata or {}
    info: dict[str, Any] = {"dir": str(data_dir)}
    for key in ("generator", "generator_version", "seed", "schema_version", "format"):
        if key in meta:
            info[key] = meta[key]
    if "config" in meta:
        info["generator_config"] = meta["config"]
    info["tokens"] = {"train": train.n, "valid": valid.n}
    info["sha256"] = {t.split: split_sha256(t.source, t.split, t.sha256, pin=True) for t in (train, valid)}
    return info


__all__ = ["RunInfo", "OUT_WHAT", "PARTIAL_SUFFIX", "run", "resume", "resume_config", "find_checkpoint_dir",
           "check_resume_output", "checkpoint_status", "checkpoint_dir_name", "load_search_data", "dataset_info"]
