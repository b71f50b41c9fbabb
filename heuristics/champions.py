"""Champion files: evolved rules saved as data, loaded without eval or exec.

A champion is ``NAME.json`` (the source of truth) plus a generated, readable
``NAME.py`` (the same rule as a Numba-compilable function with the contract's
signature, :mod:`heuristics.contract`; never read back). Champions live in ``heuristics/champions/`` unless
the environment variable ``SPECDEC_CHAMPIONS_DIR`` names another directory
(tests use that so they never write into the repository).

``NAME.json`` is a JSON object with exactly these keys::

    format                 "specdec-evolve champion"
    format_version         2
    name                   NAME, [A-Za-z_][A-Za-z0-9_]* (at most 64 characters)
    description            one line of text
    kind                   the kind of program: the name of a registered ProgramKind (evolve.kinds.registry;
                           built in: "threshold", "relaxation", "verify-length", "tree-shape"), which says
                           what the expression's value means
    expression             prefix notation over the primitive set, e.g. "min(1.0, div(target_prob, draft_prob))"
    primitive_set_version  evolve.gp.primitives.PRIMITIVE_SET_VERSION the expression was evolved with
    features               terminal features of the run (names from evolve.gp.primitives.FEATURES)
    objective              the objective the run optimised ("acceptance_quality", "expected", "speed_at_tv",
                           "pareto", or the name of one registered from Python)
    metrics                {"train": {...}, "valid": {...}}: the run's metrics of the program (numbers; null
                           for a metric that was not computed; "fitness" is required for a threshold)
    provenance             run directory, seed, data directory and generator metadata, full config,
                           creation date, package versions (free-form JSON object)

Files of format version 1 (no ``kind``; ``fitness`` in place of ``objective``) still load: their kind
is read from the run configuration in their provenance (:func:`evolve.kinds.registry.kind_from_config`:
``verify = "block"`` meant relaxation weights).

Loading checks every key and type, the primitive-set version, and parses the
expression with :func:`evolve.gp.compiler.parse` against the declared features: a
name that is not a primitive or one of those features, any other character
(attribute access, lambda, ``__import__``...), or an expression beyond the
parser's size limits is refused with one line naming the file.

Names must be valid Python identifiers that are not reserved: no keyword
(``class``), no dunder name (``__init__.py`` would turn the champions directory
into a package shadowing this module), no built-in rule's name. Saving never
writes into the package's source outside the champions directory, never into a
run directory it reads from, and never replaces a ``NAME.py`` that is not a
generated champion file; a champions directory that does not exist is read as
empty with an :class:`evolve.errors.InputWarning`.
"""
from __future__ import annotations

import json
import keyword
import math
import os
import re
import warnings
import dataclasses
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from evolve.errors import InputError, InputWarning, json_type, os_error_text, printable
from evolve.files.atomic import atomic_write_text
from evolve.files.guard import check_output_dir
from evolve.gp.compiler import Node, parse, to_string
from evolve.kinds.base import ProgramKind
from evolve.kinds.registry import DEFAULT_KIND, kind_from_config, program_kind

from evolve.gp.primitives import FEATURES, PRIMITIVE_SET_VERSION, READABLE_VERSIONS, VERSION_FEATURES
from heuristics.baselines import BASELINES
from heuristics.contract import Rule, python_source
from heuristics.published import PUBLISHED

FORMAT = "specdec-evolve champion"
FORMAT_VERSION = 2
#: Format versions :func:`read_champion` reads.
READ_VERSIONS: tuple[int, ...] = (1, 2)
#: What an objective's name looks like (registered objectives live in :mod:`evolve.eval.objectives`).
OBJECTIVE_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
#: Environment variable overriding the champions directory.
ENV_DIR = "SPECDEC_CHAMPIONS_DIR"
#: Names a champion may not take: the built-in rules (the baselines and the published families'
#: defaults, the rules :mod:`heuristics.registry` registers before any champion).
RESERVED_NAMES: frozenset[str] = frozenset(r.name for r in (*BASELINES, *PUBLISHED))
#: Largest champion file read, in bytes.
MAX_FILE_BYTES = 1_000_000
NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_KEYS: dict[str, type | tuple[type, ...]] = {
    "format": str, "format_version": int, "name": str, "description": str, "kind": str, "expression": str,
    "primitive_set_version": int, "features": list, "objective": str, "metrics": dict, "provenance": dict,
}
#: The keys of a version-1 file.
_KEYS_V1: dict[str, type | tuple[type, ...]] = {
    **{k: v for k, v in _KEYS.items() if k not in ("kind", "objective")}, "fitness": str}


class ChampionExists(InputError):
    """Saving would replace an existing champion and overwriting was not asked for (the command line
    names its option for that). ``path``: the existing file; ``name``: the champion's name."""

    def __init__(self, path: Path, name: str):
        super().__init__(f"{path}: a champion named {name!r} exists already (not replaced unless asked to "
                         f"overwrite it)")
        self.path, self.name = path, name


@dataclass
class Champion:
    """The contents of a champion file (see the module doc).

    ``metrics`` maps split name (``train``, ``valid``) to {metric: number};
    ``path`` is the file it was read from (None if built in memory).
    """

    name: str
    expression: str
    description: str = ""
    features: tuple[str, ...] = ()
    objective: str = "acceptance_quality"
    kind: str = DEFAULT_KIND.name
    metrics: dict[str, dict[str, float]] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)
    primitive_set_version: int = PRIMITIVE_SET_VERSION
    path: str | None = None

    @property
    def nodes(self) -> list[Node]:
        """Prefix nodes of the expression (parsed safely)."""
        return parse(self.expression, self.path or f"champion {self.name}", tuple(self.features) or FEATURES)

    @property
    def program_kind(self) -> ProgramKind:
        """The champion's :class:`evolve.kinds.base.ProgramKind`."""
        return program_kind(self.kind)

    @property
    def settings(self) -> tuple[tuple[str, str], ...]:
        """The kind's own run settings its run set to other than their defaults (the run configuration in the
        provenance, :attr:`evolve.kinds.base.ProgramKind.setting_names`), as (name, value) pairs:
        :attr:`heuristics.contract.Rule.settings`."""
        config = (self.provenance or {}).get("config") or {}
        defaults = {f.name: f.default for f in dataclasses.fields(self.program_kind.settings)}
        return tuple((name, config[name]) for name in self.program_kind.setting_names
                     if isinstance(config.get(name), str) and config[name] != defaults[name])

    def rule(self) -> Rule:
        """The champion as an expression :class:`heuristics.contract.Rule` of its kind (not registered)."""
        return Rule(self.name, self.description, f"champion file {self.path}" if self.path else "evolved champion",
                    expression=self.expression, kind=self.kind, settings=self.settings)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of the file format (keys in the documented order)."""
        return {
            "format": FORMAT, "format_version": FORMAT_VERSION, "name": self.name,
            "description": self.description, "kind": self.kind, "expression": self.expression,
            "primitive_set_version": self.primitive_set_version, "features": list(self.features),
            "objective": self.objective, "metrics": self.metrics, "provenance": self.provenance,
        }


#: The champions directory of the package (``heuristics/champions/``).
PACKAGE_DIR = Path(__file__).resolve().parent / "champions"


def champions_dir() -> Path:
    """The champions directory: ``$SPECDEC_CHAMPIONS_DIR`` if set, else ``heuristics/champions/``."""
    env = os.environ.get(ENV_DIR)
    return Path(env) if env else PACKAGE_DIR


def champion_json(champion: Champion) -> str:
    """The file text of ``champion`` (indented JSON, trailing newline). Raises InputError if invalid."""
    text = json.dumps(champion.to_dict(), indent=2, allow_nan=False, default=_json_default) + "\n"
    _validate(json.loads(text), champion.path or f"champion {champion.name}")
    return text


def champion_python(champion: Champion) -> str:
    """Readable ``NAME.py`` source: the kind's function (``acceptance_threshold`` or ``relaxation_weight``)
    with the contract's signature.

    Built only from validated parts (the canonical expression, the name, the kind and
    numbers), never from free text of the file.
    """
    nodes = champion.nodes
    m = champion.metrics
    kind = champion.program_kind
    lines = [f"Evolved {kind.title} '{champion.name}' (generated from {champion.name}.json; do not edit).",
             "", f"Kind: {kind.name}: {kind.output}.", f"Expression: {to_string(nodes)}"]
    def num(split: str, key: str) -> float:
        v = m.get(split, {}).get(key)
        return math.nan if v is None else float(v)

    for split in ("train", "valid"):
        if split in m and "acceptance_rate" in m[split]:
            lines.append(f"{split}: fitness {num(split, 'fitness'):.6f}, acceptance "
                         f"{num(split, 'acceptance_rate'):.4f}, expected TV {num(split, 'expected_tv'):.6f}")
        elif split in m:
            lines.append(f"{split}: {num(split, 'tokens_per_call'):.4f} tokens per call, "
                         f"{num(split, 'tv_per_token'):.6f} TV per token")
    return python_source(nodes, kind.function_name, "\n".join(lines), kind)


def _json_default(obj: Any) -> Any:
    import numpy as np
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, (Path, os.PathLike)):
        return os.fspath(obj)
    if isinstance(obj, tuple):
        return list(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def check_name(name: str, what: str = "name") -> str:
    """Validate a champion name: an ASCII identifier of at most 64 characters that is not a
    Python keyword, not a dunder name (``__init__``) and not a built-in rule's name.

    Raises: InputError naming ``what``.
    """
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise InputError(f"{what}: {name!r} is not a valid champion name (letters, digits and _, not starting "
                         f"with a digit, at most 64 characters)")
    if keyword.iskeyword(name):
        raise InputError(f"{what}: {name!r} is a Python keyword; choose another champion name")
    if name.startswith("__") and name.endswith("__"):
        raise InputError(f"{what}: {name!r} is a reserved Python name (dunder); choose another champion name")
    if name in RESERVED_NAMES:
        raise InputError(f"{what}: {name!r} is the name of a built-in rule")
    return name


def _validate(doc: Any, source: str) -> Champion:
    """Check a decoded champion object; return it as a :class:`Champion`. Raises InputError naming ``source``."""
    if not isinstance(doc, dict):
        raise InputError(f"{source}: expected a JSON object, found {json_type(doc)}")
    version = doc.get("format_version")
    if "format_version" in doc and (type(version) is not int or version not in READ_VERSIONS):
        raise InputError(f"{source}: key 'format_version' is {printable(repr(version))[:80]}, not a supported "
                         f"version ({', '.join(map(str, sorted(READ_VERSIONS)))})")
    keys = _KEYS_V1 if version == 1 else _KEYS
    missing = [k for k in keys if k not in doc]
    if missing:
        hint = (f" (format_version 1 files have it; a file with the key 'kind' is format_version {FORMAT_VERSION})"
                if version == 1 and "kind" in doc else "")
        raise InputError(f"{source}: missing key '{missing[0]}'{hint}")
    extra = [k for k in doc if k not in keys]
    if extra:
        raise InputError(f"{source}: unknown key {extra[0]!r}")
    for key, kind in keys.items():
        value = doc[key]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise InputError(f"{source}: key '{key}' must be a JSON {_json_name(kind)}, found {json_type(value)}")
    if doc["format"] != FORMAT:
        raise InputError(f"{source}: key 'format' is {doc['format']!r}, expected {FORMAT!r}")
    if doc["format_version"] not in READ_VERSIONS:
        raise InputError(f"{source}: format_version {doc['format_version']} is not supported "
                         f"(expected {FORMAT_VERSION})")
    if doc["format_version"] == 1:  # no kind yet; "fitness" named the objective
        doc = dict(doc)
        doc["objective"] = "acceptance_quality" if doc["fitness"] == "seed" else doc.pop("fitness")
        doc.pop("fitness", None)
        config = doc["provenance"].get("config")
        doc["kind"] = kind_from_config(config).name
    if doc["primitive_set_version"] not in READABLE_VERSIONS:
        raise InputError(f"{source}: primitive_set_version {doc['primitive_set_version']} does not match this "
                         f"version of evolve (primitive set {PRIMITIVE_SET_VERSION}, which reads "
                         f"{', '.join(map(str, READABLE_VERSIONS))})")
    check_name(doc["name"], f"{source}: key 'name'")
    if "\n" in doc["description"] or len(doc["description"]) > 1000:
        raise InputError(f"{source}: key 'description' must be one line of at most 1000 characters")
    features = doc["features"]
    version = doc["primitive_set_version"]
    for i, f in enumerate(features):
        if not isinstance(f, str) or f not in FEATURES:
            raise InputError(f"{source}: key 'features', item {i}: unknown feature {f!r} "
                             f"(known: {', '.join(FEATURES)})")
        if f not in VERSION_FEATURES[version]:
            raise InputError(f"{source}: key 'features', item {i}: {f!r} is not a feature of primitive set {version} "
                             f"(key 'primitive_set_version'), which holds {', '.join(VERSION_FEATURES[version])}")
    if not OBJECTIVE_RE.fullmatch(doc["objective"]):
        raise InputError(f"{source}: key 'objective' is {doc['objective']!r}, not an objective's name")
    kind = program_kind(doc["kind"], f"{source}: key 'kind'")
    kind.check_features(features, f"{source}: key 'features'")
    _check_settings(doc["provenance"], kind, source)
    metrics = doc["metrics"]
    for split in ("train", "valid"):
        if split not in metrics:
            raise InputError(f"{source}: key 'metrics' lacks '{split}'")
    for split, values in metrics.items():
        if split not in ("train", "valid", "test"):
            raise InputError(f"{source}: key 'metrics': unknown split {split!r}")
        if not isinstance(values, dict):
            raise InputError(f"{source}: key 'metrics.{split}' must be a JSON object, found {json_type(values)}")
        for k, v in values.items():
            if v is None and k != "fitness":
                continue  # a metric that was not computed (e.g. block metrics without draft_index)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not _finite(v):
                raise InputError(f"{source}: key 'metrics.{split}.{k}' must be a finite number or null "
                                 f"(value {v!r})")
        if "fitness" not in values and kind is DEFAULT_KIND:
            raise InputError(f"{source}: key 'metrics.{split}' lacks 'fitness'")
    nodes = parse(doc["expression"], f"{source}: expression", tuple(features) or FEATURES)
    beyond = [n.value for n in nodes if n.node_type == "feature" and n.value not in VERSION_FEATURES[version]]
    if beyond:
        raise InputError(f"{source}: expression reads {beyond[0]!r}, not a feature of primitive set {version} (key "
                         f"'primitive_set_version'): a program of that version cannot read it")
    kind.check_features([n.value for n in nodes if n.node_type == "feature"], f"{source}: expression")
    return Champion(name=doc["name"], expression=to_string(nodes), description=doc["description"],
                    features=tuple(features), objective=doc["objective"], kind=kind.name, metrics=metrics,
                    provenance=doc["provenance"], primitive_set_version=doc["primitive_set_version"],
                    path=source)


def _check_settings(provenance: dict, kind: ProgramKind, source: str) -> None:
    """The run settings a kind's champion carries in ``provenance.config`` (``verify_with``, ``length_weighting``:
    :attr:`evolve.kinds.base.ProgramKind.setting_names`) must be names: one-line strings (or null, the default), so
    that a verifier of 123 is not scored as the standard rule. Whether a name resolves is checked where it is
    used (the kind's ``check`` hook, :class:`evolve.kinds.base.KindHooks`). Raises InputError naming ``source``."""
    config = provenance.get("config")
    if config is None:
        return
    if not isinstance(config, dict):
        raise InputError(f"{source}: key 'provenance.config' must be a JSON object, found {json_type(config)}")
    for name in kind.setting_names:
        value = config.get(name)
        if value is None:
            continue
        if not isinstance(value, str) or not value or not value.isprintable() or len(value) > 1000:
            raise InputError(f"{source}: key 'provenance.config.{name}' must be a name (a non-empty one-line "
                             f"string), found {json_type(value)} (value {printable(repr(value))[:80]})")


def _finite(v: int | float) -> bool:
    """Whether ``v`` is a finite number within float range (a huge JSON integer is not)."""
    try:
        return math.isfinite(float(v))
    except OverflowError:
        return False


def _json_name(kind) -> str:
    return {str: "string", int: "integer", list: "array", dict: "object"}.get(kind, str(kind))


def read_champion(path: str | os.PathLike) -> Champion:
    """Read and validate a champion file.

    Args:
        path: a ``NAME.json`` file, or a run directory holding ``champion.json``.

    Returns: :class:`Champion` (``path`` set to the file read).

    Raises: InputError (one line naming the file) for a missing, unreadable,
    oversized or invalid file, wrong key types, a foreign primitive-set
    version, or an unsafe or unknown expression.
    """
    p = Path(path)
    if p.is_dir():
        p = p / "champion.json"
        if not p.exists():
            raise InputError(f"{path}: not a run directory (no champion.json); create one with "
                             f"`python -m evolve run`")
    source = str(p)
    if p.exists() and not p.is_file():
        raise InputError(f"{source}: not a regular file")
    try:
        size = p.stat().st_size
    except FileNotFoundError:
        what = "champion file" if p.suffix.lower() == ".json" else "run directory or champion file"
        raise InputError(f"{source}: no such {what}") from None
    except OSError as exc:
        raise InputError(f"{source}: cannot read ({' '.join(str(exc).split())})") from None
    if size > MAX_FILE_BYTES:
        raise InputError(f"{source}: champion file is larger than {MAX_FILE_BYTES} bytes ({size})")
    try:
        raw = p.read_bytes()
        doc = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
    except UnicodeDecodeError:
        raise InputError(f"{source}: not UTF-8 text") from None
    except RecursionError:
        raise InputError(f"{source}: JSON nested too deeply") from None
    except ValueError as exc:
        raise InputError(f"{source}: not valid JSON ({' '.join(str(exc).split())[:160]})") from None
    except OSError as exc:
        raise InputError(f"{source}: cannot read ({' '.join(str(exc).split())})") from None
    return _validate(doc, source)


def _reject_constant(name: str):
    raise ValueError(f"{name} is not allowed")


def load_champion(path: str | os.PathLike) -> Rule:
    """The champion in ``path`` (a ``NAME.json`` or a run directory) as a :class:`Rule`.

    The rule's ``name`` is the champion's name, its ``source`` names the file.
    Raises: InputError as :func:`read_champion`.
    """
    return read_champion(path).rule()


def champion_files(directory: str | os.PathLike | None = None) -> list[Path]:
    """``*.json`` files of the champions directory (default :func:`champions_dir`), sorted by name.

    A directory that does not exist holds none; unless it is the package's own
    (:data:`PACKAGE_DIR`) that is said in an :class:`evolve.errors.InputWarning`.
    Raises: InputError when the path exists but is not a directory, or cannot be listed.
    """
    d = Path(directory) if directory is not None else champions_dir()
    if not d.is_dir():
        if d.exists():
            raise InputError(f"{d}: the champions directory is not a directory")
        if d.resolve() != PACKAGE_DIR:
            warnings.warn(f"{d}: the champions directory does not exist; no champions are read",
                          InputWarning, stacklevel=2)
        return []
    try:
        return sorted(p for p in d.glob("*.json") if p.is_file() and not p.name.startswith("."))
    except OSError as exc:
        raise InputError(f"cannot list the champions directory ({os_error_text(exc)})") from None


def promoted_champions(directory: str | os.PathLike | None = None) -> list[Champion]:
    """Every champion of a directory (default :func:`champions_dir`), each with the file it was read from
    (:attr:`Champion.path`), sorted by file name.

    A missing directory gives an empty list. Raises: InputError for the first
    invalid file (one line naming it), or for two files declaring the same name.
    """
    found: list[Champion] = []
    seen: dict[str, Path] = {}
    for p in champion_files(directory):
        champion = read_champion(p)
        if champion.name in seen:
            raise InputError(f"{p}: champion name {champion.name!r} is also used by {seen[champion.name]}")
        seen[champion.name] = p
        found.append(champion)
    return found


def list_champions(directory: str | os.PathLike | None = None) -> list[Rule]:
    """Every champion of a directory (default :func:`champions_dir`) as rules, sorted by file name.

    Raises: InputError as :func:`promoted_champions`.
    """
    return [champion.rule() for champion in promoted_champions(directory)]


def save_champion(champion: Champion, directory: str | os.PathLike | None = None,
                  overwrite: bool = False, inputs: tuple[str | os.PathLike, ...] = ()) -> tuple[Path, Path]:
    """Write ``NAME.json`` and the generated ``NAME.py`` atomically into ``directory``.

    Args:
        champion: validated on the way out (same checks as loading).
        directory: default :func:`champions_dir` (created if needed).
        overwrite: replace an existing champion of that name.
        inputs: files and directories the caller read; ``directory`` may not be one of them.

    Returns: (json path, py path). Raises: InputError for an invalid champion or
    name, an existing file when ``overwrite`` is False, a ``NAME.py`` that is not
    a generated champion file, a directory refused by
    :func:`evolve.files.guard.check_output_dir` (inside the package's source other than
    :data:`PACKAGE_DIR`, not writable, a file...), or a failed write.
    """
    d = Path(directory) if directory is not None else champions_dir()
    check_name(champion.name)
    check_output_dir(d, inputs, "champions directory", allowed_source=PACKAGE_DIR)
    json_path, py_path = d / f"{champion.name}.json", d / f"{champion.name}.py"
    if not overwrite:
        for p in (json_path, py_path):
            if p.exists():
                raise ChampionExists(p, champion.name)
    for p in (json_path, py_path):
        if p.exists() and not p.is_file():
            raise InputError(f"{p}: exists and is not a regular file")
    if py_path.exists() and not _generated_by_us(py_path, champion.name):
        raise InputError(f"{py_path}: not a generated champion file; it is never replaced")
    text = champion_json(champion)
    source = champion_python(champion)
    try:
        atomic_write_text(py_path, source)
        atomic_write_text(json_path, text)
    except OSError as exc:
        raise InputError(f"cannot write the champion ({os_error_text(exc)})") from None
    return json_path, py_path


def _generated_by_us(py_path: Path, name: str) -> bool:
    """Whether ``py_path`` is the generated ``NAME.py`` of a champion (its docstring says so)."""
    try:
        with open(py_path, "rb") as fh:
            head = fh.read(4096).decode("utf-8", "replace")
    except OSError:
        return False
    return f"(generated from {name}.json; do not edit)" in head


def promote(run_dir: str | os.PathLike, name: str, directory: str | os.PathLike | None = None,
            overwrite: bool = False) -> tuple[Path, Path]:
    """Copy the champion of a run directory into the champions directory as ``name``.

    The provenance gains ``promoted`` (UTC date) and ``promoted_from`` (the run's
    champion file). Returns (json path, py path). Raises: InputError for a bad
    run directory, champion file or name, or an existing champion.
    """
    check_name(name, "NAME")
    champ = read_champion(run_dir)
    prov = dict(champ.provenance)
    prov["promoted"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    prov["promoted_from"] = champ.path
    champ = Champion(name=name, expression=champ.expression, description=champ.description,
                     features=champ.features, objective=champ.objective, kind=champ.kind, metrics=champ.metrics,
                     provenance=prov,
                     primitive_set_version=champ.primitive_set_version)
    return save_champion(champ, directory, overwrite, inputs=(run_dir,))


__all__ = ["Champion", "ChampionExists", "FORMAT", "FORMAT_VERSION", "ENV_DIR", "PACKAGE_DIR", "RESERVED_NAMES", "champions_dir",
           "champion_json", "champion_python", "check_name", "read_champion", "load_champion", "list_champions", "champion_files",
           "promoted_champions", "save_champion", "promote"]
