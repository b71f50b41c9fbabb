"""Round 6 of hostile inputs around harvested datasets and searches: refused in one line naming what disagrees, before
the models load where the disagreement is in the settings, and a cross-validated search says what it does.

* Two group directories holding one category are refused naming both (the combined line would count it twice).
* A ``texts.jsonl`` disagreeing with its records (a text's category or split) is refused naming the text, both files
  and both values.
* A prompt holding a lone surrogate (a JSON ``\\ud800`` escape) is refused naming the file, line and key, by every
  command that reads prompts, never reaching the tokenizer.
* A harvest resumed with other settings is refused before any model is loaded.
* An error about ``--tune-prompts``'s file names ``--tune-prompts``.
* ``--selection cv``: the fold searches print their progress, their programs count in the closing line, and a run whose
  champion is already a seeded rule is not cross-validated (no evolved champion to judge).
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from evolve.cli.benchmark import cli as benchmark_cli
from evolve.cli.evolve import cli as evolve_cli
from evolve.cli.generate import cli as generate_cli
from evolve.errors import InputError
from test_hostile_round5_groups import _copy, _groups, runs  # noqa: F401 - the runs fixture
from test_spec_bench import spec_harvest, spec_prompts  # noqa: F401 - the fixtures
from tree_helpers import record_files
from hostile_helpers import one_line_error as _one_line_error

pytestmark = pytest.mark.usefixtures("one_thread")


def test_two_groups_holding_one_category_are_refused_naming_both(runs, tmp_path):  # noqa: F811
    out = _copy(runs, tmp_path)
    shutil.copytree(out / "chat", out / "chat2")
    _one_line_error(_groups(out), out / "chat" / "data", out / "chat2" / "data", "'chat'")


def _texts(d: Path) -> list[dict]:
    return [json.loads(line) for line in (d / "texts.jsonl").read_text().splitlines() if line.strip()]


def _write_texts(d: Path, texts: list[dict]) -> None:
    (d / "texts.jsonl").write_text("".join(json.dumps(t) + "\n" for t in texts))
    record_files(d)


@pytest.mark.parametrize("key", ["category", "split"])
def test_a_text_list_disagreeing_with_the_records_is_refused_naming_the_text(spec_harvest, tmp_path, key):  # noqa: F811
    d = tmp_path / "d"
    shutil.copytree(spec_harvest[0], d)
    texts = _texts(d)
    import pandas as pd

    test_ids = set(pd.read_parquet(d / "test.parquet")["seq_id"].tolist())
    i = next(k for k, t in enumerate(texts) if t["seq_id"] in test_ids)
    was = texts[i][key]
    texts[i] = {**texts[i], key: {"category": "qa" if was != "qa" else "chat", "split": "valid"}[key]}
    _write_texts(d, texts)
    sid = texts[i]["seq_id"]
    res = CliRunner().invoke(benchmark_cli, ["--data", str(d), "--repeats", "1"])
    line = _one_line_error(res, d / "texts.jsonl", f"text {sid}", "test.parquet")
    assert repr(was) in line or f"'{was}'" in line or key == "split", line
    res = CliRunner().invoke(generate_cli, ["subset", "--data", str(d), "--categories", "chat,qa",
                                            "--out", str(tmp_path / "sub")])
    _one_line_error(res, "texts.jsonl", f"text {sid}")


def test_a_prompt_with_a_lone_surrogate_is_refused_by_every_reader(llama_files, tmp_path):
    from evolve.harvest.prompts import encode_prompt, read_prompt_file

    path = tmp_path / "q.jsonl"
    path.write_text('{"category": "a", "turns": ["fine"]}\n{"category": "a", "turns": ["bad \\ud800 one"]}\n')
    with pytest.raises(InputError) as err:
        read_prompt_file(str(path))
    assert f"{path}, line 2: key 'turns': turn 1 holds a lone surrogate (\\ud800)" in str(err.value)
    with pytest.raises(InputError, match="lone surrogate"):
        encode_prompt(None, "bad \ud800", "here")
    for args in (["harvest", "--target", llama_files["target"], "--draft-ngram", "3,1", "--prompts", str(path),
                  "--out", str(tmp_path / "h")],):
        _one_line_error(CliRunner().invoke(generate_cli, args), path, "line 2", "lone surrogate")
    res = CliRunner().invoke(benchmark_cli, ["live", "--target", llama_files["target"], "--draft-ngram", "3,1",
                                             "--prompts", str(path), "--max-new-tokens", "4", "--rule",
                                             "standard_rejection"])
    _one_line_error(res, path, "lone surrogate")


def test_a_harvest_of_other_settings_is_refused_before_the_models_load(llama_files, tmp_path, monkeypatch):
    from harvest_helpers import harvest_config

    from evolve.harvest import loop as hv
    from evolve.harvest.resume import MANIFEST_FILE, WORK_DIR, settings_fingerprint
    from evolve.files.digest import sha256_file

    out = tmp_path / "h"
    config = harvest_config(llama_files, out, skip_layers=(1, 2), max_new_tokens=6)
    work = out / WORK_DIR
    work.mkdir(parents=True)
    old = {**settings_fingerprint(config, sha256_file(config.prompts)), "gamma": config.gamma + 1,
           "target_sha256": "0" * 64}
    (work / MANIFEST_FILE).write_text(json.dumps({"generator": "harvest", "fingerprint": old}))

    def no_load(*args, **kwargs):
        raise AssertionError("the models were loaded before the settings were compared")

    monkeypatch.setattr(hv, "build", no_load)
    with pytest.raises(InputError) as err:
        hv.harvest(config, progress=False)
    assert "other settings" in str(err.value) and "gamma" in str(err.value)


def test_an_error_of_the_tune_prompts_file_names_that_option(llama_files, tmp_path):
    empty = tmp_path / "tune.txt"
    empty.write_text("\n\n")
    res = CliRunner().invoke(benchmark_cli, ["live", "--target", llama_files["target"], "--draft-ngram", "3,1",
                                             "--prompts", llama_files["prompts"], "--max-new-tokens", "4", "--rule",
                                             "standard_rejection", "--temperature", "0", "--peers", "transformers",
                                             "--tune-prompts", str(empty)])
    line = _one_line_error(res, empty, "--tune-prompts")
    assert "'--prompts'" not in line


def test_cross_validation_says_what_it_does(vocab_dataset, tmp_path):
    base = ["run", "--data", str(vocab_dataset), "--evolve", "verify-length", "--objective", "tokens_per_second",
            "--costs", str(Path(__file__).resolve().parent.parent / "docs" / "costs" / "gpu_like.json"),
            "--gamma", "4", "--generations", "2", "--seed", "1", "--selection", "cv", "--cv-folds", "2"]
    outcomes = set()
    for population in (8, 40):
        res = CliRunner().invoke(evolve_cli, [*base, "--population", str(population), "--out", str(tmp_path / "r")])
        assert res.exit_code == 0, res.output
        run = json.loads((Path(res.stdout.strip().splitlines()[-1]) / "run.json").read_text())
        folds = [ln for ln in res.stderr.splitlines() if ln.startswith("cross-validation: fold ")]
        if run["champion_source"].startswith("seeded:") and run["champion_guard"] is None:
            outcomes.add("seeded")
            assert not folds and "found nothing better on valid" in res.stderr
            continue
        outcomes.add("evolved" if run["champion_source"] == "evolved" else "guarded")
        assert len(folds) == 4, res.stderr  # each fold's start and end
        cv = run["champion_guard"]["cross_validation"]
        assert cv["programs"] > 0 and run["programs_scored"] > cv["programs"]
        assert f"{run['programs_scored']} programs scored" in res.stderr
        if run["champion_source"].startswith("seeded:"):
            assert "the champion guard kept it" in res.stderr and "is ahead out of fold" not in res.stderr
    assert outcomes
