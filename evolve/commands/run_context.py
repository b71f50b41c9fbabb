"""A run's context goes with its champion: the dataset, the draft length and the cost file a champion was evolved
under, read from its champion file's provenance, for the commands that score, decode or tune it (``benchmark.py`` and its
``trees``, ``live`` and ``simulate``, ``python -m evolve export``).

A champion file written by a run (:mod:`evolve.search.run_files`) records in ``provenance`` the run's data directory
(``data_dir``), the SHA-256 of its train and valid splits (``data.sha256``, :func:`evolve.search.checkpoint.split_sha256`:
the records file's digest, combined with the split's tree table's where the dataset holds one) and the run
configuration (``config``): its draft length ``gamma`` (read by the run when its kind reads it and its objective
reads block metrics) and its cost file ``costs`` (read when its objective prices tokens per second; ``default`` is
the built-in flat model, no file). :func:`run_context` reads them (:class:`RunContext`); a file that records none of
them (a champion written by hand) constrains nothing.

Rules (the same in every command):

* **dataset**: without a dataset given, the one the champions were evolved on (every champion naming one must name
  the same); a dataset given (or that one) must be the champion's: its train and valid splits have the recorded
  digests, or it is a subset of such a dataset (``generate_data.py subset`` records its source directory,
  ``subset.of``, which must still be there; a subset of a subset is followed to its source), or, holding the test
  split alone, its metadata says it was made as the champion's (the same generator, version, seed and
  configuration). Else refused in one line naming both directories and the file that differs.
* **gamma**: without one given, the champions' own (all equal); a different one given is refused naming both.
* **cost file**: without one given, the champions' own (the same file, or files of the same content); a different
  one given is refused naming both; the recorded file gone while none is given is refused (its measurements cannot
  be guessed; a file given while the recorded one is gone is taken with a warning); a flat cost ratio given explicitly beside a champion evolved under a cost file is refused too.
"""
from __future__ import annotations

import json
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from evolve.errors import InputError, InputWarning
from evolve.traces.io import METADATA_FILE, split_path

#: The splits a run reads, whose digests its champion records.
RUN_SPLITS = ("train", "valid")
#: How many ``subset.of`` links are followed from a dataset to its source.
MAX_SUBSET_DEPTH = 8
#: What a run records of how its dataset was made (``provenance.data``), and the key of the dataset's
#: ``metadata.json`` each comes from (:func:`evolve.search.rundir.dataset_info`).
GENERATOR_KEYS = {"generator": "generator", "generator_version": "generator_version", "seed": "seed",
                  "generator_config": "config"}
#: The ``costs`` setting of a run that read no cost file (the built-in flat model).
DEFAULT_COSTS_SETTING = "default"


@dataclass(frozen=True)
class RunContext:
    """What a champion file records of its run: ``champion`` the file; ``data_dir`` the run's data directory as
    recorded (None: not recorded); ``sha256`` {split: digest} of its train and valid splits (empty: not recorded);
    ``gamma`` the draft length its run read (None: its run read none); ``costs`` the cost file its run read (None:
    none, or the built-in model); ``generator`` what the run's dataset's metadata said of how it was made
    (:data:`GENERATOR_KEYS`)."""

    champion: Path
    data_dir: str | None = None
    sha256: dict[str, str] = field(default_factory=dict)
    gamma: int | None = None
    costs: str | None = None
    generator: dict[str, Any] = field(default_factory=dict)


def _objective(name: Any):
    from evolve.eval.objectives import OBJECTIVES

    return OBJECTIVES.get(name) if isinstance(name, str) else None


def run_context(path: str | os.PathLike) -> RunContext:
    """The :class:`RunContext` of the champion file ``path`` (a run directory: its ``champion.json``). Keys that are
    missing or of another type record nothing. Raises: InputError naming the file when it cannot be read as JSON
    (the champion loader has checked it before, in the commands)."""
    from evolve.kinds.registry import KINDS, kind_from_config
    from evolve.traces.io import read_json

    file = Path(path)
    if file.is_dir():
        file = file / "champion.json"
    doc = read_json(file)
    prov = doc.get("provenance") if isinstance(doc, dict) else None
    if not isinstance(prov, dict):
        return RunContext(file)
    config = prov.get("config") if isinstance(prov.get("config"), dict) else {}
    data = prov.get("data") if isinstance(prov.get("data"), dict) else {}
    digests = data.get("sha256") if isinstance(data.get("sha256"), dict) else {}
    sha = {s: digests[s] for s in RUN_SPLITS if isinstance(digests.get(s), str)}
    data_dir = prov.get("data_dir") if isinstance(prov.get("data_dir"), str) and prov.get("data_dir") else None
    kind = KINDS.get(doc.get("kind")) if isinstance(doc.get("kind"), str) else kind_from_config(config)
    objective = _objective(doc.get("objective")) or _objective(config.get("objective"))
    gamma = config.get("gamma")
    reads_gamma = kind is not None and kind.reads_gamma and objective is not None and objective.needs_blocks
    if type(gamma) is not int or gamma < 1 or not reads_gamma:
        gamma = None
    costs = config.get("costs")
    if not isinstance(costs, str) or costs in ("", DEFAULT_COSTS_SETTING) or objective is None \
            or not objective.reads_costs:
        costs = None
    made = {key: data[key] for key in GENERATOR_KEYS if key in data}
    return RunContext(file, data_dir, sha if len(sha) == len(RUN_SPLITS) else {}, gamma, costs, made)


def contexts(champions: Iterable[str | os.PathLike]) -> list[RunContext]:
    """:func:`run_context` of each champion file (in order)."""
    return [run_context(c) for c in champions]


def dataset_digests(data_dir: str | os.PathLike) -> dict[str, str | None]:
    """{split: digest} of the train and valid splits of ``data_dir`` as a run records them
    (:func:`evolve.search.checkpoint.split_sha256`; None for a split that is not there or cannot be read)."""
    from evolve.search.checkpoint import split_sha256

    out: dict[str, str | None] = {}
    for s in RUN_SPLITS:
        path = split_path(data_dir, s)
        out[s] = None if path is None else split_sha256(path, s)
    return out


def subset_source(data_dir: str | os.PathLike) -> Path | None:
    """The source directory a subset dataset records (``subset.of`` of its ``metadata.json``); None for a dataset
    that is no subset (or whose metadata cannot be read: its reader says why)."""
    try:
        meta = json.loads((Path(data_dir) / METADATA_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    subset = meta.get("subset") if isinstance(meta, dict) else None
    source = subset.get("of") if isinstance(subset, dict) else None
    return Path(source) if isinstance(source, str) and source else None


def made_on(data_dir: str | os.PathLike, context: RunContext) -> bool:
    """Whether ``data_dir`` is the dataset ``context``'s run read, or a subset of it (module doc). True when the
    champion records no digests (nothing to check)."""
    return differing_file(data_dir, context) is None


def differing_file(data_dir: str | os.PathLike, context: RunContext) -> Path | None:
    """None when ``data_dir`` is the dataset ``context``'s run read or a subset of it (:func:`made_on`); else the
    first split file of ``data_dir`` whose digest is not the recorded one (the directory when it has no such file)."""
    if not context.sha256:
        return None
    here = first = Path(data_dir)
    for _ in range(MAX_SUBSET_DEPTH):
        if dataset_digests(here) == context.sha256:
            return None
        source = subset_source(here)
        if source is None or not source.is_dir() or source.resolve() == here.resolve():
            break
        here = source
    found = dataset_digests(first)
    if all(v is None for v in found.values()) and split_path(first, "test") is not None:
        return None if same_generator(first, context) else first / METADATA_FILE  # the test split alone
    for s in RUN_SPLITS:
        if found[s] != context.sha256.get(s):
            return split_path(first, s) or first
    return first


def same_generator(data_dir: str | os.PathLike, context: RunContext) -> bool:
    """Whether the ``metadata.json`` of ``data_dir`` (a dataset of the test split alone, whose train and valid
    digests cannot be checked) says it was made as the champion's run's dataset was (:data:`GENERATOR_KEYS`: the
    generator, its version, seed and configuration); False when either records nothing to compare."""
    try:
        meta = json.loads((Path(data_dir) / METADATA_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(meta, dict) or "generator" not in context.generator:
        return False
    return all(meta.get(theirs) == context.generator.get(ours) for ours, theirs in GENERATOR_KEYS.items()
               if ours in context.generator)


def check_readable(data_dir: str | os.PathLike) -> None:
    """Read the splits a run reads of ``data_dir`` (and their tree tables where it holds them) with their loaders.
    Raises: their InputError, naming the damaged file (:func:`evolve.traces.io.load_split`,
    :func:`evolve.traces.tree_tables.load_trees`)."""
    from evolve.traces.io import load_split
    from evolve.traces.tree_tables import load_trees, tree_path

    for s in RUN_SPLITS:
        if split_path(data_dir, s) is not None:
            load_split(data_dir, s)
        if tree_path(data_dir, s).is_file():
            load_trees(data_dir, s)


def _named(context: RunContext) -> str:
    return f"the champion {context.champion}"


def resolve_data(given: str | os.PathLike | None, found: Sequence[RunContext], default: str | os.PathLike,
                 param: str = "data_dir") -> str | os.PathLike:
    """The dataset a command scores ``found``'s champions on (module doc): ``given``, else the directory the
    champions were evolved on, else ``default``; checked with :func:`made_on` against each champion.

    Raises: InputError (parameter ``param``) naming both directories for a dataset that is not a champion's, for two
    champions evolved on different datasets with none given, and for a recorded directory that is no longer there
    (none given).
    """
    if given is None:
        named = [c for c in found if c.data_dir is not None]
        for c in named[1:]:
            if not _same_dataset(named[0], c):
                raise InputError(f"{_named(named[0])} was evolved on {named[0].data_dir} and {_named(c)} on "
                                 f"{c.data_dir}: give the dataset to score both on", param=param)
        if named:
            own = Path(named[0].data_dir)
            if not own.is_dir():
                raise InputError(f"{_named(named[0])} was evolved on {own}, which is not there (from "
                                 f"{Path.cwd()}); give its dataset", param=param)
            given = own
        else:
            given = default
    if not Path(given).is_dir():  # the loader says what is missing
        return given
    for c in found:
        other = differing_file(given, c)
        if other is not None:
            check_readable(given)  # a damaged file is named by its reader, not taken for another dataset
            where = f", {c.data_dir}" if c.data_dir else ""
            raise InputError(f"{given} is not the dataset {_named(c)} was evolved on{where}: {other} has another "
                             f"SHA-256 than the split its run read (changed since, or another dataset's), and {given} "
                             f"is no subset of that dataset; score the champion on its own dataset", param=param)
    return given


def _same_dataset(a: RunContext, b: RunContext) -> bool:
    if a.sha256 and b.sha256:
        return a.sha256 == b.sha256
    return Path(a.data_dir).resolve() == Path(b.data_dir).resolve()


def resolve_gamma(given: int | None, found: Sequence[RunContext], param: str = "gamma") -> int | None:
    """The draft length to score ``found``'s champions at (module doc): ``given``, else the champions' own, else None
    (the command's default). Raises: InputError (parameter ``param``) naming both for a gamma other than a champion's
    run's, or for two champions evolved at different ones with none given."""
    named = [c for c in found if c.gamma is not None]
    if given is None:
        for c in named[1:]:
            if c.gamma != named[0].gamma:
                raise InputError(f"{_named(named[0])} was evolved with gamma {named[0].gamma} and {_named(c)} with "
                                 f"gamma {c.gamma}: score them apart", param=param)
        return named[0].gamma if named else None
    for c in named:
        if c.gamma != given:
            raise InputError(f"gamma {given}, but {_named(c)} was evolved with gamma {c.gamma} (its run's draft "
                             f"length); leave it out to use that one", param=param)
    return given


def _cost_content(path: str | os.PathLike) -> Any:
    from evolve.traces.io import read_json

    return read_json(path, strict=True)


def same_costs(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Whether two cost files are the same file or hold the same JSON content. Raises: InputError naming a file that
    cannot be read."""
    if Path(a).resolve() == Path(b).resolve():
        return True
    return _cost_content(a) == _cost_content(b)


def resolve_costs(given: str | os.PathLike | None, found: Sequence[RunContext], param: str = "costs",
                  ratio_given: bool = False, ratio_param: str = "cost_ratio") -> str | os.PathLike | None:
    """The cost file to score ``found``'s champions under (module doc): ``given``, else the champions' own, else None
    (the command's flat model). ``ratio_given``: a flat cost ratio was asked for explicitly (refused beside a
    champion evolved under a cost file, naming ``ratio_param``).

    Raises: InputError naming both files for a cost file whose content is not a champion's run's, for two champions
    evolved under different ones with none given, and naming the recorded file when it is gone and none is given.
    """
    named = [c for c in found if c.costs is not None]
    if not named:
        return given
    if given is None:
        if ratio_given:
            raise InputError(f"{_named(named[0])} was evolved under the cost file {named[0].costs}: score it under "
                             f"that file, not a flat cost ratio (leave both out to use it)", param=ratio_param)
        own = named[0].costs
        if not Path(own).is_file():
            raise InputError(f"{_named(named[0])} was evolved under the cost file {own}, which is not there (from "
                             f"{Path.cwd()}); give that cost file", param=param)
        for c in named[1:]:
            if not Path(c.costs).is_file() or not same_costs(own, c.costs):
                raise InputError(f"{_named(named[0])} was evolved under the cost file {own} and {_named(c)} under "
                                 f"{c.costs}: score them apart", param=param)
        return own
    for c in named:
        if not Path(c.costs).is_file():
            warnings.warn(f"{_named(c)} was evolved under the cost file {c.costs}, which is not there (from "
                          f"{Path.cwd()}): {given} is taken to be the same measurements", InputWarning, stacklevel=2)
        elif Path(given).is_file() and not same_costs(given, c.costs):
            raise InputError(f"{given} is not the cost file {_named(c)} was evolved under ({c.costs}, other "
                             f"measurements); leave it out to use that one", param=param)
    return given


__all__ = ["RunContext", "RUN_SPLITS", "run_context", "contexts", "dataset_digests", "subset_source", "made_on",
           "differing_file", "check_readable", "same_generator", "GENERATOR_KEYS",
           "resolve_data",
           "resolve_gamma", "resolve_costs", "same_costs"]
