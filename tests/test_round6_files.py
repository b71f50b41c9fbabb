"""Round 6 of hostile files, as classes: checkpoints and model files are trusted no further than they are checked.

* A ``train-drafter`` checkpoint's optimiser hyper-parameters (every key of its param group) must be the command's:
  each one changed to another finite value is refused naming the file and the key (an absurd learning rate used to
  train to NaN).
* Every tensor a reader takes (a head's weights and vocabulary maps, the features, the checkpoint's parameters and
  moments) must be a dense tensor of its kind holding data: each generated case (a non-tensor value, a sparse tensor,
  a meta tensor, a float ``d2t``, a fractional ``d2t``, an integer weight) is refused in one line naming the file and
  the key, never a traceback (:mod:`evolve.files.tensors`).
* A champion file whose primitive-set version cannot hold a feature it reads is refused naming the key.
"""
from __future__ import annotations

import io
import json
import os
import shutil

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("safetensors")

from evolve.engine.eagle import EagleDrafter  # noqa: E402
from evolve.engine.eagle_head import HEAD_TENSORS  # noqa: E402
from evolve.errors import InputError  # noqa: E402
from evolve.files.tensors import tensor_problem  # noqa: E402
from heuristics.champions import load_champion  # noqa: E402
from test_hostile_round5_train import _head, _refused, target, trained  # noqa: E402,F401

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")


def _pt_bytes(obj) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def _bad_tensors(value: torch.Tensor, kind: str = "float") -> dict:
    """Values standing where a dense tensor of ``kind`` like ``value`` should: each must be refused."""
    cases = {"a list": value.tolist() if value.numel() < 50 else [1.0, 2.0], "a number": 1.5,
             "a sparse tensor": value.to_sparse() if value.dim() else value, "a meta tensor": value.to("meta")}
    if kind == "float":
        cases["an integer tensor"] = value.long()
    if kind == "integer":
        cases["a float tensor"] = value.double()
        cases["fractional values"] = value.double() + 0.5
    return {k: v for k, v in cases.items() if not (k == "a sparse tensor" and value.dim() == 0)}


def test_the_tensor_check_names_every_kind_of_value():
    dense = torch.ones(3, 2)
    assert tensor_problem(dense) is None and tensor_problem(torch.arange(3), "integer") is None
    assert tensor_problem(torch.zeros(3, dtype=torch.bool), "bool") is None
    for case, value in _bad_tensors(dense).items():
        assert tensor_problem(value) is not None, case
    for case, value in _bad_tensors(torch.arange(4), "integer").items():
        assert tensor_problem(value, "integer") is not None, case


def test_a_checkpoint_of_other_optimiser_settings_is_refused(llama_files, trained, tmp_path):  # noqa: F811
    state = torch.load(str(trained / "train_state.pt"), weights_only=True)
    group = state["optimizer"]["param_groups"][0]
    changed = {"lr": 1e30, "eps": 0.5, "weight_decay": 3.0, "betas": (0.1, 0.2), "amsgrad": True, "maximize": True}
    assert set(changed) <= set(group)
    for key, value in changed.items():
        bad = {**state, "optimizer": {**state["optimizer"], "param_groups": [{**group, key: value}]}}
        out = tmp_path / key
        shutil.copytree(trained, out)
        (out / "train_state.pt").write_bytes(_pt_bytes(bad))
        _refused(llama_files, out, (str(out / "train_state.pt"), f"optimizer.param_groups[0].{key}"))


def test_features_and_checkpoints_holding_no_dense_tensor_are_refused(llama_files, trained, tmp_path):  # noqa: F811
    saved = torch.load(str(trained / "data" / "features.pt"), weights_only=True)
    g = saved["features"][0]["g"]
    for case, value in _bad_tensors(g).items():
        feats = [dict(f) for f in saved["features"]]
        feats[0]["g"] = value
        out = tmp_path / f"f_{case.replace(' ', '_')}"
        shutil.copytree(trained, out)
        (out / "data" / "features.pt").write_bytes(_pt_bytes({**saved, "features": feats}))
        _refused(llama_files, out, (str(out / "data" / "features.pt"), "features[0]"))
    state = torch.load(str(trained / "train_state.pt"), weights_only=True)
    first = next(iter(state["params"]))
    for case, value in _bad_tensors(state["params"][first]).items():
        out = tmp_path / f"s_{case.replace(' ', '_')}"
        shutil.copytree(trained, out)
        (out / "train_state.pt").write_bytes(_pt_bytes({**state, "params": {**state["params"], first: value}}))
        _refused(llama_files, out, (str(out / "train_state.pt"), f"params.{first}"))


def test_head_weights_and_maps_that_are_no_dense_tensors_are_refused(target, tmp_path):  # noqa: F811
    config, tensors = _head()
    cases = {}
    for name in (HEAD_TENSORS[0], HEAD_TENSORS[-1], "d2t", "t2d"):
        kind = {"d2t": "integer", "t2d": "bool"}.get(name, "float")
        for case, value in _bad_tensors(tensors[name], kind).items():
            cases[(name, case)] = value
    assert len(cases) >= 14
    for k, ((name, case), value) in enumerate(cases.items()):
        d = tmp_path / f"h{k}"
        d.mkdir()
        (d / "config.json").write_text(json.dumps(config))
        torch.save({**tensors, name: value}, str(d / "pytorch_model.bin"))
        try:
            EagleDrafter(target, str(d), 32, "cpu")
        except InputError as exc:
            text = str(exc)
            assert "\n" not in text and str(d) in text and name in text, (name, case, text)
        else:
            raise AssertionError(f"a head with {name} as {case} was used")


def test_a_champion_cannot_read_a_feature_its_primitive_set_lacks(tmp_path):
    source = os.path.join(FIXTURES, "format_v2", "champion_verify_length.json")
    doc = json.loads(open(source).read())
    assert doc["primitive_set_version"] == 1
    load_champion(source)  # as written: a version 1 program reading version 1 features
    for how in ("expression", "features"):  # read by the expression (no feature list), or listed
        bad = (dict(doc, expression="sub(2.5, prev_verified)", features=[]) if how == "expression" else
               dict(doc, features=[*doc["features"], "prev_verified"]))
        path = tmp_path / f"{how}.json"
        path.write_text(json.dumps(bad))
        with pytest.raises(InputError) as err:
            load_champion(path)
        text = str(err.value)
        assert "prev_verified" in text and "primitive set 1" in text and str(path) in text, text
