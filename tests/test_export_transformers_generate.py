"""The transformers draft-model export (:mod:`evolve.export.engines.transformers_generate`): the policy's drafts as the
candidates of transformers' own assisted-generation loop, checked by transformers' own ``generate()`` (the version the
project pins, 5.24.0): greedy text equal to plain decoding's, every candidate what live decoding drafts, and for
suffix decoding one drafter across texts holding the earlier responses.

A tiny random Llama (vocabulary 12, built offline) decodes; CI installs transformers and arctic-inference
(``.ci/run``); elsewhere the tests skip where either is missing."""
from __future__ import annotations

import types

import pytest
from engine_helpers import require
from test_export_llama_cpp_python import POLICIES as LOOKUP_POLICIES, reference_draft

from evolve.errors import InputError
from evolve.export.engines.transformers_generate import module_source
from evolve.kinds.verify_length.live import PolicyHistory

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

EOS, GAMMA, NEW = 2, 6, 40
PROMPTS = [[1, 5, 6, 7, 5, 6, 8, 5, 6, 7, 5, 6], [1, 5, 6, 8, 5, 6, 7], [1, 9, 10, 9, 10, 11, 9]]


def _load(source: str, name: str):
    module = types.ModuleType(name)
    exec(compile(source, name, "exec"), module.__dict__)
    return module


@pytest.fixture(scope="module")
def model():
    """A random Llama whose greedy continuations repeat (small vocabulary, a large initialisation)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(3)
    cfg = LlamaConfig(vocab_size=12, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, max_position_embeddings=256, bos_token_id=1, eos_token_id=EOS,
                      pad_token_id=0, initializer_range=0.3)
    return LlamaForCausalLM(cfg).eval()


def _generate(model, prompt, module=None, drafter=None, streamer=None):
    ids = torch.tensor([prompt])
    kwargs = dict(attention_mask=torch.ones_like(ids), max_new_tokens=NEW, do_sample=False, eos_token_id=[EOS],
                  pad_token_id=0, streamer=streamer)
    with torch.inference_mode():
        out = model.generate(ids, **kwargs) if module is None else module.generate(model, ids, drafter=drafter,
                                                                                    **kwargs)
    return [int(t) for t in out[0, len(prompt):]]


class _Recorded:
    """A drafter's stand-in recording (text, draft, room) of every call (its other attributes the drafter's)."""

    def __init__(self, drafter):
        self.drafter, self.calls = drafter, []

    def __call__(self, input_ids, max_tokens=None):
        draft = [int(t) for t in self.drafter(input_ids, max_tokens=max_tokens)]
        self.calls.append((list(input_ids), draft, max_tokens))
        return draft

    def __getattr__(self, name):
        return getattr(self.drafter, name)


def _assert_live_drafts(rule, calls, prompt_len):
    """Every call's draft is what live decoding drafts there (at most min(GAMMA, room) tokens: live decoding drafts at
    most the tokens left but one), its history advanced by each call's outcome: the drafts verified, and those kept
    (the text's growth before the next call, less the loop's own token)."""
    live = PolicyHistory(rule)
    for i, (ctx, draft, room) in enumerate(calls):
        assert room == prompt_len + NEW - len(ctx) - 1
        gamma = min(GAMMA, room)
        expected = reference_draft(rule, ctx, prompt_len, gamma, eos=(EOS,), history=live.state.copy()) if gamma else []
        assert draft == expected, (rule.name, i)
        if i + 1 < len(calls):
            live.observe(len(draft), len(calls[i + 1][0]) - len(ctx) - 1)


def _assert_verified(calls, text):
    """Each step grew the text by the drafts transformers kept (the longest prefix of the candidates that equals the
    greedy text) and one token of its own: the candidates reached its loop."""
    for (ctx, draft, _), (after, _, _) in zip(calls, calls[1:]):
        kept = next((i for i, t in enumerate(draft) if t != text[len(ctx) + i]), len(draft))
        assert len(after) == len(ctx) + kept + 1


def test_the_module_imports_nothing_of_the_project_and_runs_transformers_generator():
    from transformers.generation.candidate_generator import CandidateGenerator

    source = module_source(LOOKUP_POLICIES[3], "test", gamma=GAMMA)
    assert "evolve" not in [line.split()[1].split(".")[0] for line in source.splitlines()
                            if line.startswith(("import ", "from "))]
    module = _load(source, "exported_tf")
    assert issubclass(module.PolicyCandidates, CandidateGenerator)
    assert "class _PolicyDraft(object)" in source and "llama_cpp" not in source


@pytest.mark.parametrize("policy", LOOKUP_POLICIES[1:], ids=lambda r: r.expression or r.name)
def test_inside_generate_the_text_is_greedy_and_candidates_are_live_drafts(model, policy):
    """transformers' generate() with the module's candidates decodes plain greedy decoding's tokens, and every
    candidate list is what live decoding drafts at that text with the history the earlier steps gave."""
    module = _load(module_source(policy, "test", gamma=GAMMA), "exported_lookup")
    drafted = 0
    for prompt in PROMPTS:
        drafter = _Recorded(module.PolicyPromptLookup(3, 1, GAMMA, eos_token_ids=(EOS,)))
        out = _generate(model, prompt, module, drafter)
        assert out == _generate(model, prompt)
        assert drafter.calls[0][0] == prompt  # the first step drafts after the prompt (position 0)
        _assert_live_drafts(policy, drafter.calls, len(prompt))
        _assert_verified(drafter.calls, prompt + out)
        drafted += sum(len(d) for _, d, _ in drafter.calls)
    if policy.name != "fixed_gamma:gamma=0":
        assert drafted  # candidates were tried
    assert not hasattr(model, "_get_candidate_generator") or "_get_candidate_generator" not in vars(model)


def test_steps_and_candidates_reach_transformers_loop(model):
    """Each step of transformers' loop asks the module once (one streamer put per step after the prompt), and no
    candidate reaches past max_length - 1 (the model's own token)."""
    module = _load(module_source(LOOKUP_POLICIES[2], "test", gamma=GAMMA), "exported_fixed")
    puts = []
    streamer = types.SimpleNamespace(put=lambda v: puts.append(int(v.numel())), end=lambda: None)
    drafter = _Recorded(module.PolicyPromptLookup(3, 1, GAMMA, eos_token_ids=(EOS,)))
    out = _generate(model, PROMPTS[0], module, drafter, streamer)
    assert len(drafter.calls) == len(puts) - 1 and sum(puts[1:]) == len(out)
    asked = []
    gen = module.PolicyCandidates(lambda ids, max_tokens: asked.append(max_tokens) or [7] * 9,
                                  max_length=len(PROMPTS[0]) + 4)
    got, logits = gen.get_candidates(torch.tensor([PROMPTS[0]]))
    assert asked == [3] and logits is None  # the room left: max_length - length - 1
    full = torch.tensor([PROMPTS[0] + [7, 7, 7]])
    assert gen.get_candidates(full)[0] is full and asked[-1] == 0  # no room: asked for none, no candidates


def test_a_batch_of_more_than_one_row_or_another_generator_is_refused(model):
    module = _load(module_source(LOOKUP_POLICIES[2], "test"), "exported_batch")
    with pytest.raises(ValueError, match="one row"):
        module.generate(model, torch.tensor([PROMPTS[1], PROMPTS[1]]), max_new_tokens=4)
    with pytest.raises(ValueError, match="prompt_lookup_num_tokens selects another candidate generator"):
        module.generate(model, torch.tensor([PROMPTS[1]]), max_new_tokens=4, prompt_lookup_num_tokens=3)
    assert "_get_candidate_generator" not in vars(model)


def test_suffix_decoding_one_drafter_across_texts_is_greedy_and_drafts_as_live_decoding(model):
    """A suffix policy's module: one PolicySuffixDecoding across three texts inside generate(); each text plain
    greedy decoding's, every call's draft live decoding's with the earlier texts' responses in the cache (generate()
    ends each text with finish), and some draft from the cache."""
    require("arctic_inference.suffix_decoding")
    from test_export_llama_cpp_python_suffix import CACHED, DEPTH, GAMMA as SUFFIX_GAMMA, POLICIES, Reference

    capped = 0
    for policy in POLICIES[:3]:
        module = _load(module_source(policy, "test", gamma=SUFFIX_GAMMA, suffix=(DEPTH, CACHED)), "exported_suffix")
        drafter = module.PolicySuffixDecoding(DEPTH, CACHED, SUFFIX_GAMMA, eos_token_ids=(EOS,))
        reference, from_cache = Reference(policy, eos=(EOS,)), 0
        for prompt in PROMPTS + PROMPTS[:1]:
            recorded = _Recorded(drafter)
            out = _generate(model, prompt, module, recorded)
            assert out == _generate(model, prompt)
            capped += any(room < SUFFIX_GAMMA for _, _, room in recorded.calls)  # near the length limit
            reference.text(prompt, recorded.calls, prompt + out)
            from_cache += int(drafter._found is not None and drafter._found[3])
        assert drafter._requests == len(PROMPTS) + 1 and drafter._active is None  # each text ended by generate()
        assert from_cache
    assert capped  # some text reached its length limit, where fewer drafts are asked for


def test_columns_its_drafter_cannot_give_are_refused_naming_transformers():
    with pytest.raises(InputError, match=r"which the prompt-lookup drafter inside transformers cannot give") as err:
        module_source(LOOKUP_POLICIES[0].__class__("p", "t", "t", expression="sub(draft_prob, draft_index)",
                                                   lossless=True, kind="verify-length"), "test")
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("spec,exports", [("fixed_gamma:gamma=3", True), ("standard_rejection", False)])
def test_export_command_writes_the_module_or_refuses_in_one_line(tmp_path, spec, exports):
    from click.testing import CliRunner

    from evolve.cli.evolve import cli

    out = tmp_path / "candidates.py"
    res = CliRunner().invoke(cli, ["export", spec, "--to", "transformers-generate", "--output", str(out)])
    if exports:
        assert res.exit_code == 0, res.output
        text = out.read_text()
        assert "class PolicyCandidates(CandidateGenerator)" in text and "def generate(model" in text
    else:
        assert res.exit_code == 2 and "Traceback" not in res.output and not out.exists()
        assert len(res.output.strip().splitlines()) == 1 and "transformers" in res.output
