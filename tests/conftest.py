"""Shared fixtures (plain helper functions are in ``helpers.py``, ``harvest_helpers.py`` and
``hostile_helpers.py``, ``tree_helpers.py``; test files never import from one another).

Datasets are made once per session (small, schema-valid, fixed seeds) and must not be modified by a
test: a test that writes into a dataset directory makes its own copy in ``tmp_path``.

* :func:`independent_traces`: one in-memory split of the independent-features model;
* :func:`independent_dataset`: a train/valid/test directory of that model (about 200 tokens per split);
* :func:`search_dataset`, :func:`small_search_dataset`: train/valid directories (no test split: a
  search must never need it) for whole evolution runs;
* :func:`vocab_dataset`: a train/valid/test directory of the vocab model (with ``draft_index``,
  so block metrics and Pareto fronts apply), with random draft-tree tables beside (:mod:`tree_helpers`);
* :func:`model`: the context-dependent draft/target pair of the decode-loop and tree tests;
* :func:`base_run`, :func:`ws`, :func:`vocab_ws`: a finished run directory and the workspaces of the
  hostile-input tests (:mod:`hostile_helpers`);
* :func:`llama_files`, :func:`one_thread`: the tiny offline Llama models of the harvest tests
  (:mod:`harvest_helpers`) and torch on one thread while a module runs.

The vocab generator, the simulator, the command line and torch are imported inside their fixtures, so
that collecting a test file does not import (and compile) them unless it uses them.
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
    :func:`evolve.traces.synth.generate.split_sizes`), written as Parquet, and 60 random draft trees per
    split (:func:`tree_helpers.write_tree_tables`, seed 5) for the tree-shape kind."""
    from evolve.traces.synth import generate
    from tree_helpers import write_tree_tables

    path = tmp_path_factory.mktemp("vocab")
    generate.write(generate.generate_dataset("vocab", 5, 40), path)
    write_tree_tables(path, seed=5)
    return path


@pytest.fixture(scope="session")
def model():
    """:class:`evolve.sim.models.SyntheticModel` over 48 tokens with random seed 5 (the ``V`` of
    ``test_decoding.py`` and ``test_trees.py``)."""
    from evolve.sim.models import SyntheticModel

    return SyntheticModel(vocab_size=48, seed=5)


# --- the hostile-input tests (test_hostile.py, test_hostile_faults.py) -------------------------

@pytest.fixture(scope="session")
def base_run(small_search_dataset, tmp_path_factory) -> Path:
    """A finished run directory (population 10, 1 generation, from scratch)."""
    from click.testing import CliRunner

    from evolve.cli.evolve import cli as evolve_cli

    out = tmp_path_factory.mktemp("hostile_runs")
    res = CliRunner().invoke(evolve_cli, ["run", "--data", str(small_search_dataset), "--out", str(out),
                                          "--population", "10", "--generations", "1", "--no-progress",
                                          "--from-scratch"])
    assert res.exit_code == 0, res.output
    return Path(res.stdout.strip().splitlines()[-1])


@pytest.fixture()
def ws(tmp_path, independent_dataset, base_run, monkeypatch):
    """A workspace (:class:`hostile_helpers.Workspace`, the current directory while the test runs) around
    a copy of the independent-features dataset (about 200 records per split)."""
    from hostile_helpers import make_workspace

    return make_workspace(tmp_path, independent_dataset, base_run, monkeypatch)


@pytest.fixture()
def vocab_ws(tmp_path, vocab_dataset, base_run, monkeypatch):
    """A workspace around a copy of the vocab model's dataset (with draft_index and top probabilities)."""
    from hostile_helpers import make_workspace

    return make_workspace(tmp_path, vocab_dataset, base_run, monkeypatch)


# --- the harvest tests (test_harvest.py, test_harvest_batch.py, test_sharded_harvest.py) -------

@pytest.fixture(scope="module")
def one_thread():
    """Torch on one thread while the requesting module's tests run (tiny models run fastest, and
    identically, on one thread); the previous thread count is restored afterwards."""
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def llama_files(tmp_path_factory) -> dict:
    """Ten prompts (random seed 3, one blank line among them) and tiny offline Llama models
    (:func:`harvest_helpers.tiny_llama`): ``target`` (4 layers), ``draft`` (2 layers), ``other_tok``
    (the draft with a tokenizer that spells one word differently), ``idle`` (4 layers, layers 1 and 3
    identities); values are paths as str, ``root`` the directory holding them (a Path)."""
    import numpy as np

    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from harvest_helpers import WORDS, tiny_llama

    root = tmp_path_factory.mktemp("harvest")
    rng = np.random.default_rng(3)
    prompts = root / "prompts.txt"
    lines = [" ".join(rng.choice(WORDS, size=rng.integers(1, 6))) for _ in range(10)]
    prompts.write_text("\n".join(lines[:4]) + "\n\n" + "\n".join(lines[4:]) + "\n")
    return {
        "root": root,
        "prompts": str(prompts),
        "target": str(tiny_llama(root / "target", 0, 4)),
        "draft": str(tiny_llama(root / "draft", 1, 2)),
        "other_tok": str(tiny_llama(root / "other_tok", 1, 2, rename={"w28": "zz"})),
        "idle": str(tiny_llama(root / "idle", 5, 4, identity_layers=(1, 3))),
    }
