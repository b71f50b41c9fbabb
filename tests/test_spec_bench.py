"""Structured prompt files (Spec-Bench-style JSON Lines): parsing, multi-turn harvests, stratified splits,
category selection and the per-category tables.

The harvests run on the tiny offline Llama models of ``conftest.py`` (``llama_files``); nothing is downloaded.
"""
from __future__ import annotations

import dataclasses
import json
import os

import numpy as np
import pytest

from evolve.errors import InputError
from evolve.harvest.prompts import assign_question_splits, assign_splits, read_prompt_file, turn_passes


def _write(tmp_path, name: str, rows: list) -> str:
    path = tmp_path / name
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return str(path)


# --- parsing ------------------------------------------------------------------------------------


def test_jsonl_questions_become_one_text_per_turn(tmp_path):
    path = _write(tmp_path, "q.jsonl", [{"question_id": 7, "category": "a", "turns": ["x y", "z"]}, "",
                                        {"question_id": 9, "category": "b", "turns": ["u"]}])
    prompts = read_prompt_file(path)
    assert prompts.structured and prompts.questions == 2 and prompts.categories == ("a", "b")
    assert [(t.prompt, t.line, t.question, t.turn, t.category, t.question_id) for t in prompts.texts] == [
        ("x y", 1, 0, 1, "a", 7), ("z", 1, 0, 2, "a", 7), ("u", 3, 1, 1, "b", 9)]
    assert prompts.earlier_turns(1) == [0] and prompts.earlier_turns(2) == []
    assert turn_passes(prompts, [2, 1, 0]) == [[2, 0], [1]]
    only_b = prompts.select(["b"])
    assert [(t.prompt, t.question) for t in only_b.texts] == [("u", 0)]


def test_plain_files_read_as_before(tmp_path):
    path = tmp_path / "p.txt"
    path.write_text('{"turns": ["not json lines"]}\n\nsecond\n')
    prompts = read_prompt_file(str(path))
    assert not prompts.structured and prompts.prompts == ['{"turns": ["not json lines"]}', "second"]
    assert prompts.lines == [1, 3] and not prompts.categories
    assert assign_question_splits(read_prompt_file(_write(tmp_path, "n.txt", [f"p{i}" for i in range(23)])),
                                  4) == assign_splits(23, 4)


@pytest.mark.parametrize("row, message", [
    ("{not json", "line 2: not valid JSON"),
    ("[1, 2]", "line 2: expected a JSON object, found list"),
    ({"category": "a"}, "line 2: key 'turns': missing"),
    ({"turns": []}, "line 2: key 'turns': expected a non-empty list of strings"),
    ({"turns": ["ok", 3]}, "line 2: key 'turns': turn 2 is not a non-empty string"),
    ({"turns": ["ok"], "category": ""}, "line 2: key 'category': expected a non-empty string"),
    ({"turns": ["ok"]}, "line 2: key 'category': missing while line 1 gives one"),
    ({"turns": ["ok"], "category": "a", "question_id": "7"}, "line 2: key 'question_id': expected an integer"),
    ({"turns": ["ok"], "category": "a", "question_id": 1}, "line 2: key 'question_id': 1 repeats line 1"),
])
def test_bad_jsonl_lines_give_one_line_errors(tmp_path, row, message):
    path = _write(tmp_path, "bad.jsonl", [{"question_id": 1, "category": "a", "turns": ["fine"]}, row])
    with pytest.raises(InputError) as err:
        read_prompt_file(path)
    text = str(err.value)
    assert f"{path}, {message}" in text and "\n" not in text and err.value.param == "prompts"


def test_unknown_category_lists_the_known_ones(tmp_path):
    path = _write(tmp_path, "q.jsonl", [{"category": c, "turns": ["t"]} for c in ("a", "b")])
    with pytest.raises(InputError, match=r"unknown category 'c' \(the file has: a, b\)"):
        read_prompt_file(path).select(["c"])


def test_stratified_splits_hold_every_category(tmp_path):
    rows = [{"question_id": i, "category": f"c{i % 4}", "turns": ["t"] * (1 + (i % 4 == 0))} for i in range(60)]
    prompts = read_prompt_file(_write(tmp_path, "q.jsonl", rows))
    splits = assign_question_splits(prompts, 3)
    assert sorted(sum(splits.values(), [])) == list(range(len(prompts.texts)))
    for name, idx in splits.items():
        assert {prompts.texts[t].category for t in idx} == set(prompts.categories), name
        questions = {prompts.texts[t].question for t in idx}
        # both turns of a question in one split
        assert all(prompts.texts[t].question in questions for t in idx)
    for q in range(prompts.questions):
        owners = {name for name, idx in splits.items() for t in idx if prompts.texts[t].question == q}
        assert len(owners) == 1
    assert len({prompts.texts[t].question for t in splits["valid"]}) == 4 * 2  # round(0.1 * 15) per category
    with pytest.raises(InputError, match="category 'c3' has 2 question"):
        assign_question_splits(read_prompt_file(_write(tmp_path, "s.jsonl", rows[:11])), 3)


# --- harvest and live on the tiny models --------------------------------------------------------

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"


@pytest.fixture(scope="module")
def spec_prompts(llama_files):
    """Three categories of three questions, the first category's questions with two turns."""
    rng = np.random.default_rng(8)
    from harvest_helpers import WORDS

    def words():
        return " ".join(rng.choice(WORDS, size=int(rng.integers(2, 5))))

    rows = [{"question_id": 100 + i, "category": ("chat", "qa", "sum")[i // 3],
             "turns": [words(), words()] if i < 3 else [words()]} for i in range(9)]
    path = llama_files["root"] / "spec.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


@pytest.fixture(scope="module")
def spec_harvest(llama_files, spec_prompts):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from harvest_helpers import harvest_config

    from evolve.harvest import loop as hv

    out = llama_files["root"] / "out-spec"
    config = harvest_config(llama_files, out, prompts=spec_prompts, skip_layers=(1, 2), max_new_tokens=8)
    return out, hv.harvest(config, progress=False)


@pytest.mark.usefixtures("one_thread")
def test_multi_turn_harvest_carries_categories_and_answers(spec_harvest):
    from evolve.traces.io import SPLITS, load_dataset, load_metadata

    out, result = spec_harvest
    assert result.texts_done == result.texts_total == 12 and result.consolidated
    data = load_dataset(out)
    meta = load_metadata(out)
    for name in SPLITS:
        tr = data[name]
        assert set(tr["category"]) == {"chat", "qa", "sum"}, name  # stratified: every category in every split
        assert tr["question_id"].dtype == np.int64
    texts = [json.loads(line) for line in (out / "texts.jsonl").read_text().splitlines()]
    by_id = {t["seq_id"]: t for t in texts}
    second = [t for t in texts if t["turn"] == 2]
    assert len(second) == 3
    assert all(by_id[t["seq_id"] - 1]["completion"].replace("</s>", "").strip() for t in second)
    for t in second:
        first = by_id[t["seq_id"] - 1]
        assert first["turn"] == 1 and first["question_id"] == t["question_id"] and first["split"] == t["split"]
        answer = first["completion"].replace("</s>", "").strip()
        assert first["prompt"] in t["context"] and answer in t["context"] and t["prompt"] in t["context"]
        assert t["context"].index(first["prompt"]) < t["context"].index(t["prompt"])
    for name in SPLITS:
        tr = data[name]
        for seq in np.unique(tr["seq_id"]):
            rows = tr["seq_id"] == seq
            assert set(tr["category"][rows]) == {by_id[int(seq)]["category"]}
            assert set(tr["question_id"][rows].tolist()) == {by_id[int(seq)]["question_id"]}
    assert "within each category" in meta["config"]["split_rule"]


@pytest.mark.usefixtures("one_thread")
def test_categories_option_selects_questions(llama_files, spec_prompts, tmp_path):
    from harvest_helpers import run_harvest

    out = tmp_path / "qa"
    code, output = run_harvest(["--target", llama_files["target"], "--prompts", spec_prompts, "--draft-skip-layers",
                                "1,2", "--max-new-tokens", "4", "--out", str(out), "--categories", "qa,sum",
                                "--no-progress"])
    assert code == 0, output
    texts = [json.loads(line) for line in (out / "texts.jsonl").read_text().splitlines()]
    assert {t["category"] for t in texts} == {"qa", "sum"} and len(texts) == 6
    code, output = run_harvest(["--target", llama_files["target"], "--prompts", spec_prompts, "--draft-skip-layers",
                                "1,2", "--out", str(tmp_path / "x"), "--categories", "qa,nope", "--no-progress"])
    assert code != 0 and "unknown category 'nope' (the file has: chat, qa, sum)" in output


# --- the per-category tables --------------------------------------------------------------------


def test_per_category_tables_only_for_data_with_categories(spec_harvest, vocab_dataset, tmp_path):
    from evolve.commands.compare.categories import category_benchmark
    from evolve.commands.compare.table import BenchmarkOptions

    costs = tmp_path / "costs.json"
    costs.write_text(json.dumps({"target_forward_s": [0.020, 0.021, 0.022, 0.023, 0.024], "draft_token_s": 0.004,
                                 "plain_token_s": 0.020}))
    out, _ = spec_harvest
    options = BenchmarkOptions(data_dir=out, split="test", repeats=1, costs=costs,
                               champions_dir=tmp_path / "none")
    _, text = category_benchmark(options)
    assert "Per task group, split test" in text and "Tokens per second (cost file)" in text
    table = text[text.index("Per task group"):]
    header = next(line for line in table.splitlines() if line.startswith("Rule"))
    assert header.split()[1:] == ["QA", "chat", "sum", "Overall"]
    assert any(line.startswith("best_fixed_gamma") for line in table.splitlines())
    assert all(len(line) <= 100 for line in text.splitlines())
    _, wide = category_benchmark(options, by_category=True)
    assert "Per category and task group" in wide and "qa" in wide
    _, plain = category_benchmark(BenchmarkOptions(data_dir=vocab_dataset, split="test", repeats=1,
                                                   champions_dir=tmp_path / "none"))
    assert "Per task group" not in plain and "Per category" not in plain
    _, as_json = category_benchmark(dataclasses.replace(options, fmt="json"))
    found = json.loads(as_json)["categories"]["test"]
    assert found["columns"] == ["QA", "chat", "sum", "Overall"]
    overall = found["rows"]["standard_rejection"][-1]
    assert overall["tokens_per_call"] > 1 and overall["tokens_per_second"] > 0
    assert len(found["acceptance"]["Overall"]) == 4
    _, plain_json = category_benchmark(BenchmarkOptions(data_dir=vocab_dataset, split="test", repeats=1, fmt="json",
                                                        champions_dir=tmp_path / "none"))
    assert "categories" not in json.loads(plain_json)


def test_per_group_tables_give_each_champion_its_share_of_the_headroom(spec_harvest, tmp_path):
    from evolve.commands.compare.categories import category_benchmark
    from evolve.commands.compare.table import BenchmarkOptions
    from heuristics.champions import Champion, save_champion

    costs = tmp_path / "costs.json"
    costs.write_text(json.dumps({"target_forward_s": [0.020, 0.021, 0.022, 0.023, 0.024], "draft_token_s": 0.004,
                                 "plain_token_s": 0.020}))
    champ = Champion(name="two", expression="sub(1.5, draft_index)", description="test", kind="verify-length",
                     features=[], metrics={"train": {"fitness": 0.5}, "valid": {"fitness": 0.5}})
    path = save_champion(champ, tmp_path)[0]
    out, _ = spec_harvest
    options = BenchmarkOptions(data_dir=out, split="test", repeats=1, costs=costs, champions=(path,),
                               champions_dir=tmp_path / "none")
    _, text = category_benchmark(options)
    assert "Share of the headroom each champion captures" in text
    # each caveat once, naming its columns, as prose under the table: never cut into its columns
    caveats = [line for line in text.splitlines() if line.startswith("caveat (")]
    assert caveats and len(caveats) == len(set(caveats))
    table = text[text.index("Share of the headroom each champion captures"):]
    assert all(line.startswith(("caveat (", "  ")) or "caveat" not in line for line in table.splitlines())
    _, as_json = category_benchmark(dataclasses.replace(options, fmt="json"))
    doc = json.loads(as_json)
    shares = doc["categories"]["test"]["headroom"]["two"]
    assert len(shares) == 4 and all(h is None or set(h) >= {"share", "low", "high", "texts"} for h in shares)
    (rec,) = doc["headroom"]
    assert rec["champion"] == "two" and shares[-1]["bound"] == pytest.approx(rec["headroom"]["bound"])


@pytest.mark.usefixtures("one_thread")
def test_live_decodes_a_jsonl_file_turn_by_turn(llama_files, spec_prompts, spec_harvest, tmp_path):
    from evolve.cli.benchmark import cli
    from evolve.harvest.config import HarvestConfig
    from evolve.harvest.loop import build, text_rng
    from evolve.harvest.prompts import encode_prompt
    from evolve.live.decoding import autoregressive_text
    from evolve.commands.live import resolve_rules, run_live
    from evolve.report.live import format_table
    from evolve.traces.io import load_metadata
    from click.testing import CliRunner

    config = HarvestConfig(target=llama_files["target"], prompts=spec_prompts, skip_layers=(1, 2), gamma=3,
                           max_new_tokens=6, temperature=0.0, seed=2)
    report = run_live(config, resolve_rules(["standard_rejection"]), texts=[1])  # turn 2 of question 0
    # turn 1 is decoded first (its answer is turn 2's context), so both count: 2 texts of category chat
    assert set(report.by_category) == {"chat"}
    ar = report.by_category["chat"][0]
    assert ar.tokens == report.autoregressive.tokens and report.counts[0].tokens == report.rows[0]["tokens"]
    # greedy: the plain decoding of turn 2 equals decoding it after the plain answer to turn 1, by hand
    setup = build(config)
    tok, vocab = setup.target.tokenizer, setup.engine.vocab
    rows = [json.loads(line) for line in open(spec_prompts)]
    first = encode_prompt(tok, rows[0]["turns"][0], "q", vocab)
    answer, _ = autoregressive_text(setup.engine, first, 6, text_rng(2, 0))
    second = encode_prompt(tok, rows[0]["turns"][1], "q", vocab,
                           history=[(rows[0]["turns"][0], tok.decode(answer, skip_special_tokens=True).strip())])
    answer2, counts2 = autoregressive_text(setup.engine, second, 6, text_rng(2, 1))
    assert ar.tokens == len(answer) + len(answer2)
    assert "Per task group" in format_table(report)
    out, _ = spec_harvest
    categories = load_metadata(out)["config"].get("categories")
    assert categories is None
    result = CliRunner().invoke(cli, ["live", "--target", llama_files["target"], "--prompts", spec_prompts,
                                      "--draft-skip-layers", "1,2", "--rule", "standard_rejection", "--data",
                                      str(out), "--split", "test", "--max-new-tokens", "4", "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "Per task group (Spec-Bench's layout)" in result.output
    bad = CliRunner().invoke(cli, ["live", "--target", llama_files["target"], "--prompts", spec_prompts,
                                   "--draft-skip-layers", "1,2", "--rule", "standard_rejection", "--data", str(out),
                                   "--categories", "qa", "--no-progress"])
    assert bad.exit_code != 0 and "harvested with every category" in bad.output


def test_text_columns_are_optional_and_checked():
    import pandas as pd

    from evolve.traces.io import Traces

    base = {"seq_id": [0, 0], "position": [0, 1], "draft_prob": [0.5, 0.5], "target_prob": [0.5, 0.25],
            "draft_entropy": [1.0, 1.0], "target_entropy": [1.0, 1.0], "top_token_match": [True, False],
            "rand_value": [0.1, 0.9], "baseline_accepts": [True, False]}
    assert not Traces.from_frame(pd.DataFrame(base)).has("category")
    tr = Traces.from_frame(pd.DataFrame({**base, "category": ["qa", "qa"], "question_id": [7, 7]}))
    assert tr["category"].tolist() == ["qa", "qa"] and tr["question_id"].dtype == np.int64
    with pytest.raises(InputError, match="column 'category', row 1: expected a non-empty string"):
        Traces.from_frame(pd.DataFrame({**base, "category": ["qa", 3]}))
    with pytest.raises(InputError, match="column 'question_id'"):
        Traces.from_frame(pd.DataFrame({**base, "question_id": [1.5, 2.0]}))


@pytest.mark.usefixtures("one_thread")
def test_tree_rows_carry_the_text_columns(llama_files, spec_prompts, tmp_path):
    from harvest_helpers import harvest_config

    from evolve.harvest import loop as hv
    from evolve.traces.io import SPLITS, load_dataset
    from evolve.traces.tree_tables import load_trees

    out = tmp_path / "trees"
    hv.harvest(harvest_config(llama_files, out, prompts=spec_prompts, draft=llama_files["draft"], tree_nodes=3,
                              max_new_tokens=4), progress=False)
    records = load_dataset(out)
    for name in SPLITS:
        table = load_trees(out, name)
        assert set(table.columns["category"].tolist()) == set(records[name]["category"].tolist())
        seq = dict(zip(records[name]["seq_id"].tolist(), records[name]["question_id"].tolist()))
        assert all(seq[s] == q for s, q in zip(table.columns["seq_id"].tolist(),
                                               table.columns["question_id"].tolist()) if s in seq)


@pytest.mark.usefixtures("one_thread")
def test_multi_turn_harvest_resumes_to_the_same_dataset(llama_files, spec_prompts, spec_harvest, tmp_path):
    from harvest_helpers import harvest_config, stop_after

    from evolve.harvest import loop as hv
    from evolve.traces.io import SPLITS, load_dataset

    out = tmp_path / "resumed"
    config = harvest_config(llama_files, out, prompts=spec_prompts, skip_layers=(1, 2), max_new_tokens=8)
    first = hv.harvest(config, progress=False, on_text_done=stop_after(5))  # first turns only: answers on disk
    assert first.interrupted and first.texts_done == 5
    hv.harvest(config, progress=False)
    whole, _ = spec_harvest
    assert (out / "texts.jsonl").read_text() == (whole / "texts.jsonl").read_text()
    a, b = load_dataset(out), load_dataset(whole)
    for name in SPLITS:
        assert a[name].to_frame().equals(b[name].to_frame())


# --- subsets and one policy per task group ----------------------------------------------------------


def test_subset_is_the_harvest_of_its_categories(spec_harvest, tmp_path):
    from evolve.harvest.subset import read_texts, subset_dataset
    from evolve.traces.io import SPLITS, load_dataset, load_metadata

    whole, _ = spec_harvest
    out = tmp_path / "qa"
    stats = subset_dataset(whole, ["qa"], out)
    full, part = load_dataset(whole), load_dataset(out)  # the loader checks the statistics against the records
    for name in SPLITS:
        keep = full[name]["category"] == "qa"
        assert keep.any() and set(part[name]["category"].tolist()) == {"qa"}
        assert part[name].to_frame().reset_index(drop=True).equals(
            full[name].to_frame()[keep].reset_index(drop=True))
        assert stats[name]["tokens"] == int(keep.sum()) and stats[name]["texts"] == len(
            np.unique(full[name]["seq_id"][keep]))
    texts = read_texts(out)
    assert {t["category"] for t in texts} == {"qa"} and len(texts) == 3
    meta = load_metadata(out)
    assert meta["subset"]["categories"] == ["qa"]
    assert sorted(i for s in SPLITS for i in meta["splits"][s]) == sorted(t["seq_id"] for t in texts)
    assert meta["statistics"]["test"]["target_calls"] == sum(t["target_calls"] for t in texts if t["split"] == "test")
    with pytest.raises(InputError, match="has no category 'nope' \\(it has chat, qa, sum\\)"):
        subset_dataset(whole, ["nope"], tmp_path / "x")
    with pytest.raises(InputError, match="is the source dataset"):
        subset_dataset(whole, ["qa"], whole)


def _groups_runs(spec_harvest, tmp_path):
    """A runs directory of scripts/spec_bench_groups.sh with hand-made champions: the single policy a fixed length
    of 1, each group's policy a fixed length of 3."""
    from evolve.harvest.subset import subset_dataset
    from evolve.commands.compare.categories import category_benchmark  # noqa: F401  (the benchmark's own module)
    from heuristics.champions import Champion, save_champion

    whole, _ = spec_harvest
    runs = tmp_path / "runs"
    runs.mkdir()
    costs = tmp_path / "costs.json"
    costs.write_text(json.dumps({"target_forward_s": [0.020, 0.021, 0.022, 0.023, 0.024], "draft_token_s": 0.004,
                                 "plain_token_s": 0.020}))

    def champ(directory, name, expression):
        c = Champion(name=name, expression=expression, description="test", kind="verify-length", features=[],
                     metrics={"train": {"fitness": 0.5}, "valid": {"fitness": 0.5}})
        return save_champion(c, directory)[0]

    champ(tmp_path, "single", "sub(1.5, draft_index)").rename(runs / "single.json")
    for group in ("chat", "qa", "sum"):
        d = runs / group
        subset_dataset(whole, [group], d / "data")
        champ(tmp_path, f"g{group}", "sub(3.5, draft_index)").rename(d / "group.json")
    return runs, costs


def test_groups_table_compares_one_policy_with_one_per_group(spec_harvest, tmp_path):
    from click.testing import CliRunner

    from evolve.cli.benchmark import cli
    from evolve.commands.groups import group_rows
    from evolve.report.groups import COLUMNS, combined

    runs, costs = _groups_runs(spec_harvest, tmp_path)
    for group in ("chat", "qa", "sum"):
        result = CliRunner().invoke(cli, ["--data", str(runs / group / "data"), "--split", "test", "--costs",
                                          str(costs), "--champion", str(runs / "single.json"), "--champion",
                                          str(runs / group / "group.json"), "--repeats", "1", "--format", "json",
                                          "--output", str(runs / group / "bench.json")])
        assert result.exit_code == 0, result.output
    rows = group_rows(runs)
    assert [r["label"] for r in rows] == ["QA", "chat", "sum"]  # Spec-Bench's group order, then the others
    for r in rows:
        bench = json.loads((runs / r["label"].lower() / "bench.json").read_text())
        by_expr = {b["expression"]: b["tokens_per_second"] for b in bench["rows"] if b["role"] == "champion"}
        assert r["tps"][COLUMNS[0]] == by_expr["sub(1.5, draft_index)"]
        assert r["tps"][COLUMNS[1]] == by_expr["sub(3.5, draft_index)"]
    total = combined(rows)
    tokens = sum(r["tokens"] for r in rows)
    assert total[COLUMNS[1]] == pytest.approx(tokens / sum(r["tokens"] / r["tps"][COLUMNS[1]] for r in rows))
    assert min(r["tps"][COLUMNS[0]] for r in rows) <= total[COLUMNS[0]] <= max(r["tps"][COLUMNS[0]] for r in rows)
    result = CliRunner().invoke(cli, ["groups", "--runs", str(runs)])
    assert result.exit_code == 0, result.output
    assert [line.split()[0] for line in result.output.splitlines()[1:5]] == ["QA", "chat", "sum", "All"]
    assert all(len(line) <= 100 for line in result.output.splitlines())
    assert "headroom of the single policy" in result.output
    assert all(set(r["headroom"]) == set(COLUMNS[:2]) for r in rows)
    doc = json.loads(CliRunner().invoke(cli, ["groups", "--runs", str(runs), "--format", "json"]).output)
    assert set(doc["combined_headroom"]) == set(COLUMNS[:2])
    (runs / "qa" / "bench.json").write_text(json.dumps({"rows": []}))
    result = CliRunner().invoke(cli, ["groups", "--runs", str(runs)])
    assert result.exit_code == 2 and "qa/bench.json: no row of the test split" in result.stderr


def test_a_wide_per_group_headroom_table_keeps_its_caveats_whole():
    """Seven columns of shares are wider than 100 columns, so the table is cut into column groups; the caveats under
    it are prose, each once with the columns it applies to, never cut into the table's columns."""
    from evolve.report.compare.categories import CategoryFigures, format_categories
    from evolve.report.compare.rows import Row

    columns = ["Multi-turn", "Translation", "Summarization", "QA", "Math reasoning", "RAG", "Overall"]
    caveat = "only 8 texts: with fewer than 10 the percentile interval is narrower than 95% coverage"
    shares = [{"share": 0.5, "low": 0.25, "high": 0.75, "texts": 8 if c != "Overall" else 48,
               "caveat": caveat if c != "Overall" else None} for c in columns]
    rows = {"champion": [Row("champion", "champion", "test", "data", None, 0.0)] * len(columns)}
    text = format_categories(CategoryFigures("test", columns, rows, {}, False, headroom={"champion": shares}))
    assert all(len(line) <= 100 for line in text.splitlines())
    assert text.count("Share of the headroom each champion captures") == 1
    assert sum(line.count("0.50 [0.25, 0.75]") for line in text.splitlines()) == len(columns)
    prose = " ".join(line for line in text[text.index("caveat ("):].splitlines())
    assert prose.startswith(f"caveat ({', '.join(columns[:-1])}): only 8 texts") and prose.count("caveat") == 1
    assert "95% coverage" in prose and "Overall" not in prose
