"""The model shapes measured: configs of the public checkpoints (the weights are random), an EAGLE-3 head's shape
for a target, and the groups (a target with its drafters) of a full run and of a smoke run."""
from __future__ import annotations

SMOLLM2_135M = dict(hidden_size=576, num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3,
                    head_dim=64, intermediate_size=1536, vocab_size=49152, tie_word_embeddings=True,
                    rope_theta=100000.0, rms_norm_eps=1e-5, max_position_embeddings=8192)
LLAMA31_8B = dict(hidden_size=4096, num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
                  head_dim=128, intermediate_size=14336, vocab_size=128256, tie_word_embeddings=False,
                  rope_theta=500000.0, rms_norm_eps=1e-5, max_position_embeddings=131072)
LLAMA32_1B = dict(hidden_size=2048, num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8,
                  head_dim=64, intermediate_size=8192, vocab_size=128256, tie_word_embeddings=True,
                  rope_theta=500000.0, rms_norm_eps=1e-5, max_position_embeddings=131072)


def eagle3_head(target: dict, draft_vocab: int) -> dict:
    """An EAGLE-3 head's shape for ``target``: one decoder layer of the target's width, heads and MLP."""
    return dict(hidden_size=target["hidden_size"], num_attention_heads=target["num_attention_heads"],
                num_key_value_heads=target["num_key_value_heads"], head_dim=target["head_dim"],
                intermediate_size=target["intermediate_size"], vocab_size=target["vocab_size"],
                draft_vocab_size=draft_vocab, rope_theta=target["rope_theta"], rms_norm_eps=target["rms_norm_eps"])


#: (file stem, target name, target config, [(file suffix, drafter name, drafter type, drafter config)])
#: (the drafter type is written under the cost file's key ``drafter.kind``, the key earlier cost files have)
GROUPS = [
    ("smollm2_135m", "SmolLM2-135M", SMOLLM2_135M,
     [("eagle", "EAGLE-3-style head for SmolLM2-135M", "eagle3-head", eagle3_head(SMOLLM2_135M, 32000))]),
    ("llama31_8b", "Llama-3.1-8B", LLAMA31_8B,
     [("llama32_1b", "Llama-3.2-1B", "draft-model", LLAMA32_1B),
      ("eagle3", "EAGLE-3-style head for Llama-3.1-8B", "eagle3-head", eagle3_head(LLAMA31_8B, 32000))]),
]

_TINY = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
             intermediate_size=128, vocab_size=512, tie_word_embeddings=True, rope_theta=10000.0, rms_norm_eps=1e-5,
             max_position_embeddings=1024)
_TINY_DRAFT = dict(_TINY, hidden_size=32, num_hidden_layers=1, head_dim=8, intermediate_size=64)
SMOKE_GROUPS = [
    ("smollm2_135m", "tiny stand-in for SmolLM2-135M", _TINY,
     [("eagle", "EAGLE-3-style head (tiny)", "eagle3-head", eagle3_head(_TINY, 256))]),
    ("llama31_8b", "tiny stand-in for Llama-3.1-8B", dict(_TINY, tie_word_embeddings=False),
     [("llama32_1b", "tiny draft model", "draft-model", _TINY_DRAFT),
      ("eagle3", "EAGLE-3-style head (tiny)", "eagle3-head", eagle3_head(_TINY, 256))]),
]
