"""``python -m evolve train-drafter`` on the tiny random Llama target of the harvest tests (4 layers, hidden 32): the
data, the draft vocabulary, the loss going down, checkpoints in the published layout that ``--draft-eagle`` loads,
and a resumed run equal to an uninterrupted one."""
from __future__ import annotations

import json
import os

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("safetensors")

from evolve.engine.eagle_head import load_head_weights  # noqa: E402
from evolve.errors import InputError  # noqa: E402
from evolve.train.eagle import TrainSettings, draft_vocabulary, train, training_layers  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def _one_thread(one_thread):
    yield


def _settings(llama_files, out, **kw):
    base = dict(target=llama_files["target"], prompts=llama_files["prompts"], out=str(out), max_new_tokens=24,
                draft_vocab=16, steps=30, ttt=2, lr=1e-2, seed=3, save_every=10)
    base.update(kw)
    return TrainSettings(**base)


def test_draft_vocabulary_and_layers():
    ids = draft_vocabulary([[5, 5, 7, 9, 9, 9], [7, 4]], 3, 12, {2})
    assert ids.tolist() == [2, 5, 9]  # eos kept, then 9 (3x), 5 (2x); 7 (2x) loses the tie to 5
    assert training_layers(30) == (1, 14, 26) and training_layers(4) == (0, 1, 2)
    with pytest.raises(InputError, match="at least 4"):
        training_layers(3)


def test_training_lowers_the_loss_and_the_head_drafts(llama_files, tmp_path):
    lines: list[str] = []
    out = tmp_path / "head"
    result = train(_settings(llama_files, out), lines.append)
    progress = [x for x in lines if x.startswith("step ")]
    losses = [float(x.split("loss ")[1].split(",")[0]) for x in progress]
    assert len(progress) == 3 and losses[-1] < losses[0]
    assert result["steps"] == 30
    config = json.loads((out / "config.json").read_text())
    assert config["draft_vocab_size"] == 16 and config["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [0, 1, 2]
    tensors, _ = load_head_weights(out)
    assert int(tensors["t2d"].sum()) == 16 and "embed_tokens.weight" not in tensors
    from evolve.harvest import loop as hv

    engine = hv.build(hv.HarvestConfig(target=llama_files["target"], prompts=llama_files["prompts"],
                                       eagle=str(out), gamma=3, max_new_tokens=10, seed=1)).engine
    assert len(engine.generate([7, 12, 3], 3, 10, hv.text_rng(1, 0)).tokens) == 10


def test_resume_equals_an_uninterrupted_run(llama_files, tmp_path):
    whole = train(_settings(llama_files, tmp_path / "whole", steps=20))
    first = train(_settings(llama_files, tmp_path / "split", steps=10))
    lines: list[str] = []
    resumed = train(_settings(llama_files, tmp_path / "split", steps=20), lines.append)
    assert "resumed at step 10" in lines and first["steps"] == 10
    assert resumed["loss"] == whole["loss"]
    a, _ = load_head_weights(tmp_path / "whole")
    b, _ = load_head_weights(tmp_path / "split")
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=0, atol=0)
    with pytest.raises(InputError, match="other settings"):
        train(_settings(llama_files, tmp_path / "split", steps=30, lr=0.5))


def test_command_line(llama_files, tmp_path):
    from click.testing import CliRunner

    from evolve.cli.evolve import cli

    res = CliRunner().invoke(cli, ["train-drafter", "--target", llama_files["target"], "--prompts",
                                   llama_files["prompts"], "--out", str(tmp_path / "h"), "--max-new-tokens", "8",
                                   "--draft-vocab", "12", "--steps", "4", "--save-every", "2", "--ttt", "2"])
    assert res.exit_code == 0, res.output
    assert "wrote" in res.stdout and (tmp_path / "h" / "model.safetensors").is_file()
    res = CliRunner().invoke(cli, ["train-drafter", "--target", str(tmp_path / "none"), "--prompts",
                                   llama_files["prompts"], "--out", str(tmp_path / "x")])
    assert res.exit_code == 2 and "error:" in res.output


def test_batched_greedy_responses_equal_one_at_a_time(llama_files, tmp_path):
    from evolve.engine.models import load_model, resolve_model
    from evolve.train.eagle import prepare_data

    loaded = load_model(resolve_model(llama_files["target"], "target"))
    one = prepare_data(_settings(llama_files, tmp_path / "one", temperature=0.0), loaded, lambda m: None)
    batched = prepare_data(_settings(llama_files, tmp_path / "three", temperature=0.0, response_batch=3), loaded,
                           lambda m: None)
    assert len(one["texts"]) == len(batched["texts"]) >= 4  # prompts of different lengths: left padding used
    assert len({t["prompt_len"] for t in one["texts"]}) > 1
    assert one["texts"] == batched["texts"]
    with pytest.raises(InputError, match="other settings"):  # the batch is part of what the data depends on
        prepare_data(_settings(llama_files, tmp_path / "one", temperature=0.0, response_batch=2), loaded,
                     lambda m: None)
