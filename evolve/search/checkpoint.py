"""Checkpoints of a search: what is saved between two epochs, and the file that holds it.

A search is cut into epochs of ``migration_interval`` generations. After each
epoch the run's checkpoint directory gets ``checkpoint.json`` (:data:`CHECKPOINT_FILE`),
replaced atomically (written under a temporary name, then renamed; a process
killed at any point, ``kill -9`` included, leaves the previous checkpoint or
the new one, never a mix). It holds a :class:`Snapshot` (:mod:`evolve.search.snapshot`):

* every island's population with its fitness values (and NSGA-II crowding
  distances), its hall of fame, the generation reached and the states of
  Python's ``random`` and numpy's global generator (:class:`Island`);
* the logbook so far, the evaluation counts and the wall time so far;
* the warm start (the seeded rules are rebuilt from it);
* for a one-population search, the evaluators' remembered metrics, so that
  the resumed run counts ``new_programs`` exactly as the uninterrupted one.

File layout: a first line ``specdec-evolve checkpoint 2`` (:data:`MAGIC`), a
second line of JSON, the header (:func:`header`: the resolved configuration,
the features, the SHA-256 of the train and valid files, the time the run
started, the generation reached, the payload's size, and ``sha256``), then the
payload: the snapshot as JSON data (:func:`evolve.search.snapshot.snapshot_to_data`;
empty before the first epoch). Data only: nothing in a checkpoint is a pickle
or code, so loading one runs nothing, whoever wrote it.

A checkpoint proves itself: ``sha256`` is the SHA-256 of the whole file with
that field's value replaced by 64 zeros, so one hash covers the header and the
payload, and any changed, added or removed byte is refused. Then every field
is checked by type and by sense before anything runs (:func:`load_header`,
:func:`read_checkpoint`: the configuration must resolve, the features must be
known ones, the generation at most the run's generations, the logbook one row
per generation, every island of the configured population...), each failure
one line that names the field. A resume also compares the header with the
run's ``config.toml`` and data (:func:`check_resumable`).

The files a run reads are pinned when the run starts: the dataset's train and valid files by ``data_sha256``
(taken from the very bytes the run parsed), the files named by the settings of :data:`PINNED_SETTINGS` (a cost
file, a verifier's champion file) by ``inputs``: the absolute path (the configuration holds it too, so a resume
from another working directory reads the same file) and its SHA-256 (:func:`pin_inputs`). A resume refuses in
one line naming the file when it is gone or changed (:func:`check_pins`). Checkpoints written before the pins
existed have no ``inputs`` and resume as they did. A promoted champion given to ``verify_with`` by its name is
pinned by the file the name resolves to (a resume that resolves it to another file, or finds it changed, is
refused). The pins hold within the run's processes too (:mod:`evolve.files.pins`): the cost file and a
tree-shape run's tree tables, read again after the run recorded their digests (by the cost model's cache, by
every scorer built, by island workers), must have the recorded content, or the read is refused in one line
naming the file.

A checkpoint of format 1 (``checkpoint.pkl``, a Python pickle, written by
older versions) is refused without being loaded (:func:`legacy_refusal`).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from datetime import datetime
from pathlib import Path
from typing import Any

from evolve.errors import InputError
from evolve.files.digest import same_digest, sha256_file
from evolve.gp.primitives import CORE_FEATURES, FEATURES
from evolve.search.config import DEFAULTS, RunConfig, kind_setting_fields, resolve, upgrade_legacy
from evolve.search.snapshot import Island, Snapshot, snapshot_from_data, snapshot_to_data
from evolve.files.atomic import atomic_write_bytes
from evolve.files.pins import pin as pin_file, pinned as pinned_file

#: File name of the checkpoint inside a checkpoint directory.
CHECKPOINT_FILE = "checkpoint.json"
#: File name of the checkpoints of older versions (format 1, a pickle: refused, never loaded).
LEGACY_CHECKPOINT_FILE = "checkpoint.pkl"
#: First line of a checkpoint file (the number is the format version).
MAGIC = b"specdec-evolve checkpoint 2\n"
#: What every checkpoint's first line starts with, whatever its version.
MAGIC_PREFIX = b"specdec-evolve checkpoint "
#: Configuration keys that may differ between a checkpoint and a resume: where results go, and where the
#: data are read (a moved dataset is fine; its files must have the same SHA-256).
EXECUTION_KEYS: tuple[str, ...] = ("out", "data")
#: The header field holding the file's SHA-256 (computed with its value replaced by :data:`_BLANK`).
DIGEST_FIELD = "sha256"
#: Header fields: every checkpoint has these; ``data_dir_absolute`` and ``inputs`` (the pinned input files,
#: :func:`pin_inputs`; absent in checkpoints of earlier versions) are optional.
HEADER_FIELDS: tuple[str, ...] = ("config", "features", "data_sha256", "created", "generation", "generations",
                                  "interrupted", "payload_bytes", DIGEST_FIELD)
OPTIONAL_HEADER_FIELDS: tuple[str, ...] = ("data_dir_absolute", "inputs")
#: Settings whose value may name a file the run reads (besides the dataset, pinned by ``data_sha256``), and how
#: the file is named in messages: the cost file, and the kinds' own settings that name a rule (a champion file, or a
#: promoted champion's name; :func:`evolve.kinds.base.kind_setting` ``reads_file``).
PINNED_SETTINGS: dict[str, str] = {"costs": "cost file", **{name: f.metadata["reads_file"] for name, f in
                                                           kind_setting_fields().items() if f.metadata["reads_file"]}}
#: How the ``source`` of a promoted champion's rule names its file (:meth:`heuristics.champions.Champion.rule`).
CHAMPION_SOURCE = "champion file "
_BLANK = "0" * 64
_HEX64 = re.compile(r"[0-9a-f]{64}")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _loads(raw: bytes) -> Any:
    """Strict JSON (``NaN`` and ``Infinity`` are refused: a checkpoint writes non-finite numbers as strings)."""
    return json.loads(raw, parse_constant=_no_constant)


def file_sha256(path: str | os.PathLike) -> str | None:
    """SHA-256 (hex) of a file's bytes, or None when it cannot be read."""
    try:
        return sha256_file(path)
    except OSError:
        return None


def split_sha256(path: str | os.PathLike, split: str, records_sha256: str | None = None,
                 pin: bool = False) -> str | None:
    """The digest a run records for a split: :func:`file_sha256` of its records file, or, when the dataset holds
    the split's tree table (``DIR/{split}.trees.parquet``, read by tree-shape runs), SHA-256 of the two files'
    digests, so that a changed tree table is a changed split. None when a file cannot be read.

    ``records_sha256``: the records file's digest taken from the bytes that were parsed
    (:attr:`evolve.traces.io.Traces.sha256`); the file is then not read again. ``pin``: a run records the digest,
    so the tree table's is pinned in this process (:func:`evolve.files.pins.pin`):
    :func:`evolve.traces.tree_tables.load_trees` then refuses a table whose bytes have another digest, so the table
    scored is the one this digest records."""
    from evolve.traces.tree_tables import tree_path

    digest = file_sha256(path) if records_sha256 is None else records_sha256
    trees = tree_path(Path(path).parent, split)
    if digest is None or not trees.is_file():
        return digest
    other = file_sha256(trees)
    if other is None:
        return None
    if pin:
        pin_file(trees, other)  # the table a tree-shape scorer parses later in this process must be this one
    return hashlib.sha256(f"{digest} {other}".encode()).hexdigest()


def read_pinned(cfg: RunConfig, pins: dict[str, dict[str, str]] | None, where: str, action: str, since: str) -> None:
    """Read the files ``pins`` names through ``cfg`` (the cost model, the verifier), then check that they still
    hold the pinned bytes (:func:`evolve.search.checkpoint.check_pins`): the content the search scores with is
    the pinned one (the cost model is then served from its cache while the file stays as it is). Raises
    InputError naming a file that changed or vanished."""
    if not pins:
        return
    for pin in pins.values():
        pin_file(pin["path"], pin["sha256"])  # a later read of other bytes in this process is refused
    if "costs" in pins:
        cfg.cost_model  # noqa: B018 - read (and cached) now, between the two digests
    for key in (k for k in pins if k != "costs"):  # a kind's setting naming a rule: read (and resolved) now
        getattr(cfg.settings, "check", lambda: None)()
        now = pinned_path(key, cfg.setting(key))
        if now != pins[key]["path"]:
            role = PINNED_SETTINGS[key].split("'")[0]  # "verifier's champion file": the verifier
            raise InputError(f"{where}: cannot {action}: the {role} '{cfg.setting(key)}' (setting '{key}') is now "
                             f"{now or 'no champion file'}, but the run read {pins[key]['path']}")
    check_pins({"inputs": pins}, where, action, since)


def pinned_paths(cfg: RunConfig) -> list[str]:
    """The files the settings of ``cfg`` name (a cost file, a verifier's champion file), absolute."""
    return [p for key in PINNED_SETTINGS if (p := pinned_path(key, cfg.setting(key))) is not None]


def absolute_inputs(cfg: RunConfig) -> RunConfig:
    """``cfg`` with every setting that names a file (:data:`evolve.search.checkpoint.PINNED_SETTINGS`) given as an
    absolute path, so that the run directory, the checkpoints and a resume from any working directory name the
    file the run read."""
    changes = {key: p for key in PINNED_SETTINGS if (p := setting_file(key, cfg.setting(key))) is not None}
    return cfg.replacing(**changes) if changes else cfg


def header(config: dict[str, Any], features: tuple[str, ...], data_sha256: dict[str, Any], created: str,
           snapshot: Snapshot | None) -> dict[str, Any]:
    """The JSON header of a checkpoint (without the fields :func:`write_checkpoint` adds: the payload's size and
    the digest).

    Args:
        config: the resolved configuration (``RunConfig.to_dict()``).
        features: the run's terminal features.
        data_sha256: {"train": hex digest, "valid": hex digest} of the split files (:func:`split_sha256`).
        created: ISO time at which the run started (UTC).
        snapshot: the state saved (None: the run has started, no epoch is done yet).
    """
    return {"config": config, "features": list(features), "data_sha256": data_sha256, "created": created,
            "generation": None if snapshot is None else snapshot.generation,
            "generations": config.get("generations"),
            "interrupted": False if snapshot is None else snapshot.interrupted}


def _json(value: Any, sort: bool) -> bytes:
    return json.dumps(value, sort_keys=sort, separators=(",", ":"), allow_nan=False, ensure_ascii=True).encode("ascii")


def _digest_field(value: str) -> bytes:
    return f'"{DIGEST_FIELD}":"{value}"'.encode("ascii")


def write_checkpoint(path: str | os.PathLike, head: dict[str, Any], snapshot: Snapshot | None) -> None:
    """Atomically replace the checkpoint file ``path`` with ``head`` and ``snapshot`` as JSON (see the module doc)."""
    payload = b"" if snapshot is None else _json(snapshot_to_data(snapshot), sort=False)
    line = _json({**head, "payload_bytes": len(payload), DIGEST_FIELD: _BLANK}, sort=True)
    digest = hashlib.sha256(MAGIC + line + b"\n" + payload).hexdigest()
    line = line.replace(_digest_field(_BLANK), _digest_field(digest))
    atomic_write_bytes(path, MAGIC + line + b"\n" + payload)


def legacy_refusal(path: str | os.PathLike) -> InputError:
    """The refusal of a checkpoint of format 1 (a pickle written by an older version), which is never loaded."""
    return InputError(f"{path}: a checkpoint written by an older version of specdec-evolve (a Python pickle, which "
                      "could run code when loaded); it cannot be resumed safely: start the run again")


def _split(path: Path) -> tuple[dict[str, Any], bytes]:
    """(header, payload) of the file, its SHA-256 checked (nothing else is)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{path}: no checkpoint (not a run directory of `python -m evolve run`, or a run "
                         "that finished)") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read the checkpoint ({' '.join(str(exc).split())})") from None
    if not raw.startswith(MAGIC):
        if raw.startswith(MAGIC_PREFIX + b"1\n"):
            raise legacy_refusal(path)
        if raw.startswith(MAGIC_PREFIX):
            first = raw.split(b"\n", 1)[0][:60]
            raise InputError(f"{path}: a checkpoint of another version of specdec-evolve (first line {first!r}; "
                             f"this version reads {MAGIC.strip()!r})")
        raise InputError(f"{path}: not a checkpoint of this program (first line {raw[:40]!r})")
    end = raw.find(b"\n", len(MAGIC))
    line = raw[len(MAGIC):end] if end >= 0 else b""
    try:
        head = _loads(line) if end >= 0 else None
    except (ValueError, UnicodeDecodeError, RecursionError):
        head = None
    if not isinstance(head, dict):
        raise InputError(f"{path}: the checkpoint header is not valid JSON (truncated or altered)")
    digest = head.get(DIGEST_FIELD)
    if not isinstance(digest, str) or not _HEX64.fullmatch(digest) or line.count(_digest_field(digest)) != 1:
        raise InputError(f"{path}: the checkpoint has no valid SHA-256 (field '{DIGEST_FIELD}'; truncated or altered)")
    payload = raw[end + 1:]
    if hashlib.sha256(MAGIC + line.replace(_digest_field(digest), _digest_field(_BLANK)) + b"\n"
                      + payload).hexdigest() != digest:
        raise InputError(f"{path}: the checkpoint does not match its SHA-256 (truncated or altered)")
    return head, payload


def _fail(where: str, field: str, text: str) -> InputError:
    return InputError(f"{where}: the checkpoint's field '{field}' {text}")


def _config(head: dict[str, Any], where: str) -> RunConfig:
    """The run configuration of a header (keys of older versions renamed, settings added since given their
    defaults). A value that does not resolve is reported as a bad checkpoint, never as an option."""
    config = head["config"]
    if not isinstance(config, dict):
        raise _fail(where, "config", "must be a JSON object")
    try:
        values = upgrade_legacy(config)
        for key, value in values.items():
            if value is None:
                raise InputError("is null", param=key)
        cfg = resolve({**DEFAULTS.to_dict(), **values})
    except InputError as exc:
        text = f"key '{exc.param}': {exc.message}" if exc.param is not None else exc.message
        raise InputError(f"{where}: the checkpoint's configuration is not valid: {text}") from None
    head["config"] = {**DEFAULTS.to_dict(), **values}
    return cfg


def _check_features(value: Any, cfg: RunConfig, where: str) -> None:
    if not isinstance(value, list) or not value:
        raise _fail(where, "features", f"must be a non-empty list of feature names (value {value!r})")
    for f in value:
        if not isinstance(f, str) or f not in FEATURES:
            raise _fail(where, "features", f"names an unknown feature {f!r} (known: {', '.join(FEATURES)})")
    if len(set(value)) != len(value) or value != [f for f in FEATURES if f in value]:
        raise _fail(where, "features", f"must list distinct features in the order {', '.join(FEATURES)} "
                                       f"(value {value!r})")
    kind = cfg.program_kind
    bad = [f for f in value if f in kind.excluded_features]
    if bad:
        raise _fail(where, "features", f"holds '{bad[0]}', which a {kind.title} may not read")
    if cfg.features != "auto" and tuple(value) != tuple(cfg.features):
        raise _fail(where, "features", f"is {value}, but the configuration's features are {list(cfg.features)}")
    missing = [f for f in CORE_FEATURES if f not in value and f not in kind.excluded_features]
    if cfg.features == "auto" and missing:
        raise _fail(where, "features", f"lacks '{missing[0]}', which the configuration's features \"auto\" "
                                       "always include")


def check_header(head: dict[str, Any], payload: bytes, where: str) -> RunConfig:
    """Check every header field by type and by sense; returns the run's configuration.

    ``head["config"]`` is replaced by the upgraded configuration (keys of older versions renamed,
    settings added since given their defaults). Raises InputError naming the field.
    """
    extra = sorted(set(head) - set(HEADER_FIELDS) - set(OPTIONAL_HEADER_FIELDS))
    if extra:
        raise _fail(where, extra[0], "is not a field of a checkpoint header")
    missing = [k for k in HEADER_FIELDS if k not in head]
    if missing:
        raise _fail(where, missing[0], "is missing")
    cfg = _config(head, where)
    _check_features(head["features"], cfg, where)
    sha = head["data_sha256"]
    if not isinstance(sha, dict) or sorted(sha) != ["train", "valid"]:
        raise _fail(where, "data_sha256", "must be an object with the keys train and valid")
    for split in ("train", "valid"):
        if not isinstance(sha[split], str) or not _HEX64.fullmatch(sha[split]):
            raise _fail(where, f"data_sha256.{split}", f"must be a SHA-256 in hex (value {sha[split]!r})")
    created = head["created"]
    try:
        datetime.fromisoformat(created)
    except (TypeError, ValueError):
        raise _fail(where, "created", f"must be an ISO date and time (value {created!r})") from None
    generations = head["generations"]
    if isinstance(generations, bool) or not isinstance(generations, int) or generations != cfg.generations:
        raise _fail(where, "generations", f"is {generations!r}, but the configuration's generations are "
                                          f"{cfg.generations}")
    gen = head["generation"]
    if gen is not None:
        if isinstance(gen, bool) or not isinstance(gen, int):
            raise _fail(where, "generation", f"must be an integer or null (value {gen!r})")
        if not 0 <= gen <= cfg.generations:
            raise _fail(where, "generation", f"is {gen}, but the run has {cfg.generations} generations")
    if not isinstance(head["interrupted"], bool) or (gen is None and head["interrupted"]):
        raise _fail(where, "interrupted", f"must be true or false, and false before the first checkpoint "
                                          f"(value {head['interrupted']!r})")
    size = head["payload_bytes"]
    if isinstance(size, bool) or not isinstance(size, int) or size != len(payload):
        raise _fail(where, "payload_bytes", f"is {size!r}, but the payload has {len(payload)} bytes")
    if (gen is None) != (size == 0):
        raise _fail(where, "generation", f"is {gen!r}, but the payload is {'empty' if size == 0 else 'not empty'}")
    absolute = head.get("data_dir_absolute")
    if absolute is not None and (not isinstance(absolute, str) or not absolute.strip()):
        raise _fail(where, "data_dir_absolute", f"must be a path (value {absolute!r})")
    if "inputs" in head:
        _check_pins(head["inputs"], head["config"], where)
    return cfg


def _check_pins(pins: Any, config: dict[str, Any], where: str) -> None:
    """The ``inputs`` field: {setting: {"path": absolute path, "sha256": hex}}, each path the setting's value."""
    if not isinstance(pins, dict):
        raise _fail(where, "inputs", f"must be an object (value {pins!r})")
    for key, pin in pins.items():
        if key not in PINNED_SETTINGS:
            raise _fail(where, f"inputs.{key}", f"is not a setting naming a file ({', '.join(PINNED_SETTINGS)})")
        if not isinstance(pin, dict) or sorted(pin) != ["path", "sha256"]:
            raise _fail(where, f"inputs.{key}", "must be an object with the keys path and sha256")
        path, digest = pin["path"], pin["sha256"]
        named = setting_file(key, config.get(key)) is not None  # else a promoted champion's name
        if not isinstance(path, str) or not os.path.isabs(path) or (named and path != config.get(key)):
            raise _fail(where, f"inputs.{key}.path", f"must be the absolute path the configuration's {key} names "
                                                     f"(value {path!r}, configuration {config.get(key)!r})")
        if not isinstance(digest, str) or not _HEX64.fullmatch(digest):
            raise _fail(where, f"inputs.{key}.sha256", f"must be a SHA-256 in hex (value {digest!r})")


def setting_file(key: str, value: Any) -> str | None:
    """The file that the setting ``key`` of value ``value`` gives as a path, absolute, or None when it gives none
    (the built-in cost model ``default``, a rule name, a setting not in :data:`PINNED_SETTINGS`)."""
    if key not in PINNED_SETTINGS or not isinstance(value, str):
        return None
    if key == "costs" and value != "default":
        return os.path.abspath(value)
    if key != "costs" and value.endswith(".json"):  # a rule's champion file (heuristics.verifiers.verifier_parts)
        return os.path.abspath(value)
    return None


def pinned_path(key: str, value: Any) -> str | None:
    """The file that the setting ``key`` of value ``value`` makes a run read, as an absolute path, or None when it
    reads none: :func:`setting_file`, or for a kind's setting that names a promoted champion (not a path) the
    champion file the name resolves to now (:func:`heuristics.registry.get_rule`; None for a built-in rule or a
    name that resolves to nothing, which the configuration refuses)."""
    path = setting_file(key, value)
    if path is not None or key == "costs" or not isinstance(value, str):
        return path
    from heuristics.length_policies import BLOCK_VERIFIER_NAME, STANDARD_VERIFIER_NAME
    from heuristics.registry import get_rule

    if value in (STANDARD_VERIFIER_NAME, BLOCK_VERIFIER_NAME):
        return None
    try:
        source = get_rule(value, champions=True).source
    except InputError:
        return None
    return os.path.abspath(source[len(CHAMPION_SOURCE):]) if source.startswith(CHAMPION_SOURCE) else None


def held_pins(cfg: RunConfig) -> dict[str, dict[str, str]]:
    """The ``inputs`` field of the files the settings of ``cfg`` name, as this process pinned them when the run
    started or resumed (:func:`read_pinned`; a file not pinned here is left out)."""
    held: dict[str, dict[str, str]] = {}
    for key in PINNED_SETTINGS:
        path = pinned_path(key, cfg.setting(key))
        if path is not None and (digest := pinned_file(path)) is not None:
            held[key] = {"path": path, "sha256": digest}
    return held


def pin_inputs(config: dict[str, Any]) -> dict[str, dict[str, str]]:
    """The ``inputs`` field of a run's checkpoints: {setting: {"path", "sha256"}} of every file a setting of
    ``config`` (``RunConfig.to_dict()``, its paths made absolute) names, read now.

    Raises: InputError naming the setting's file when it cannot be read.
    """
    pins: dict[str, dict[str, str]] = {}
    for key, what in PINNED_SETTINGS.items():
        path = pinned_path(key, config.get(key))
        if path is None:
            continue
        digest = file_sha256(path)
        if digest is None:
            raise InputError(f"{path}: cannot read the {what}", param=key)
        pins[key] = {"path": path, "sha256": digest}
    return pins


def check_pins(head: dict[str, Any], where: str, action: str = "resume", since: str = "since the run started") -> None:
    """Refuse (InputError, one line naming the file) a resume when a file the run pinned at its start (the header's
    ``inputs``) is gone or its content changed. A checkpoint of an earlier version pins nothing.

    ``action`` and ``since`` word the refusal (``where: cannot ACTION: the cost file F ... changed SINCE``); a run
    checks its pins again after it has read the files (``start the run``, ``while the run read it``)."""
    for key, pin in (head.get("inputs") or {}).items():
        what = PINNED_SETTINGS[key]
        digest = file_sha256(pin["path"])
        if digest is None:
            raise InputError(f"{where}: cannot {action}: the {what} {pin['path']} (setting '{key}') the run read "
                             "is gone or unreadable")
        if not same_digest(pin["sha256"], digest):
            raise InputError(f"{where}: cannot {action}: the {what} {pin['path']} (setting '{key}') changed {since} "
                             f"(SHA-256 {digest[:12]}..., pinned {pin['sha256'][:12]}...)")


def load_header(path: str | os.PathLike) -> tuple[dict[str, Any], RunConfig]:
    """(header, configuration) of the checkpoint file ``path``: its SHA-256 and every header field checked
    (the payload is not decoded). Raises InputError (one line) for a missing, damaged or unusable file."""
    path = Path(path)
    head, payload = _split(path)
    return head, check_header(head, payload, str(path))


def read_header(path: str | os.PathLike) -> dict[str, Any]:
    """The checked JSON header of the checkpoint file ``path`` (:func:`load_header`). Raises InputError."""
    return load_header(path)[0]


def read_checkpoint(path: str | os.PathLike) -> tuple[dict[str, Any], Snapshot | None]:
    """(header, snapshot) of the checkpoint file ``path``; the snapshot is None before the first epoch.

    Nothing is unpickled or evaluated: the payload is JSON data, checked field by field against the
    header's configuration (:func:`evolve.search.snapshot.snapshot_from_data`).

    Raises: InputError for a missing, unreadable, truncated or altered file, or a field of the wrong
    type or out of sense (the message names it).
    """
    path = Path(path)
    head, payload = _split(path)
    cfg = check_header(head, payload, str(path))
    if not payload:
        return head, None
    try:
        data = _loads(payload)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise InputError(f"{path}: the checkpoint payload is not valid JSON ({' '.join(str(exc).split())[:200]})") \
            from None
    snapshot = snapshot_from_data(data, cfg, tuple(head["features"]), head["generation"], str(path), head["created"])
    if snapshot.interrupted != head["interrupted"]:
        raise _fail(str(path), "interrupted", f"is {str(snapshot.interrupted).lower()} in the payload but "
                                              f"{str(head['interrupted']).lower()} in the header")
    return head, snapshot


def check_resumable(head: dict[str, Any], config: dict[str, Any], data_sha256: dict[str, Any], where: str) -> None:
    """Refuse (InputError naming the first difference) a resume whose settings or data differ from the checkpoint.

    Args:
        head: the checkpoint header (:func:`read_header`).
        config: the configuration the resume would use (``RunConfig.to_dict()``).
        data_sha256: SHA-256 of the train and valid files the resume would read.
        where: how the run directory is named in messages.
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


__all__ = ["CHECKPOINT_FILE", "LEGACY_CHECKPOINT_FILE", "MAGIC", "EXECUTION_KEYS", "HEADER_FIELDS", "Island",
           "Snapshot", "PINNED_SETTINGS", "file_sha256", "split_sha256", "setting_file", "pinned_path", "pinned_paths", "held_pins", "pin_inputs", "check_pins", "absolute_inputs", "read_pinned", "header", "write_checkpoint", "legacy_refusal", "check_header", "load_header",
           "read_header", "read_checkpoint", "check_resumable"]
