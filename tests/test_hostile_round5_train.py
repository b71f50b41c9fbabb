"""Hostile files of ``python -m evolve train-drafter`` and of EAGLE-3 heads: nothing read from disk runs code, and a
damaged, empty or foreign file is refused in one line naming it (exit 2, no traceback).

* Data only, as a class: every call in ``evolve/`` and ``heuristics/`` that turns file contents into objects is
  found by parsing the source (``torch.load``, ``pickle``, ``numpy.load``, ``yaml.load``, ``marshal``, ``eval`` and
  ``exec``), and each must be a data-only form (``torch.load(..., weights_only=True)``, no ``allow_pickle``).
* A crafted pickle whose ``__reduce__`` would write a marker file, placed as ``train_state.pt`` or ``features.pt``,
  runs nothing and is refused naming the file.
* ``texts.json``, ``features.pt`` and ``train_state.pt``: each damaged (truncated, random bytes), empty, or foreign
  (valid data of another shape), and features of another run, are refused naming the file.
* Head configs: every numeric key of a head's ``config.json`` set to a value no head has, an unknown activation or
  rotary embedding; every tensor of the head with a NaN or infinite value: refused naming the file and the key.
"""
from __future__ import annotations

import ast
import json
import os
import pickle
import shutil
from pathlib import Path

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("safetensors")

from click.testing import CliRunner  # noqa: E402

from evolve.cli.evolve import cli  # noqa: E402
from evolve.engine.eagle import EagleDrafter  # noqa: E402
from evolve.engine.eagle_head import HEAD_TENSORS, save_head  # noqa: E402
from evolve.errors import InputError  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OPTIONS = ["--max-new-tokens", "6", "--draft-vocab", "12", "--steps", "2", "--save-every", "2", "--ttt", "2"]


@pytest.fixture(scope="module", autouse=True)
def _one_thread(one_thread):
    yield


# --- data only, found in the source --------------------------------------------------------------------------

def _calls(path: Path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = (f"{f.value.id}.{f.attr}" if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)
                    else f.id if isinstance(f, ast.Name) else None)
            if name is not None:
                yield name, node


#: The only code built from text at run time: modules the project itself generates from a parsed champion (the
#: export's check of a champion's values, the exported llama-cpp-python policy of ``benchmark.py live``); the text
#: is produced by :mod:`evolve.export.codegen` from a program tree, never read from a file.
GENERATED_CODE = {"evolve/export/engines/shapes.py", "evolve/live/peers.py"}
#: In-memory pickles between a search's client and its Dask workers (bytes made in the same run, never a file).
IN_MEMORY_PICKLES = {"evolve/search/islands.py", "evolve/search/island_task.py"}


def test_every_reader_of_a_file_is_data_only():
    found = []
    for path in sorted([*ROOT.joinpath("evolve").rglob("*.py"), *ROOT.joinpath("heuristics").rglob("*.py")]):
        rel = path.relative_to(ROOT).as_posix()
        for name, node in _calls(path):
            keywords = {k.arg: k.value for k in node.keywords}
            if name == "torch.load":
                found.append(rel)
                safe = keywords.get("weights_only")
                assert isinstance(safe, ast.Constant) and safe.value is True, f"{rel}:{node.lineno}: {name} " \
                                                                               f"without weights_only=True"
            elif name in ("np.load", "numpy.load"):
                allow = keywords.get("allow_pickle")
                assert allow is None or (isinstance(allow, ast.Constant) and allow.value is False), \
                    f"{rel}:{node.lineno}: np.load with allow_pickle"
            elif name in ("pickle.load", "marshal.load", "marshal.loads", "yaml.load", "shelve.open",
                          "dill.load", "dill.loads", "joblib.load", "pd.read_pickle"):
                raise AssertionError(f"{rel}:{node.lineno}: {name} reads objects that may run code")
            elif name == "pickle.loads":
                assert rel in IN_MEMORY_PICKLES, f"{rel}:{node.lineno}: pickle.loads outside the island tasks"
            elif name in ("eval", "exec"):
                assert rel in GENERATED_CODE, f"{rel}:{node.lineno}: {name} of text"
    assert "evolve/train/files.py" in found  # the reader of train-drafter's .pt files was parsed


# --- train-drafter's files -----------------------------------------------------------------------------------

def _train(llama_files, out: Path):
    return CliRunner().invoke(cli, ["train-drafter", "--target", llama_files["target"], "--prompts",
                                    llama_files["prompts"], "--out", str(out), *OPTIONS])


@pytest.fixture(scope="module")
def trained(llama_files, tmp_path_factory) -> Path:
    """An output directory of a finished two-step run (its texts, features, checkpoint and head)."""
    out = tmp_path_factory.mktemp("trained") / "head"
    res = _train(llama_files, out)
    assert res.exit_code == 0, res.output
    return out


def _refused(llama_files, out: Path, culprits: tuple[str, ...]) -> str:
    res = _train(llama_files, out)
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output and res.exception is None or isinstance(res.exception, SystemExit)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    for c in culprits:
        assert c in lines[0], (c, lines[0])
    return lines[0]


class Marker:
    """A pickled object whose unpickling would write ``path`` (``__reduce__`` calls ``exec``)."""

    def __init__(self, path: Path):
        self.path = path

    def __reduce__(self):
        return exec, (f"open({str(self.path)!r}, 'w').write('ran')",)


@pytest.mark.parametrize("name", ["train_state.pt", "data/features.pt"])
@pytest.mark.parametrize("form", ["torch.save", "pickle"])
def test_a_crafted_pickle_runs_nothing(llama_files, trained, tmp_path, name, form):
    out = tmp_path / "head"
    shutil.copytree(trained, out)
    marker = tmp_path / "marker"
    target = out / name
    payload = {"step": Marker(marker), "features": [Marker(marker)]}
    if form == "torch.save":
        torch.save(payload, str(target))
    else:
        target.write_bytes(pickle.dumps(Marker(marker)))
    line = _refused(llama_files, out, (str(target), "could run code"))
    assert not marker.exists(), line


def _texts_cases(good: bytes) -> dict:
    doc = json.loads(good)
    first = doc["texts"][0]
    return {
        "empty": b"", "blank": b"  \n", "truncated": good[: len(good) // 2], "binary": bytes(range(256)),
        "a list": b"[1, 2, 3]", "no key": json.dumps({"texts": doc["texts"]}).encode(),
        "texts not a list": json.dumps({"key": doc["key"], "texts": 5}).encode(),
        "no texts": json.dumps({"key": doc["key"], "texts": []}).encode(),
        "id beyond the vocabulary": json.dumps({"key": doc["key"], "texts": [dict(first, ids=[10 ** 6])]}).encode(),
        "negative id": json.dumps({"key": doc["key"], "texts": [dict(first, ids=[-1, 3])]}).encode(),
        "prompt_len 0": json.dumps({"key": doc["key"], "texts": [dict(first, prompt_len=0)]}).encode(),
        "prompt_len beyond": json.dumps({"key": doc["key"], "texts": [dict(first, prompt_len=10 ** 9)]}).encode(),
        "other settings": json.dumps({"key": dict(doc["key"], seed=99), "texts": doc["texts"]}).encode(),
    }


def test_texts_json_damaged_empty_or_foreign(llama_files, trained, tmp_path):
    good = (trained / "data" / "texts.json").read_bytes()
    for case, raw in _texts_cases(good).items():
        out = tmp_path / case.replace(" ", "_")
        shutil.copytree(trained, out)
        (out / "data" / "texts.json").write_bytes(raw)
        _refused(llama_files, out, (str(out / "data" / "texts.json"),))


def _pt_bytes(obj) -> bytes:
    import io

    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def test_features_damaged_empty_foreign_or_of_another_run(llama_files, trained, tmp_path):
    good = (trained / "data" / "features.pt").read_bytes()
    saved = torch.load(str(trained / "data" / "features.pt"), weights_only=True)
    feats = saved["features"]
    cases = {
        "empty": b"", "truncated": good[: len(good) // 2], "random": os.urandom(2000),
        "a tensor": _pt_bytes(torch.zeros(3)), "a dict": _pt_bytes({"a": 1}),
        "another run": _pt_bytes({"digest": "0" * 64, "features": feats}),
        "old list, one text short": _pt_bytes(feats[:-1]),
        "old list, other width": _pt_bytes([{"g": f["g"][:, :-1], "z": f["z"]} for f in feats]),
        "NaN feature": _pt_bytes({"digest": saved["digest"],
                                  "features": [{"g": f["g"] * float("nan"), "z": f["z"]} for f in feats]}),
        "integer tensor": _pt_bytes({"digest": saved["digest"],
                                     "features": [{"g": f["g"].long(), "z": f["z"]} for f in feats]}),
    }
    for case, raw in cases.items():
        out = tmp_path / case.replace(" ", "_").replace(",", "")
        shutil.copytree(trained, out)
        (out / "data" / "features.pt").write_bytes(raw)
        _refused(llama_files, out, (str(out / "data" / "features.pt"),))


def test_features_of_another_run_beside_these_texts_are_refused(llama_files, trained, tmp_path):
    """Texts made again with another seed beside the old features: the features' digest no longer matches."""
    other = tmp_path / "other"
    res = CliRunner().invoke(cli, ["train-drafter", "--target", llama_files["target"], "--prompts",
                                   llama_files["prompts"], "--out", str(other), *OPTIONS[:-2], "--ttt", "2",
                                   "--seed", "5"])
    assert res.exit_code == 0, res.output
    out = tmp_path / "head"
    shutil.copytree(trained, out)
    shutil.copy(other / "data" / "features.pt", out / "data" / "features.pt")
    _refused(llama_files, out, (str(out / "data" / "features.pt"), "other data"))


def test_train_state_damaged_empty_or_foreign(llama_files, trained, tmp_path):
    path = trained / "train_state.pt"
    good = path.read_bytes()
    state = torch.load(str(path), weights_only=True)
    first = next(iter(state["params"]))

    def changed(**kw):
        return _pt_bytes({**state, **kw})

    cases = {
        "empty": b"", "truncated": good[: len(good) // 2], "random": os.urandom(3000),
        "a list": _pt_bytes([1, 2]), "no params": _pt_bytes({k: v for k, v in state.items() if k != "params"}),
        "extra key": changed(extra=1), "step negative": changed(step=-1), "step 10**30": changed(step=10 ** 30),
        "step as text": changed(step="2"), "fingerprint a tensor": changed(fingerprint=torch.zeros(2)),
        "other data": changed(digest="f" * 64),
        "param of another shape": changed(params={**state["params"], first: torch.zeros(1)}),
        "param NaN": changed(params={**state["params"], first: state["params"][first] * float("nan")}),
        "window too long": changed(window=state["window"] * 50),
        "window loss inf": changed(window=[[float("inf"), 0.5]] * len(state["window"])),
        "window agreement 7": changed(window=[[1.0, 7.0]] * len(state["window"])),
        "optimizer empty": changed(optimizer={}),
        "optimizer step 10**9": changed(optimizer={**state["optimizer"], "state": {
            k: {**v, "step": torch.tensor(1e9)} for k, v in state["optimizer"]["state"].items()}}),
        "optimizer moment negative": changed(optimizer={**state["optimizer"], "state": {
            k: {**v, "exp_avg_sq": -torch.ones_like(v["exp_avg_sq"])} for k, v in state["optimizer"]["state"].items()}}),
        "optimizer lr nan": changed(optimizer={**state["optimizer"], "param_groups": [
            {**state["optimizer"]["param_groups"][0], "lr": float("nan")}]}),
    }
    for case, raw in cases.items():
        out = tmp_path / case.replace(" ", "_").replace("*", "")
        shutil.copytree(trained, out)
        (out / "train_state.pt").write_bytes(raw)
        _refused(llama_files, out, (str(out / "train_state.pt"),))
    out = tmp_path / "untouched"
    shutil.copytree(trained, out)
    res = CliRunner().invoke(cli, ["train-drafter", "--target", llama_files["target"], "--prompts",
                                   llama_files["prompts"], "--out", str(out), *OPTIONS[:4], "--steps", "4",
                                   *OPTIONS[6:]])
    assert res.exit_code == 0 and "resumed at step 2" in res.output, res.output


# --- EAGLE-3 head configs and weights ------------------------------------------------------------------------

def _head():
    from test_eagle_drafter import head_tensors

    return head_tensors(7)


def _config_cases(config: dict) -> dict:
    """A value no head has for every numeric key of ``config`` (found in it, nested keys too), and the
    activations and rotary embeddings transformers does not build."""
    cases = {}
    for key, value in config.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        bad = [0, -1, 2.5, float("nan"), float("inf"), "12", True] if isinstance(value, int) else \
            [0.0, -1.0, float("nan"), float("inf"), "1e-6", True]
        for b in bad:
            cases[f"{key}={b!r}"] = (key, dict(config, **{key: b}))
    cases["hidden_act"] = ("hidden_act", dict(config, hidden_act="no_such_activation"))
    cases["rope_scaling type"] = ("rope_scaling", dict(config, rope_scaling={"rope_type": "no_such_rope",
                                                                              "factor": 2.0}))
    cases["rope_scaling without factor"] = ("rope_scaling", dict(config, rope_scaling={"rope_type": "linear"}))
    cases["rope_parameters type"] = ("rope_parameters", dict(config, rope_parameters={"rope_type": "no_such"}))
    cases["rope_scaling a list"] = ("rope_scaling", dict(config, rope_scaling=[1, 2]))
    cases["heads not divisible"] = ("num_key_value_heads", dict(config, num_key_value_heads=3))
    return cases


@pytest.fixture(scope="module")
def target(llama_files):
    from evolve.engine.models import load_model, resolve_model

    return load_model(resolve_model(llama_files["target"], "target"))


def test_head_configs_no_head_has_are_refused(target, tmp_path):
    config, tensors = _head()
    save_head(tmp_path / "good", config, tensors)
    EagleDrafter(target, str(tmp_path / "good"), 32, "cpu")  # the untouched head loads
    cases = _config_cases(config)
    assert len(cases) > 40
    for k, (case, (key, cfg)) in enumerate(cases.items()):
        d = save_head(tmp_path / f"c{k}", cfg, tensors)
        with pytest.raises(InputError) as err:
            EagleDrafter(target, str(d), 32, "cpu")
        text = str(err.value)
        assert str(d / "config.json") in text and key in text and "\n" not in text, (case, text)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), 1e39])
def test_head_tensors_with_non_finite_values_are_refused(target, tmp_path, value):
    """A NaN or infinite weight or norm, or a float64 weight beyond the target's float32 range."""
    config, tensors = _head()
    for name in HEAD_TENSORS:
        bad = dict(tensors)
        bad[name] = tensors[name].clone().double()
        bad[name].view(-1)[0] = value
        d = save_head(tmp_path / name, config, bad)
        with pytest.raises(InputError) as err:
            EagleDrafter(target, str(d), 32, "cpu")
        text = str(err.value)
        assert str(d / "model.safetensors") in text and f"'{name}'" in text, text
