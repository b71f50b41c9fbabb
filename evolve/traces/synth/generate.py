"""Dataset generation: models, split sizes and seeds, metadata, statistics (``generate_data.py``).

A dataset has three splits drawn from one trace model with different seeds:

* sizes: ``train`` has ``sequences`` sequences (default 1000),
  ``valid`` and ``test`` have max(1, round(0.3 * sequences)) each (300 by
  default; about 49k/15k/15k tokens with the default models);
* seeds: split ``i`` (train, valid, test in that order) uses the integer
  ``SeedSequence(seed).spawn(3)[i].generate_state(1, uint64)[0]`` (numpy), so
  the splits are independent and each can be regenerated alone with the
  model's ``generate_split(sequences, split_seed, config)``.

:mod:`evolve.traces.synth.chunked` generates the same splits' sizes chunk by chunk straight to
disk (``--chunk-sequences``), for datasets larger than memory.

``metadata.json`` records the schema version and format (added by
:func:`evolve.traces.io.write_dataset`), the generator name and version, the full
model config, the seed, each split's sequences and seed, and each split's
statistics (:func:`evolve.traces.schema.split_stats`).

Models (``--model``):

* ``vocab`` (default): :mod:`evolve.traces.synth.vocab_model`, whole draft and target
  distributions per position, every column consistent (its splits: :mod:`evolve.traces.synth.vocab_blocks`);
* ``independent``: :mod:`evolve.traces.synth.independent`, the independent-features model
  (each feature drawn on its own, records labelled by the standard rule).
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from evolve.files import guard
from evolve.traces.synth import independent, vocab_blocks, vocab_model
from evolve.errors import InputError
from evolve.traces.io import FORMATS, SPLITS, Traces, write_dataset
from evolve.traces.schema import split_stats

DEFAULT_MODEL = "vocab"
DEFAULT_SEED = 42
DEFAULT_SEQUENCES = 1000
#: valid and test have this fraction of the train split's sequences (300 / 1000 by default).
EVAL_FRACTION = 0.3


@dataclass(frozen=True)
class Model:
    """A trace model: name, version, config class, generator and config validator."""

    name: str
    version: int
    config_cls: type
    generate_split: Callable[[int, int, Any], pd.DataFrame]
    validate: Callable[[Any], Any]
    description: str
    option_help: dict[str, str]


def _validate_independent_config(config: independent.IndependentModelConfig) -> independent.IndependentModelConfig:
    avg, rate = config.avg_length, config.match_rate
    most = vocab_model.INT_LIMITS["avg_length"]
    if isinstance(avg, bool) or not isinstance(avg, (int, np.integer)) or not 2 <= avg <= most:
        raise InputError(f"must be an integer in [2, {most}] (value {avg!r})", param="avg_length")
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0.0 <= rate <= 1.0:
        raise InputError(f"must be in [0, 1] (value {rate!r})", param="match_rate")
    return config


def _field_help(config_cls: type) -> dict[str, str]:
    return {f.name: f.metadata.get("help", "") for f in dataclasses.fields(config_cls)}


MODELS: dict[str, Model] = {
    "vocab": Model("vocab", vocab_model.GENERATOR_VERSION, vocab_model.VocabModelConfig,
                   vocab_blocks.generate_split, lambda c: c.validate(),
                   "whole draft/target distributions over a vocabulary, all columns consistent",
                   _field_help(vocab_model.VocabModelConfig)),
    "independent": Model("independent", independent.GENERATOR_VERSION, independent.IndependentModelConfig,
                  independent.generate_split, _validate_independent_config,
                  "independent-features model: each feature drawn on its own, labelled by the standard rule",
                  {"avg_length": "average sequence length; a sequence has avg/2 + U{0..avg-1} tokens",
                   "match_rate": "probability that the top tokens match"}),
}


@dataclass(frozen=True)
class ModelOption:
    """A model knob offered on the command line as ``--field-name`` (for the models that have it); ``high`` the
    largest value of an integer knob (:data:`evolve.traces.synth.vocab_model.INT_LIMITS`)."""

    field: str
    type: type
    models: tuple[str, ...]
    help: str
    high: int | None = None

    @property
    def flag(self) -> str:
        """The option, e.g. ``--vocab-size``."""
        return "--" + self.field.replace("_", "-")


def model_options() -> list[ModelOption]:
    """Every model config field as a command-line option (shared names merged), in declaration order."""
    seen: dict[str, ModelOption] = {}
    for model in MODELS.values():
        for f in dataclasses.fields(model.config_cls):
            default = f.default
            value_type = int if isinstance(default, int) and not isinstance(default, bool) else float
            part = f"{model.name}: {model.option_help.get(f.name, f.name)} (default {default!r})"
            if f.name in seen:
                old = seen[f.name]
                seen[f.name] = dataclasses.replace(old, models=old.models + (model.name,), help=f"{old.help}; {part}")
            else:
                high = vocab_model.INT_LIMITS.get(f.name) if value_type is int else None
                seen[f.name] = ModelOption(f.name, value_type, (model.name,), part, high)
    return list(seen.values())


def get_model(name: str) -> Model:
    """The model ``name``. Raises InputError (parameter ``model``) naming the known models."""
    try:
        return MODELS[name]
    except KeyError:
        raise InputError(f"unknown model '{name}' (choose from {', '.join(MODELS)})", param="model") from None


def build_config(model: str, overrides: dict[str, Any] | None = None):
    """The validated config of ``model`` with the given knob values (None = default).

    Raises: InputError for an unknown model, a knob the model does not have
    (naming the knob as the parameter, and the models that have it) or an invalid value.
    """
    spec = get_model(model)
    names = {f.name for f in dataclasses.fields(spec.config_cls)}
    kwargs = {}
    for key, value in (overrides or {}).items():
        if value is None:
            continue
        if key not in names:
            owners = [m.name for m in MODELS.values() if key in {f.name for f in dataclasses.fields(m.config_cls)}]
            if owners:
                raise InputError(f"applies to model {' or '.join(owners)}, not to model {model}", param=key)
            raise InputError(f"unknown knob for model {model}", param=key)
        kwargs[key] = value
    config = spec.config_cls(**kwargs)
    spec.validate(config)
    return config


def split_sizes(sequences: int) -> dict[str, int]:
    """Sequences per split: train = ``sequences``, valid = test = max(1, round(0.3 * sequences)).

    Raises: InputError if ``sequences`` is not an integer >= 1.
    """
    if isinstance(sequences, bool) or not isinstance(sequences, (int, np.integer)) or sequences < 1:
        raise InputError(f"must be an integer >= 1 (value {sequences!r})", param="sequences")
    held_out = max(1, int(round(EVAL_FRACTION * int(sequences))))
    return {"train": int(sequences), "valid": held_out, "test": held_out}


def split_seeds(seed: int) -> dict[str, int]:
    """Per-split integer seeds in [0, 2**64) derived from ``seed`` with numpy's SeedSequence.

    Raises: InputError if ``seed`` is not an integer in [0, 2**64).
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= int(seed) < 2 ** 64:
        raise InputError(f"must be an integer in [0, 2**64) (value {seed!r})", param="seed")
    children = np.random.SeedSequence(int(seed)).spawn(len(SPLITS))
    return {name: int(child.generate_state(1, dtype=np.uint64)[0]) for name, child in zip(SPLITS, children)}


@dataclass
class Dataset:
    """Generated splits (validated :class:`evolve.traces.io.Traces`) and their metadata."""

    splits: dict[str, Traces]
    metadata: dict[str, Any]


def generate_dataset(model: str = DEFAULT_MODEL, seed: int = DEFAULT_SEED, sequences: int = DEFAULT_SEQUENCES,
                     config=None, overrides: dict[str, Any] | None = None) -> Dataset:
    """Generate and validate the three splits of a dataset.

    Args:
        model: ``vocab`` or ``independent``.
        seed: master seed, integer in [0, 2**64).
        sequences: train sequences (valid/test: see :func:`split_sizes`).
        config: a ready model config, or None to build one from ``overrides``
            (see :func:`build_config`).

    Returns: :class:`Dataset` (splits as Traces; metadata without schema
    version/format, which :func:`evolve.traces.io.write_dataset` adds).

    Raises: InputError for any invalid argument (before anything is generated).
    """
    spec = get_model(model)
    config = build_config(model, overrides) if config is None else spec.validate(config)
    sizes = split_sizes(sequences)
    seeds = split_seeds(seed)
    splits: dict[str, Traces] = {}
    stats: dict[str, dict] = {}
    for name in SPLITS:
        frame = spec.generate_split(sizes[name], seeds[name], config)
        traces = Traces.from_frame(frame, source=f"generated {name} split", split=name)
        splits[name] = traces
        stats[name] = split_stats(traces.columns)
    return Dataset(splits, dataset_metadata(spec, config, seed, sizes, seeds, stats))


#: How :func:`split_seeds` derives the splits' seeds (recorded in ``metadata.json``).
SEED_DERIVATION = ("numpy SeedSequence(seed).spawn(3)[i].generate_state(1, uint64)[0], "
                   "i = 0, 1, 2 for train, valid, test")


def dataset_metadata(spec, config, seed: int, sizes: dict, seeds: dict, stats: dict, seed_derivation: str = "",
                     **extra: Any) -> dict[str, Any]:
    """The ``metadata.json`` fields of a generated dataset (before :func:`evolve.traces.io.write_dataset` adds the
    schema version and format): the model, its configuration, the seeds, the split sizes in sequences,
    ``extra`` fields, and the per-split ``stats``. ``seed_derivation`` is appended to
    :data:`SEED_DERIVATION`."""
    return {"generator": spec.name, "generator_version": spec.version, "description": spec.description,
            "config": config.to_dict(), "seed": int(seed), "sequences": sizes, "split_seeds": seeds,
            **extra, "seed_derivation": SEED_DERIVATION + seed_derivation, "statistics": stats}


def check_output_dir(out: str | os.PathLike, inputs: tuple[str | os.PathLike | None, ...] = ()) -> Path:
    """Raise InputError if ``out`` is empty, exists and is not a directory, cannot be created in,
    is one of ``inputs`` or lies inside the package's source (:func:`evolve.files.guard.check_output_dir`)."""
    return guard.check_output_dir(out, inputs, param="out")


def write(dataset: Dataset, out: str | os.PathLike, fmt: str = "parquet") -> list[Path]:
    """Write ``dataset`` atomically into ``out`` (see :func:`evolve.traces.io.write_dataset`).

    Raises: InputError for an unknown format or an unwritable directory (when writing fails only at the
    end, the dataset is saved into a rescue directory that the message names, :func:`evolve.files.guard.write_or_rescue`).
    """
    if fmt not in FORMATS:
        raise InputError(f"unknown format '{fmt}' (choose from {', '.join(FORMATS)})", param="fmt")
    path = check_output_dir(out)
    return guard.write_or_rescue(lambda d: write_dataset(d, dataset.splits, dataset.metadata, fmt=fmt), path,
                                 is_dir=True, param="out")


def format_stats(stats: dict[str, dict]) -> str:
    """Per-split statistics as a text table (tokens, sequences, acceptance, match, entropies)."""
    header = (f"{'split':<6} {'tokens':>8} {'seqs':>6} {'accept':>7} {'E[accept]':>9} {'top-match':>9} "
              f"{'H(q) mean':>9} {'H(p) mean':>9} {'H(p) med':>8}")
    lines = [header]
    for name, s in stats.items():
        lines.append(f"{name:<6} {s['tokens']:>8d} {s['sequences']:>6d} {s['standard_acceptance']:>7.4f} "
                     f"{s['expected_standard_acceptance']:>9.4f} {s['top_token_match']:>9.4f} "
                     f"{s['mean_draft_entropy']:>9.3f} {s['mean_target_entropy']:>9.3f} "
                     f"{s['median_target_entropy']:>8.3f}")
    extra = []
    for name, s in stats.items():
        parts = []
        if "mean_overlap" in s:
            parts.append(f"mean overlap {s['mean_overlap']:.4f}")
        if "acceptance_by_depth" in s:
            parts.append("E[accept] by draft_index " + " ".join(f"{a:.3f}" for a in s["acceptance_by_depth"]))
        if parts:
            extra.append(f"{name:<6} " + "; ".join(parts))
    lines += extra
    lines.append("accept = standard rule with the record's rand_value; E[accept] = mean min(1, p/q); "
                 "entropies in nats")
    return "\n".join(lines)
