"""Hostile inputs of ``generate_data.py subset`` and of ``harvest`` with structured prompt files.

* subset: a missing data directory is named as missing; malformed source metadata and texts (cases generated from
  the keys the subset reads and the keys the harvest's ``texts.jsonl`` holds) are refused in one line naming the file
  (and the line and key); a category without a text in some split, and texts whose split is not the metadata's, are
  refused; the subset of an interrupted harvest keeps the source's state and says so; tree tables the output held
  from an earlier dataset are removed, and it says so; ``benchmark.py --by-category`` refuses a ``texts.jsonl`` of
  another dataset.
* structured prompt files: malformed JSON Lines (cases generated from every key of the format and every JSON type;
  a key twice in one object; nesting too deep) are refused in one line naming the file and the line; a line holding
  U+2028 inside a string is one line; a prompt longer than the target's context is refused before anything is
  harvested, naming its line.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from evolve.cli.generate import cli as generate_cli
from evolve.errors import InputError
from evolve.harvest.prompts import read_prompt_file
from evolve.harvest.resume import TEXTS_FILE
from evolve.harvest.subset import COUNT_KEYS, REQUIRED_KEYS
from evolve.traces.io import SPLITS, load_metadata
from evolve.traces.tree_tables import load_trees
from test_spec_bench import spec_harvest, spec_prompts  # noqa: F401 - the fixtures
from tree_helpers import record_files, write_tree_tables


def _subset(data, out, categories="qa"):
    return CliRunner().invoke(generate_cli, ["subset", "--data", str(data), "--categories", categories,
                                             "--out", str(out)])


def _refused(res, *culprits) -> str:
    assert res.exit_code == 2, res.output
    lines = [line for line in res.stderr.strip().splitlines() if not line.startswith("warning: ")]  # tiny splits
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in res.output, res.stderr
    for c in culprits:
        assert str(c) in lines[0], (c, lines[0])
    return lines[0]


@pytest.fixture
def source(spec_harvest, tmp_path) -> Path:  # noqa: F811 - the imported fixture
    d = tmp_path / "source"
    shutil.copytree(spec_harvest[0], d, ignore=shutil.ignore_patterns(".harvest"))
    return d


def test_a_missing_data_directory_is_named_missing(tmp_path):
    _refused(_subset(tmp_path / "nowhere", tmp_path / "out"), tmp_path / "nowhere", "no such directory")
    (tmp_path / "file").write_text("x")
    _refused(_subset(tmp_path / "file", tmp_path / "out"), "not a directory")
    (tmp_path / "empty").mkdir()
    _refused(_subset(tmp_path / "empty", tmp_path / "out"), "no metadata.json")


METADATA_CASES = {
    "splits a number": lambda m: m.update(splits=5),
    "splits a list": lambda m: m.update(splits=[]),
    "a split a string": lambda m: m["splits"].update(train="x"),
    "a split without valid": lambda m: m["splits"].pop("valid"),
    "a negative text id": lambda m: m["splits"]["train"].append(-1),
    "a text id as text": lambda m: m["splits"]["test"].append("3"),
    "complete as text": lambda m: m.update(complete="yes"),
    "statistics a list": lambda m: m.update(statistics=[]),
    "schema version": lambda m: m.update(schema_version=99),
}


@pytest.mark.parametrize("case", list(METADATA_CASES))
def test_malformed_source_metadata(source, tmp_path, case):
    meta = json.loads((source / "metadata.json").read_text())
    METADATA_CASES[case](meta)
    (source / "metadata.json").write_text(json.dumps(meta))
    _refused(_subset(source, tmp_path / "out"), source / "metadata.json")


def _text_cases(line: dict) -> dict:
    """Every key the subset reads (present in the harvest's line) given each JSON value it cannot be."""
    cases = {}
    for key in (*REQUIRED_KEYS, *COUNT_KEYS, "finish"):
        if key not in line:
            continue
        for bad in (None, True, -1, 1.5, "x", [], {}):
            ok = (key == "category" and bad == "x") or (key == "finish" and bad == "x")
            if not ok:
                cases[f"{key}={bad!r}"] = dict(line, **{key: bad})
        if key in REQUIRED_KEYS:
            cases[f"no {key}"] = {k: v for k, v in line.items() if k != key}
    cases["split dev"] = dict(line, split="dev")
    return cases


def test_malformed_texts_are_refused_naming_the_file_and_line(source, tmp_path):
    path = source / TEXTS_FILE
    lines = path.read_text().splitlines()
    cases = _text_cases(json.loads(lines[1]))
    cases.update({"not JSON": "{nope", "a list": [1, 2], "nested too deep": "[" * 100_000 + "]" * 100_000,
                  "a text twice": json.loads(lines[0])})
    assert len(cases) > 40
    for k, (case, bad) in enumerate(cases.items()):
        d = tmp_path / f"c{k}"
        shutil.copytree(source, d)
        text = lines[:1] + [bad if isinstance(bad, str) else json.dumps(bad)] + lines[2:]
        (d / TEXTS_FILE).write_text("\n".join(text) + "\n")
        _refused(_subset(d, tmp_path / f"out{k}"), f"{d / TEXTS_FILE}, line 2")


def test_a_category_without_a_text_in_a_split_is_refused(source, tmp_path):
    path = source / TEXTS_FILE
    texts = [json.loads(t) for t in path.read_text().splitlines()]
    gone = next(t for t in texts if t["category"] == "qa" and t["split"] == "test")
    path.write_text("".join(json.dumps(t) + "\n" for t in texts if t is not gone))
    meta = json.loads((source / "metadata.json").read_text())
    meta["splits"]["test"].remove(gone["seq_id"])
    meta["statistics"]["test"]["texts"] -= 1
    (source / "metadata.json").write_text(json.dumps(meta))
    records = pd.read_parquet(source / "test.parquet")  # and its records gone with it
    kept = records[records["seq_id"] != gone["seq_id"]]
    kept.to_parquet(source / "test.parquet", index=False)
    meta["statistics"]["test"].update(tokens=len(kept), sequences=int(kept["seq_id"].nunique()))
    (source / "metadata.json").write_text(json.dumps(meta))
    record_files(source)  # as if the harvest had written it so
    _refused(_subset(source, tmp_path / "out"), "category 'qa' has no text in the test split")
    res = _subset(source, tmp_path / "sum", "sum")
    assert res.exit_code == 0, res.output


def test_texts_in_another_split_than_the_metadatas_are_refused(source, tmp_path):
    path = source / TEXTS_FILE
    texts = [json.loads(t) for t in path.read_text().splitlines()]
    moved = next(t for t in texts if t["split"] == "train")
    moved["split"] = "valid"
    path.write_text("".join(json.dumps(t) + "\n" for t in texts))
    record_files(source)
    _refused(_subset(source, tmp_path / "out"), f"text {moved['seq_id']} is in split 'valid'", "key 'splits'")


def test_the_subset_of_an_interrupted_harvest_keeps_its_state(source, tmp_path):
    meta = json.loads((source / "metadata.json").read_text())
    meta.update(complete=False, texts_total=meta["texts_total"] + 7)
    (source / "metadata.json").write_text(json.dumps(meta))
    res = _subset(source, tmp_path / "out")
    assert res.exit_code == 0, res.output
    assert "warning:" in res.stderr and "interrupted harvest" in res.stderr
    sub = load_metadata(tmp_path / "out")
    assert sub["complete"] is False and sub["texts_done"] == 3
    # the prompts file is where the harvest read it: the subset counts the texts of qa it planned
    assert sub["texts_total"] == sum(t.category == "qa" for t in read_prompt_file(meta["config"]["prompts_path"]).texts)


def test_tree_tables_left_in_the_output_are_removed_and_said(source, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(source, out)
    write_tree_tables(out, seed=2)  # the output held a dataset with tree tables
    res = _subset(source, out)
    assert res.exit_code == 0, res.output
    assert res.stderr.count("trees.parquet: removed") == 3
    for s in SPLITS:
        with pytest.raises(InputError, match="no tree table"):
            load_trees(out, s)


def test_by_category_refuses_a_text_list_of_another_dataset(source, tmp_path):
    from evolve.cli.benchmark import cli as benchmark_cli

    path = source / TEXTS_FILE
    texts = [json.loads(t) for t in path.read_text().splitlines()]
    for t in texts:
        t["target_calls"] += 1
    path.write_text("".join(json.dumps(t) + "\n" for t in texts))
    res = CliRunner().invoke(benchmark_cli, ["--data", str(source), "--split", "test", "--by-category"])
    _refused(res, path, "not the text list written with this dataset")


# --- structured prompt files -----------------------------------------------------------------------------

FORMAT_KEYS = {"turns": [["ok"]], "category": ["a"], "question_id": [1]}  # key: its valid values
JSON_VALUES = [None, True, 0, -5, 1.5, "x", "", [], ["x", 3], {}, {"a": 1}, float("nan"), 10 ** 30]


def _line_cases() -> dict:
    cases = {}
    for key, valid in FORMAT_KEYS.items():
        for bad in JSON_VALUES:
            if bad in valid or (key == "category" and bad == "x") or (key == "question_id" and type(bad) is int
                                                                        and abs(bad) < 2 ** 63):
                continue
            cases[f"{key}={bad!r}"] = json.dumps({"turns": ["t"], "category": "a", key: bad})
        cases[f"{key} twice"] = '{"turns": ["t"], "category": "a", "%s": %s, "%s": %s}' % (
            key, json.dumps(valid[0]), key, json.dumps(valid[0]))
    cases["nested too deep"] = '{"turns": ["t"], "category": "a", "x": ' + "[" * 100_000 + "]" * 100_000 + "}"
    cases["not an object"] = "[1]"
    cases["not JSON"] = "{'turns': ['t']}"
    return cases


def test_malformed_jsonl_lines_are_refused_naming_the_file_and_line(tmp_path):
    cases = _line_cases()
    assert len(cases) > 30
    good = json.dumps({"turns": ["fine"], "category": "a", "question_id": 7})
    for k, (case, line) in enumerate(cases.items()):
        path = tmp_path / f"c{k}.jsonl"
        path.write_text(f"{good}\n{line}\n")
        with pytest.raises(InputError) as err:
            read_prompt_file(str(path))
        text = str(err.value)
        assert f"{path}, line 2" in text and "\n" not in text, (case, text)


def test_a_question_id_given_twice_in_one_object_is_refused(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text('{"turns": ["a"], "question_id": 1, "question_id": 2}\n')
    with pytest.raises(InputError, match=r"line 1: key 'question_id': appears twice"):
        read_prompt_file(str(path))


def test_a_line_separator_inside_a_string_stays_on_its_line(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text(json.dumps({"turns": ["a\u2028b"]}, ensure_ascii=False) + "\n" + "{bad\n")
    with pytest.raises(InputError, match=r"q\.jsonl, line 2: not valid JSON"):
        read_prompt_file(str(path))


@pytest.mark.usefixtures("one_thread")
def test_a_prompt_longer_than_the_context_is_refused_naming_it(llama_files, tmp_path):
    from harvest_helpers import WORDS

    from evolve.cli.harvest import harvest

    rows = [{"question_id": i, "category": "a", "turns": [" ".join(WORDS[:3])]} for i in range(3)]
    rows[1]["turns"] = [" ".join(WORDS * 10)]  # 290 words: more than the tiny target's 256 positions
    path = tmp_path / "long.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out"
    res = CliRunner().invoke(harvest, ["--target", llama_files["target"], "--draft", llama_files["draft"],
                                       "--prompts", str(path), "--gamma", "2", "--max-new-tokens", "4",
                                       "--out", str(out), "--no-progress"])
    _refused(res, f"{path}, line 2", "context of 256 tokens")
    assert not (out / "train.parquet").exists()
