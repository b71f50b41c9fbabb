"""Derived files travel with what they derive from: a dataset's tree tables, ``texts.jsonl`` and metadata are read
only with the records they were written with.

The cases are generated from what a dataset records: every file ``metadata.json`` lists under ``files`` (the records
of each split, each tree table, the text list), swapped for the same file of another dataset (same names, same
layout, another seed), must be refused by every reader of that kind of file (:data:`READERS`), in one line naming
the file; the untouched dataset loads through every reader. Besides: records written again into a directory that
still holds another dataset's tree tables; a dataset of an earlier version (no digests) still loads and is checked by
its counts; and every module that reads a dataset's records, tree tables or texts calls the one check
(:func:`evolve.traces.binding.check_bound`), found by parsing the source.
"""
from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from evolve.errors import InputError
from evolve.harvest.resume import TEXTS_FILE, tree_stats
from evolve.harvest.subset import read_texts
from evolve.traces.binding import FILES_KEY
from evolve.traces.chunks import iter_split_chunks
from evolve.traces.io import SPLITS, load_metadata, load_split, write_dataset
from evolve.traces.synth.generate import generate_dataset
from evolve.traces.tree_tables import load_trees
from tree_helpers import random_tree, tree_frame

ROOT = Path(__file__).resolve().parents[1]


def _write(directory: Path, seed: int, trees: bool = True, texts: bool = True) -> Path:
    """A dataset with tree tables and a text list (texts of two categories), as a tree harvest writes one."""
    data = generate_dataset("vocab", seed, 15)
    tables: dict = {s: data.splits[s] for s in SPLITS}
    stats = {s: {"tokens": data.splits[s].n, "sequences": int(np.unique(data.splits[s]["seq_id"]).size)}
             for s in SPLITS}
    lines = []
    for k, s in enumerate(SPLITS):
        seqs = np.unique(data.splits[s]["seq_id"])
        if trees:
            rng = np.random.default_rng([seed, k])
            frame = pd.concat([tree_frame([random_tree(rng, 7, 3) for _ in range(2 + seed % 3)], seq_id=int(q))
                               for q in seqs[:4]], ignore_index=True)
            tables[f"{s}.trees"] = frame
            stats[s]["trees"] = tree_stats(frame)
        lines += [{"seq_id": 1000 * k + int(q), "split": s, "category": ("a", "b")[int(q) % 2], "tokens": seed,
                   "target_calls": 3} for q in seqs]  # text ids are distinct over the splits
        stats[s]["texts"] = len(seqs)
    extras = {TEXTS_FILE: "".join(json.dumps(t) + "\n" for t in lines).encode()} if texts else None
    write_dataset(directory, tables, {"generator": "test", "statistics": stats}, extras=extras)
    return directory


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("binding")
    return _write(root / "a", 3), _write(root / "b", 4)


def _by_split(reader):
    return lambda d, name: reader(d, name.split(".")[0])


#: The readers of each kind of file of a dataset (by how its name ends), each a function of (directory, file name).
READERS = {
    ".parquet": {"load_split": _by_split(load_split), "iter_split_chunks": _by_split(lambda d, s: list(
        iter_split_chunks(d, s))), "load_trees (its split's records)": _by_split(load_trees)},
    ".trees.parquet": {"load_trees": _by_split(load_trees)},
    TEXTS_FILE: {"read_texts": lambda d, name: read_texts(d)},
}


def _kind(name: str) -> str:
    return next(k for k in sorted(READERS, key=len, reverse=True) if name.endswith(k))


def _cases(pair_dir: Path) -> list[str]:
    return sorted(load_metadata(pair_dir)[FILES_KEY])


def test_the_record_lists_every_file_written(pair):
    a, _ = pair
    files = load_metadata(a)[FILES_KEY]
    assert set(files) == {f"{s}.parquet" for s in SPLITS} | {f"{s}.trees.parquet" for s in SPLITS} | {TEXTS_FILE}
    assert files[TEXTS_FILE]["rows"] == len(read_texts(a))
    for kind, readers in READERS.items():  # the untouched dataset loads through every reader
        for name in (n for n in files if _kind(n) == kind):
            for reader in readers.values():
                reader(a, name)


def test_every_file_swapped_for_another_datasets_is_refused_by_every_reader(pair, tmp_path):
    a, b = pair
    for name in _cases(a):
        for label, reader in READERS[_kind(name)].items():
            d = tmp_path / f"{name}-{label.split()[0]}"
            shutil.copytree(a, d)
            shutil.copy(b / name, d / name)
            with pytest.raises(InputError) as err:
                reader(d, name)
            text = str(err.value)
            assert str(d / name) in text and "\n" not in text, (name, label, text)


def test_records_written_again_beside_another_datasets_tree_tables(pair, tmp_path):
    """Records regenerated into a directory holding the tree tables and text list of the dataset it held before: the
    write removes them (the directory holds one dataset), so they are never read with the new records; a table put
    back beside them is refused, the new metadata not listing it."""
    a, _ = pair
    d = tmp_path / "d"
    shutil.copytree(a, d)
    data = generate_dataset("vocab", 9, 15)
    write_dataset(d, {s: data.splits[s] for s in SPLITS}, {"generator": "test"})
    assert not list(d.glob("*.trees.parquet")) and not (d / "texts.jsonl").exists()
    for s in SPLITS:
        load_split(d, s)
        with pytest.raises(InputError, match=rf"{s}\.trees\.parquet: no tree table for split"):
            load_trees(d, s)
        shutil.copy(a / f"{s}.trees.parquet", d / f"{s}.trees.parquet")
        with pytest.raises(InputError, match=rf"{s}\.trees\.parquet: a tree table that was not written with this "):
            load_trees(d, s)
    shutil.copy(a / "texts.jsonl", d / "texts.jsonl")
    with pytest.raises(InputError, match=r"texts\.jsonl: a text list that was not written with this dataset"):
        read_texts(d)


def test_a_dataset_of_an_earlier_version_is_checked_by_its_counts(pair, tmp_path):
    """Without digests (an earlier version's metadata) the files load, and another dataset's tree table or text list
    of other counts is refused by the statistics the metadata holds."""
    a, b = pair
    d = tmp_path / "old"
    shutil.copytree(a, d)
    meta = json.loads((d / "metadata.json").read_text())
    del meta[FILES_KEY]
    (d / "metadata.json").write_text(json.dumps(meta))
    for s in SPLITS:
        load_split(d, s)
        load_trees(d, s)
    read_texts(d)
    shutil.copy(b / "test.trees.parquet", d / "test.trees.parquet")
    with pytest.raises(InputError, match=r"test\.trees\.parquet: holds \d+ where .*statistics\.test\.trees\.nodes"):
        load_trees(d, "test")
    other = d / TEXTS_FILE
    other.write_text(other.read_text() + json.dumps({"seq_id": 999, "split": "test", "category": "a"}) + "\n")
    with pytest.raises(InputError, match=r"texts\.jsonl: holds \d+ where .*statistics\.test\.texts"):
        read_texts(d)


# --- every reader calls the one check ------------------------------------------------------------------------

#: Names whose use marks a module that reads a dataset's files, and the calls that read a file's content.
LOCATORS = {"split_path", "tree_path", "TEXTS_FILE", "TREE_FILE"}
CONTENT_READS = {"read_parquet", "read_table", "ParquetFile", "read_bytes", "read_text", "_read_frame", "open"}
#: Modules that name a dataset's files without reading their content as data: the writers, the output guard, the
#: run's provenance digests (a digest of the file, pinned for the run), existence checks and the speed harness's
#: file sizes.
NOT_READERS = {"evolve/harvest/resume.py", "evolve/files/guard.py",
               "evolve/search/checkpoint.py", "evolve/search/rundir.py", "evolve/api.py", "evolve/perf/islands.py",
               "evolve/perf/measure.py", "evolve/engine/tree_draft.py", "evolve/cli/harvest.py"}


def _names(tree: ast.AST) -> set[str]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
    return found


def test_every_module_reading_a_datasets_files_calls_the_one_check():
    readers = []
    for path in sorted(ROOT.joinpath("evolve").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel in NOT_READERS or rel == "evolve/traces/binding.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = _names(tree)
        if names & LOCATORS and names & CONTENT_READS:
            readers.append(rel)
            assert names & {"check_bound", "load_split", "load_trees", "read_texts", "iter_split_chunks"}, \
                f"{rel} reads a dataset's files without evolve.traces.binding.check_bound"
    assert {"evolve/traces/io.py", "evolve/traces/tree_tables.py", "evolve/traces/chunks.py",
            "evolve/harvest/subset.py"} <= set(readers)


# --- a harvest's parts: a text's tree table travels with its records part --------------------------------

@pytest.mark.usefixtures("one_thread")
def test_a_tree_part_of_another_text_is_refused_on_resume(llama_files, tmp_path):
    """The records part of a text records its tree table's SHA-256; a tree part swapped for another text's is
    refused by the consolidation (a resume), naming it, instead of being gathered into the dataset."""
    pytest.importorskip("torch")
    from harvest_helpers import harvest_config, stop_after

    from evolve.harvest import loop as hv
    from evolve.harvest.resume import WORK_DIR, finished_texts, tree_part_path

    cfg = harvest_config(llama_files, tmp_path / "out", draft=llama_files["draft"], tree_nodes=4, tree_width=2,
                         max_new_tokens=6)
    first = hv.harvest(cfg, progress=False, on_text_done=stop_after(3))
    assert first.interrupted
    work = tmp_path / "out" / WORK_DIR
    a, b = sorted(finished_texts(work))[:2]
    shutil.copy(tree_part_path(work, b), tree_part_path(work, a))
    with pytest.raises(InputError) as err:
        hv.harvest(cfg, progress=False)
    assert str(tree_part_path(work, a)) in str(err.value) and f"part file of text {a}" in str(err.value)
