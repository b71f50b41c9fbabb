"""Shared fixtures and float comparison helpers.

Datasets are made once per session (small, schema-valid, fixed seeds) and must not be modified by a
test: a test that writes into a dataset directory makes its own copy in ``tmp_path``.

* :func:`independent_traces`: one in-memory split of the independent-features model;
* :func:`independent_dataset`: a train/valid/test directory of that model (about 200 tokens per split);
* :func:`search_dataset`, :func:`small_search_dataset`: train/valid directories (no test split: a
  search must never need it) for whole evolution runs;
* :func:`vocab_dataset`: a train/valid/test directory of the vocab model (with ``draft_index``,
  so block metrics and Pareto fronts apply);
* :func:`model`: the context-dependent draft/target pair of the decode-loop and tree tests.

The vocab generator and the simulator are imported inside their fixtures, so that collecting a test
file does not import (and compile) them unless it uses them.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from evolve.traces.io import Traces, write_dataset
from evolve.traces.synth.independent import generate_split


@pytest.fixture(scope="session")
def independent_traces() -> Traces:
    """About 2,500 records of the independent-features model (50 sequences, random seed 7)."""
    return Traces.from_frame(generate_split(50, 7), source="independent_traces")


@pytest.fixture(scope="session")
def independent_dataset(tmp_path_factory) -> Path:
    """Parquet train/valid/test of the independent-features model: 4 sequences each (160 to 240
    tokens), random seeds 1, 2 and 3; metadata ``{"generator": {"name": "test"}}``."""
    path = tmp_path_factory.mktemp("independent")
    splits = {split: generate_split(4, seed) for split, seed in (("train", 1), ("valid", 2), ("test", 3))}
    write_dataset(path, splits, {"generator": {"name": "test"}}, "parquet")
    return path


def _train_valid(directory: Path, train_sequences: int, valid_sequences: int, metadata: dict) -> Path:
    """Train (random seed 1) and valid (random seed 2) splits of the independent-features model."""
    write_dataset(directory, {"train": generate_split(train_sequences, 1), "valid": generate_split(valid_sequences, 2)},
                  metadata)
    return directory


@pytest.fixture(scope="session")
def search_dataset(tmp_path_factory) -> Path:
    """Train (30 sequences) and valid (12) only, with generator provenance in the metadata."""
    return _train_valid(tmp_path_factory.mktemp("search") / "data", 30, 12,
                        {"generator": "independent", "generator_version": 1, "seed": 1})


@pytest.fixture(scope="session")
def small_search_dataset(tmp_path_factory) -> Path:
    """Train (25 sequences) and valid (10) only, for runs through the command line."""
    return _train_valid(tmp_path_factory.mktemp("cli") / "data", 25, 10, {"generator": "independent"})


@pytest.fixture(scope="session")
def vocab_dataset(tmp_path_factory) -> Path:
    """The vocab model's dataset with random seed 5 and 40 train sequences (valid and test sized by
    :func:`evolve.traces.synth.generate.split_sizes`), written as Parquet."""
    from evolve.traces.synth import generate

    path = tmp_path_factory.mktemp("vocab")
    generate.write(generate.generate_dataset("vocab", 5, 40), path)
    return path


@pytest.fixture(scope="session")
def model():
    """:class:`evolve.sim.models.SyntheticModel` over 48 tokens with random seed 5 (the ``V`` of
    ``test_decoding.py`` and ``test_trees.py``)."""
    from evolve.sim.models import SyntheticModel

    return SyntheticModel(vocab_size=48, seed=5)


#: Relative difference allowed between the Numba kernels and numpy. Their exp and log come from
#: different math libraries (LLVM's libm calls against numpy's SIMD loops) that may round the last
#: bit differently, and a random program compounds such a difference through its later operations.
RTOL = 1e-9
#: Absolute difference allowed on top (a threshold is compared with u in [0, 1): a difference of
#: 1e-12 changes an accept decision with probability 1e-12), for values that cancel to near 0.
ATOL = 1e-12


def assert_same_floats(got, want, err_msg: str = "", branch_flips: int = 0) -> None:
    """``got`` equals ``want`` within :data:`RTOL` (relative) plus :data:`ATOL`, with NaN, +inf and -inf
    in exactly the same places (float64 arrays of one shape).

    ``branch_flips``: how many elements may differ beyond that. A random program compares two
    computed values with ``if_gt``; when they tie to within the last bit, a one-bit difference of
    exp/log between the two math libraries picks the other branch and the results differ entirely.
    Random-program tests allow a few such elements (a real evaluator bug changes many)."""
    import numpy as np

    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, err_msg
    same = (np.isnan(got) & np.isnan(want)) | (got == want)
    finite = np.isfinite(got) & np.isfinite(want)
    close = np.zeros_like(same)
    close[finite] = np.abs(got[finite] - want[finite]) <= ATOL + RTOL * np.abs(want[finite])
    bad = np.flatnonzero(~(same | close))
    if len(bad) > branch_flips:
        np.testing.assert_allclose(got[bad], want[bad], rtol=RTOL, atol=ATOL,
                                   err_msg=f"{err_msg} ({len(bad)} elements differ, {branch_flips} allowed)")