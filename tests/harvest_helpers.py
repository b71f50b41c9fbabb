"""Tiny offline Llama models and helpers of the harvest tests (``test_harvest.py``,
``test_harvest_batch.py``, ``test_sharded_harvest.py``); the fixtures ``llama_files`` and
``one_thread`` are in ``conftest.py``.

Tiny randomly initialised Llama models and a word-level tokenizer are built offline; nothing is
downloaded. Import it after ``pytest.importorskip("torch")`` and ``("transformers")``.
"""
from __future__ import annotations

import numpy as np
import torch
from click.testing import CliRunner
from scipy import stats

from evolve.cli.harvest import harvest as harvest_cmd
from evolve.harvest import loop as hv

#: The tokenizer's words (ids 3..31 after <unk>, <s>, </s>).
WORDS = [f"w{i}" for i in range(29)]
#: Draft length and new tokens per text of :func:`harvest_config`.
GAMMA = 4
MAX_NEW = 30


def word_tokenizer(rename: dict[str, str] | None = None):
    """A word-level tokenizer over <unk>, <s>, </s> and :data:`WORDS` (``rename``: word -> other spelling)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = [(rename or {}).get(w, w) for w in ["<unk>", "<s>", "</s>", *WORDS]]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>")


def tiny_llama(path, seed: int, layers: int, rename: dict[str, str] | None = None,
               identity_layers: tuple[int, ...] = ()):
    """Save a random Llama (hidden 32, vocab 32) and its tokenizer into ``path``.

    ``identity_layers`` get zero output projections, so they leave the residual stream unchanged.
    """
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = word_tokenizer(rename)
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=layers,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                      bos_token_id=1, eos_token_id=2, pad_token_id=0, initializer_range=0.3)
    model = LlamaForCausalLM(cfg)
    with torch.no_grad():
        for i in identity_layers:
            model.model.layers[i].self_attn.o_proj.weight.zero_()
            model.model.layers[i].mlp.down_proj.weight.zero_()
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def stop_after(n: int):
    """An ``on_text_done`` callback that interrupts the harvest (KeyboardInterrupt) after its n-th finished text."""
    done: list[int] = []

    def callback(index: int) -> None:
        done.append(index)
        if len(done) == n:
            raise KeyboardInterrupt

    return callback


def harvest_config(files, out, **kw) -> hv.HarvestConfig:
    """The harvest of ``files`` (the ``llama_files`` fixture) into ``out``: gamma :data:`GAMMA`,
    :data:`MAX_NEW` new tokens per text, temperature 1, seed 11; ``kw`` overrides (a drafter is needed)."""
    base = dict(target=files["target"], prompts=files["prompts"], gamma=GAMMA, max_new_tokens=MAX_NEW,
                temperature=1.0, seed=11, out=str(out))
    base.update(kw)
    return hv.HarvestConfig(**base)


def lookup_harvest(files, name: str) -> str:
    """A prompt-lookup harvest of the tiny target of ``files`` (greedy, gamma 3, up to 64 tokens: train, valid and
    test splits and texts.jsonl) into ``files["root"] / name``; its path."""
    out = files["root"] / name
    hv.harvest(harvest_config(files, out, ngram=(2, 1), temperature=0.0, gamma=3, max_new_tokens=64, threads=1),
               progress=False)
    return str(out)


def first_tokens(engine, prompt, n, seed):
    """First emitted token of n blocks at the same context (caches cropped back after each block)."""
    out = []
    with torch.inference_mode():
        batch = engine.new_batch(1)
        engine.start(batch, 0, 0, prompt, None)
        for i in range(n):
            batch.rows[0].rng = np.random.default_rng([seed, i])
            out.append(engine.block(batch, [1])[0].emitted[0])
            engine.rewind(batch, 0, len(prompt))
    return np.bincount(out, minlength=engine.vocab)


def chi2_pvalue(counts, p):
    """Chi-square p-value of token ``counts`` against ``p`` (cells expected below 5 pooled into one)."""
    expected = counts.sum() * p
    small = expected < 5
    obs = np.append(counts[~small], counts[small].sum())
    exp = np.append(expected[~small], expected[small].sum())
    if exp[-1] == 0:
        obs, exp = obs[:-1], exp[:-1]
    return stats.chisquare(obs, exp * obs.sum() / exp.sum()).pvalue


def run_harvest(args):
    """(exit code, output) of the harvest command with ``args`` (click's test runner)."""
    result = CliRunner().invoke(harvest_cmd, args)
    return result.exit_code, result.output
