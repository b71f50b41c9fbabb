"""The EAGLE-3-style drafter (``--draft-eagle DIR``) on the tiny random Llama target of the harvest tests and a
tiny random head built here and saved in the published layout (config.json and model.safetensors or
pytorch_model.bin); nothing is downloaded.

The head's distributions are checked against a plain re-implementation written here from the equations
(fc, concat of the normed embedding and feature, one Llama decoder layer with RMSNorm, rotary attention and
SiLU MLP, norm, lm_head, d2t), run without any cache on the target's hidden states from an uncached forward
with ``output_hidden_states``.
"""
from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("safetensors")

from evolve.engine.eagle import EagleDrafter  # noqa: E402
from evolve.engine.eagle_head import save_head  # noqa: E402
from evolve.errors import InputError  # noqa: E402
from evolve.harvest import loop as hv  # noqa: E402
from evolve.harvest import tree_harvest as ht  # noqa: E402

H, HEADS, KV, INTER, DRAFT_VOCAB, VOCAB = 32, 4, 2, 48, 20, 32
LAYERS = [0, 1, 2]  # the tiny target has 4 layers: the default (1, N//2 - 1, N - 4) repeats one


@pytest.fixture(scope="module", autouse=True)
def _one_thread(one_thread):
    yield


def head_tensors(seed: int, own_embedding: bool = False) -> tuple[dict, dict]:
    """(config.json dict, tensors) of a random head for the tiny target; the draft vocabulary is 20 of the
    32 ids (always holding 2, the end-of-sequence id)."""
    g = torch.Generator().manual_seed(seed)

    def rnd(*shape, scale=0.3):
        return torch.randn(*shape, generator=g) * scale

    ids = torch.sort(torch.cat([torch.tensor([2]), 3 + torch.randperm(VOCAB - 3, generator=g)[:DRAFT_VOCAB - 1]])).values
    d2t = ids - torch.arange(DRAFT_VOCAB)
    t2d = torch.zeros(VOCAB, dtype=torch.bool)
    t2d[ids] = True
    t = {"fc.weight": rnd(H, 3 * H), "midlayer.hidden_norm.weight": 1 + rnd(H, scale=0.1),
         "midlayer.input_layernorm.weight": 1 + rnd(H, scale=0.1),
         "midlayer.self_attn.q_proj.weight": rnd(HEADS * 8, 2 * H), "midlayer.self_attn.k_proj.weight": rnd(KV * 8, 2 * H),
         "midlayer.self_attn.v_proj.weight": rnd(KV * 8, 2 * H), "midlayer.self_attn.o_proj.weight": rnd(H, HEADS * 8),
         "midlayer.post_attention_layernorm.weight": 1 + rnd(H, scale=0.1), "midlayer.mlp.gate_proj.weight": rnd(INTER, H),
         "midlayer.mlp.up_proj.weight": rnd(INTER, H), "midlayer.mlp.down_proj.weight": rnd(H, INTER),
         "norm.weight": 1 + rnd(H, scale=0.1), "lm_head.weight": rnd(DRAFT_VOCAB, H, scale=1.0),
         "d2t": d2t, "t2d": t2d}
    if own_embedding:
        t["embed_tokens.weight"] = rnd(VOCAB, H, scale=1.0)
    config = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": H,
              "num_attention_heads": HEADS, "num_key_value_heads": KV, "intermediate_size": INTER,
              "num_hidden_layers": 1, "rms_norm_eps": 1e-6, "hidden_act": "silu", "vocab_size": VOCAB,
              "draft_vocab_size": DRAFT_VOCAB, "rope_theta": 10000.0, "max_position_embeddings": 256,
              "eagle_config": {"eagle_aux_hidden_state_layer_ids": LAYERS}}
    return config, t


@pytest.fixture(scope="module")
def heads(llama_files, tmp_path_factory):
    """Heads saved in the published layout: ``st`` (safetensors, the target's embedding), ``bin`` (the same
    tensors as pytorch_model.bin), ``own`` (with its own embed_tokens.weight)."""
    root = tmp_path_factory.mktemp("eagle")
    config, t = head_tensors(7)
    own_config, own = head_tensors(8, own_embedding=True)
    return {"st": str(save_head(root / "st", config, t)), "bin": str(save_head(root / "bin", config, t, False)),
            "own": str(save_head(root / "own", own_config, own)), "root": root}


def _config(llama_files, head, **kw):
    base = dict(target=llama_files["target"], prompts=llama_files["prompts"], gamma=3, max_new_tokens=14,
                temperature=1.0, seed=5, eagle=head)
    base.update(kw)
    return hv.HarvestConfig(**base)


# --- the head from its equations, without any cache ----------------------------------------------------------

def _rms(x, w, eps=1e-6):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def _rope(x, pos, theta=10000.0):
    d = x.shape[-1]
    inv = 1.0 / theta ** (torch.arange(0, d, 2, dtype=torch.float32) / d)
    ang = pos[:, None].float() * inv[None, :]
    cos, sin = torch.cat([ang.cos(), ang.cos()], -1), torch.cat([ang.sin(), ang.sin()], -1)
    rot = torch.cat([-x[..., d // 2:], x[..., :d // 2]], -1)
    return x * cos + rot * sin


def ref_outputs(t, embed, hidden, tokens, pos):
    """Outputs (T, H) of the decoder layer over a whole sequence of head positions (causal attention, no cache):
    inputs ``hidden`` (T, H) and the embeddings of ``tokens`` at rotary positions ``pos``."""
    T = hidden.shape[0]
    a = torch.cat([_rms(embed[tokens], t["midlayer.input_layernorm.weight"]),
                   _rms(hidden, t["midlayer.hidden_norm.weight"])], -1)
    q = (a @ t["midlayer.self_attn.q_proj.weight"].T).view(T, HEADS, 8).transpose(0, 1)
    k = (a @ t["midlayer.self_attn.k_proj.weight"].T).view(T, KV, 8).transpose(0, 1)
    v = (a @ t["midlayer.self_attn.v_proj.weight"].T).view(T, KV, 8).transpose(0, 1)
    q, k = _rope(q, pos), _rope(k, pos)
    k, v = k.repeat_interleave(HEADS // KV, 0), v.repeat_interleave(HEADS // KV, 0)
    s = q @ k.transpose(1, 2) / math.sqrt(8)
    s = s.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
    o = (torch.softmax(s, -1) @ v).transpose(0, 1).reshape(T, H) @ t["midlayer.self_attn.o_proj.weight"].T
    h = hidden + o
    x = _rms(h, t["midlayer.post_attention_layernorm.weight"])
    m = torch.nn.functional.silu(x @ t["midlayer.mlp.gate_proj.weight"].T) * (x @ t["midlayer.mlp.up_proj.weight"].T)
    return h + m @ t["midlayer.mlp.down_proj.weight"].T


def ref_q(t, embed, out):
    """The draft distribution over the target's 32 ids of a head output (H,): softmax of lm_head(norm(out)) at
    ids d + d2t[d], 0 elsewhere."""
    z = _rms(out, t["norm.weight"]) @ t["lm_head.weight"].T
    q = torch.zeros(VOCAB, dtype=torch.float64)
    q[torch.arange(DRAFT_VOCAB) + t["d2t"]] = torch.softmax(z.double(), -1)
    return q.numpy()


def ref_chain(target, t, embed, ctx, drafts):
    """q before each of ``drafts`` (and after the last) for a text ``ctx`` of L >= 2 tokens: head positions
    0..L-2 read fc(target features) with tokens ctx[1:]; then each draft step reads the previous output."""
    with torch.no_grad():
        hs = target(input_ids=torch.tensor([ctx[:-1]]), output_hidden_states=True).hidden_states
        g = torch.cat([hs[i + 1][0] for i in LAYERS], -1)
        hidden = g @ t["fc.weight"].T
        tokens = list(ctx[1:])
        qs = []
        for x in list(drafts) + [None]:
            out = ref_outputs(t, embed, hidden, torch.tensor(tokens), torch.arange(len(tokens)))
            qs.append(ref_q(t, embed, out[-1]))
            if x is None:
                break
            hidden = torch.cat([hidden, out[-1:]], 0)
            tokens.append(int(x))
    return np.stack(qs)


def _head(heads, key="st"):
    from evolve.engine.eagle_head import load_head_weights
    from pathlib import Path

    return load_head_weights(Path(heads[key]))[0]


def _record(engine):
    calls = []
    inner = engine.drafter.propose

    def propose(engine_, batch, ks, keep=None):
        ctxs = [None if r is None else list(r.ctx) for r in batch.rows]
        out = inner(engine_, batch, ks, keep)
        calls.extend((c, d, q) for c, (d, q, _) in zip(ctxs, out) if c is not None and d)
        return out

    engine.drafter.propose = propose
    return calls


# --- tests ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("key", ["st", "own"])
def test_chain_drafts_equal_the_equations(llama_files, heads, key):
    """Every block's q (the first after the target's features, the later ones from the head's own outputs; the
    cache carried across blocks and refilled from the verification passes) equals the uncached re-implementation."""
    setup = hv.build(_config(llama_files, heads[key]))
    t = _head(heads, key)
    embed = t.get("embed_tokens.weight", setup.target.model.get_input_embeddings().weight.detach())
    calls = _record(setup.engine)
    for i, prompt in enumerate(([7, 12, 3, 9], [5, 9])):
        setup.engine.generate(prompt, 3, 14, hv.text_rng(5, i))
    assert len(calls) >= 6
    for ctx, drafts, q in calls:
        ref = ref_chain(setup.target.model, t, embed, ctx, drafts[:-1])
        np.testing.assert_allclose(q, ref, atol=2e-5)
        assert (q[:, ~t["t2d"].numpy()] == 0).all()


def test_batched_rows_draft_as_alone(llama_files, heads):
    """Texts decoded 3 at a time (rows joining and leaving) give the texts decoded alone."""
    setup = hv.build(_config(llama_files, heads["st"]))
    prompts = [[7, 12, 3, 9], [5, 9], [4, 4, 8], [11, 6, 20, 3, 3]]
    texts = [(i, p, hv.text_rng(5, i)) for i, p in enumerate(prompts)]
    batched = dict((i, r.tokens) for i, r in setup.engine.run_texts(texts, 3, 10, batch_size=3))
    alone = {i: setup.engine.generate(p, 3, 10, hv.text_rng(5, i)).tokens for i, p in enumerate(prompts)}
    assert batched == alone


def test_saved_and_reloaded_heads_draft_identically(llama_files, heads, tmp_path):
    """The same tensors from model.safetensors, from pytorch_model.bin and saved again give identical drafts."""
    again = save_head(tmp_path / "again", json.loads(open(os.path.join(heads["st"], "config.json")).read()),
                      _head(heads, "st"))
    runs = []
    for head in (heads["st"], heads["bin"], str(again)):
        setup = hv.build(_config(llama_files, head))
        calls = _record(setup.engine)
        tokens = setup.engine.generate([7, 12, 3, 9], 3, 14, hv.text_rng(5, 0)).tokens
        runs.append((tokens, calls))
    for tokens, calls in runs[1:]:
        assert tokens == runs[0][0]
        assert [d for _, d, _ in calls] == [d for _, d, _ in runs[0][1]]
        for (_, _, q), (_, _, q0) in zip(calls, runs[0][1]):
            np.testing.assert_array_equal(q, q0)


def _path(parent, tokens, i):
    path = []
    while i >= 0:
        path.append(int(tokens[i]))
        i = int(parent[i])
    return path[::-1]


def test_tree_nodes_equal_the_equations(llama_files, heads):
    """Every node's draft_prob (q at its parent) equals the re-implementation on the text and the node's path; the
    text's later steps read the features of the path the target accepted in the tree pass."""
    setup = hv.build(_config(llama_files, heads["st"], tree_nodes=5, tree_width=2))
    t = _head(heads)
    embed = setup.target.model.get_input_embeddings().weight.detach()
    prompt = [7, 12, 3, 9]
    result, df = ht.generate_tree_text(setup.engine, prompt, np.random.default_rng(4), 5, 2, 16)
    assert len(df) >= 10
    for tree in df["tree"].unique()[:4]:
        rows = df[df["tree"] == tree]
        base = prompt + result.tokens[:int(rows["position"].iat[0])]
        parent, tokens = rows["parent"].to_numpy(), rows["token"].to_numpy()
        for i in range(len(rows)):
            path = _path(parent, tokens, i)
            q = ref_chain(setup.target.model, t, embed, base, path[:-1])[-1]
            assert rows["draft_prob"].iat[i] == pytest.approx(q[path[-1]], rel=1e-4, abs=1e-7)


def test_harvest_chain_and_tree_through_the_command(llama_files, heads, tmp_path):
    from harvest_helpers import run_harvest
    from evolve.traces.io import load_metadata

    base = ["--target", llama_files["target"], "--prompts", llama_files["prompts"], "--max-new-tokens", "6",
            "--no-progress", "--draft-eagle", heads["st"]]
    code, out = run_harvest(base + ["--gamma", "2", "--out", str(tmp_path / "chain")])
    assert code == 0, out
    meta = load_metadata(tmp_path / "chain")
    drafter = meta["config"]["drafter"]
    assert drafter["kind"] == "eagle" and drafter["target_layers"] == LAYERS and drafter["embedding"] == "target"
    assert set(drafter["sha256"]) == {"config.json", "model.safetensors"}
    code, out = run_harvest(base + ["--tree-nodes", "4", "--out", str(tmp_path / "tree")])
    assert code == 0, out
    code, out = run_harvest(base[:-1] + [str(tmp_path / "nowhere"), "--out", str(tmp_path / "x")])
    assert code == 2 and "--draft-eagle" in out and "no such directory" in out


def test_live_greedy_decoding_equals_plain_decoding(llama_files, heads):
    from evolve.commands.live import decoder
    from evolve.live.decoding import autoregressive_text
    from heuristics.registry import get_rule

    setup = hv.build(_config(llama_files, heads["st"], temperature=0.0))
    for i, prompt in enumerate(([7, 12, 3, 9], [5, 9], [4])):
        plain, _ = autoregressive_text(setup.engine, prompt, 14, hv.text_rng(5, i))
        live, counts = decoder(get_rule("standard_rejection")).text(setup.engine, prompt, 14, hv.text_rng(5, i), gamma=3)
        assert live == plain
        assert sum(n for k, n in counts.drafted.items() if k) > 0  # the head drafted


def test_live_command_runs(llama_files, heads):
    from evolve.commands.live import resolve_rules, run_live

    report = run_live(_config(llama_files, heads["st"], max_new_tokens=8), resolve_rules(["standard_rejection"]))
    (row,) = report.rows
    assert abs(row["tv_per_token"]) < 1e-12 and row["tokens"] > 0


@pytest.mark.filterwarnings("ignore:measured costs")  # one repeat on a busy machine: timing noise
def test_costs_measure_the_head(llama_files, heads):
    from evolve.perf.costs import measure_costs

    doc = measure_costs(_config(llama_files, heads["st"]), gamma_max=2, repeats=1)
    assert doc["drafter"]["kind"] == "eagle" and doc["draft_token_s"] > 0 and doc["drafted_tokens_per_call"] == 2


def test_refusals(llama_files, heads, tmp_path):
    config, t = head_tensors(7)
    target = hv.build(_config(llama_files, heads["st"])).target

    def load(cfg, tensors, name):
        return EagleDrafter(target, str(save_head(tmp_path / name, cfg, tensors)), VOCAB, "cpu")

    no_layers = {k: v for k, v in config.items() if k != "eagle_config"}
    with pytest.raises(InputError, match=r"reads target layers \[1, 1, 0\]"):
        load(no_layers, t, "default_layers")
    with pytest.raises(InputError, match="no tensor 'fc.weight'"):
        load(config, {k: v for k, v in t.items() if k != "fc.weight"}, "no_fc")
    bad = dict(t, d2t=torch.zeros(DRAFT_VOCAB, dtype=torch.long) + 20)
    with pytest.raises(InputError, match="'d2t' does not map"):
        load(config, bad, "bad_d2t")
    with pytest.raises(InputError, match="vocab_size is 40"):
        load(dict(config, vocab_size=40), t, "vocab")
    with pytest.raises(InputError, match="unexpected tensor 'fc_norm.0.weight'"):
        load(config, dict(t, **{"fc_norm.0.weight": torch.ones(H)}), "extra")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no such file"):
        EagleDrafter(target, str(tmp_path / "empty"), VOCAB, "cpu")
    from evolve.engine.backends import get_backend

    with pytest.raises(InputError, match="does not expose") as err:
        get_backend("llama_cpp").check(hv.HarvestConfig(target="t.gguf", prompts="p", eagle=heads["st"],
                                                        backend="llama_cpp"))
    assert err.value.param == "eagle"


def test_length_policies_decode_with_the_head(llama_files, heads):
    """A fixed-length policy (the drafter stopped by ``keep``) decodes as the standard rule at that length, and
    drafting nothing is plain decoding."""
    from evolve.commands.live import decoder
    from evolve.live.decoding import autoregressive_text
    from heuristics.registry import get_rule

    engine = hv.build(_config(llama_files, heads["st"], max_new_tokens=10)).engine
    prompt = [1, 5, 9, 12, 5, 9]
    for i in range(2):
        want, wc = decoder(get_rule("standard_rejection")).text(engine, prompt, 10, hv.text_rng(5, i), gamma=2)
        got, gc = decoder(get_rule("fixed_gamma:2")).text(engine, prompt, 10, hv.text_rng(5, i), gamma=3)
        assert got == want and (gc.target_calls, gc.drafted) == (wc.target_calls, wc.drafted)
        plain, _ = autoregressive_text(engine, prompt, 10, hv.text_rng(5, i))
        text, counts = decoder(get_rule("fixed_gamma:0")).text(engine, prompt, 10, hv.text_rng(5, i), gamma=3)
        assert text == plain and counts.drafted == {0: counts.target_calls}
