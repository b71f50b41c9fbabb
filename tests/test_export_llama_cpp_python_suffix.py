"""The llama-cpp-python module of a policy evolved on a suffix-decoding harvest
(:mod:`evolve.export.engines.llama_cpp_python_suffix`): ``PolicySuffixDecoding`` drafts from arctic-inference's suffix
trees as this project's suffix drafter does (texts one after another, each response joining the global cache), cut by
the policy as ``benchmark.py live`` cuts it, and inside ``Llama.generate`` the text is plain greedy decoding's.

CI installs arctic-inference and llama-cpp-python (``.ci/run``); elsewhere these tests skip where either is missing."""
from __future__ import annotations

import importlib.util
from types import SimpleNamespace

import pytest
from engine_helpers import require
from test_export_llama_cpp_python import _greedy, _load, llama_gguf

from evolve.errors import InputError
from evolve.export.engines.llama_cpp_python import SUFFIX_VALUES, module_source
from evolve.kinds.verify_length.live import PolicyHistory, policy_keep
from evolve.commands.rules import rule_named
from heuristics.contract import Rule

DEPTH, CACHED, GAMMA = 16, 50, 5


def _policy(expression: str) -> Rule:
    return Rule(f"s_{abs(hash(expression)) % 997}", "test policy", "test", expression=expression, lossless=True,
                kind="verify-length")


POLICIES = [rule_named("fixed_gamma:gamma=3"),
            _policy("sub(mul(suffix_match_len, suffix_prob), add(1.0, draft_index))"),
            _policy("if_gt(suffix_from_cache, 0.5, sub(4.0, draft_index), sub(suffix_cumprob, 0.3))"),
            _policy("sub(add(suffix_score, accept_ewma), add(1.5, mul(0.5, draft_index)))"),
            _policy("if_gt(position, 6.0, sub(suffix_prob, 0.5), sub(2.5, draft_index))")]


def _texts(n: int = 4):
    """Prompts whose greedy continuations repeat one another (the next token a function of the last two), so later
    texts draft from earlier responses."""
    return [[1 + i % 3, 7, 8, 1 + (i + 1) % 3, 9] for i in range(n)]


def _next_token(ctx):
    return int((ctx[-1] * 5 + ctx[-2] * 3) % 11) + 1 if len(ctx) % 7 else int(ctx[-4])


class Reference:
    """What live decoding drafts (the project's :class:`evolve.engine.suffix.SuffixDrafter`, one text at a time, with
    :func:`evolve.kinds.verify_length.live.policy_keep` and the text's :class:`PolicyHistory`)."""

    def __init__(self, rule, eos=()):
        from evolve.engine.suffix import SuffixDrafter

        self.rule, self.drafter, self.engine = rule, SuffixDrafter(DEPTH, CACHED, 100), SimpleNamespace(eos=set(eos))

    def text(self, prompt, calls, full):
        """Assert each call's draft ((text, draft) in order, or (text, draft, room): at most ``room`` drafts, as live
        decoding drafts at most the tokens left) is live decoding's, then end the text at ``full``."""
        row = SimpleNamespace(ctx=list(prompt))
        self.drafter.start(self.engine, SimpleNamespace(rows=[row]), 0)
        live = PolicyHistory(self.rule)
        for i, (ctx, draft, *room) in enumerate(calls):
            gamma = min([GAMMA, *room])
            keep = policy_keep(self.rule, len(ctx) - len(prompt), live.state.copy())
            ahead = self.drafter.lookahead(self.engine, list(ctx)) if keep.lookahead else {}
            expected = []
            if gamma and keep(0, [], [], [], ahead):
                batch = SimpleNamespace(rows=[SimpleNamespace(ctx=list(ctx))])
                expected = [int(t) for t in self.drafter.propose(self.engine, batch, [gamma], keep)[0][0]]
            assert draft == expected, (self.rule.name, i)
            if i + 1 < len(calls):
                live.observe(len(draft), len(calls[i + 1][0]) - len(ctx) - 1)
        row.ctx = list(full)
        self.drafter.finish(self.engine, SimpleNamespace(rows=[row]), 0)


@pytest.fixture(scope="module")
def modules(tmp_path_factory):
    require("arctic_inference.suffix_decoding")
    root = tmp_path_factory.mktemp("lcp-suffix")
    return [(rule, _load(module_source(rule, "test", gamma=GAMMA, suffix=(DEPTH, CACHED)), root, f"suffix_{i}"))
            for i, rule in enumerate(POLICIES)]


@pytest.mark.parametrize("finish", [True, False])
def test_drafts_equal_live_decodings_text_after_text(modules, finish):
    """Four texts in order through one draft model: every call drafts what live decoding drafts, its cache holding
    the earlier texts' responses (ended by finish(tokens), or, without it, by the next text's first call: the
    reference then ends each text where the module last saw it); some drafts come from earlier responses."""
    from_cache = 0
    for rule, module in modules:
        model = module.PolicySuffixDecoding(DEPTH, CACHED, GAMMA)
        reference = Reference(rule)
        for prompt in _texts():
            calls = []
            out = _greedy(_next_token, prompt, 24, model, calls)
            assert out == _greedy(_next_token, prompt, 24)  # the loop keeps the text greedy
            full = prompt + out if finish else calls[-1][0]
            if finish:
                model.finish(full)
            from_cache += int(model._found is not None and model._found[3])
            reference.text(prompt, calls, full)
        assert model._requests == len(_texts())
    assert from_cache  # some text's last draft came from the global cache


def test_warm_puts_earlier_texts_in_the_cache(modules):
    """warm(prompt, response) replays a text decoded elsewhere: the next text drafts as if it had been decoded here."""
    rule, module = modules[1]
    first, second = _texts(2)
    done = module.PolicySuffixDecoding(DEPTH, CACHED, GAMMA)
    _greedy(_next_token, first, 24, done)
    done.finish(first + _greedy(_next_token, first, 24))
    warmed = module.PolicySuffixDecoding(DEPTH, CACHED, GAMMA)
    warmed.warm(first, _greedy(_next_token, first, 24))
    calls_done, calls_warm = [], []
    _greedy(_next_token, second, 24, done, calls_done)
    _greedy(_next_token, second, 24, warmed, calls_warm)
    assert calls_done == calls_warm and any(d for _, d in calls_done)


def test_columns_of_another_drafter_are_refused():
    """A suffix policy reading prompt lookup's columns (or the drafter's constant probabilities) is refused in one
    line naming the drafter, and a lookup policy reading the suffix columns likewise."""
    for feature in ("lookup_len", "draft_prob"):
        with pytest.raises(InputError, match=f"reads '{feature}', which the suffix-decoding drafter") as err:
            module_source(_policy(f"sub({feature}, draft_index)"), "test", suffix=(DEPTH, CACHED))
        assert "\n" not in str(err.value)
    with pytest.raises(InputError, match="another drafter's column"):
        module_source(_policy("sub(suffix_prob, draft_index)"), "test")
    assert {"suffix_match_len", "suffix_from_cache", "draft_index", "accept_ewma"} <= set(SUFFIX_VALUES)


@pytest.mark.parametrize("policy", POLICIES[1:4], ids=lambda r: r.expression)
def test_inside_llama_cpp_python_the_text_is_greedy_and_drafts_are_live_decodings(tmp_path, monkeypatch, policy):
    """With llama-cpp-python 0.3.36 and arctic-inference 0.3.0 installed (the conformance lane): a tiny GGUF decodes
    two texts one after the other with the exported suffix draft model, each the same tokens as without it, and every
    call inside ``Llama.generate`` drafts what live decoding drafts with the earlier text in the cache."""
    llama_cpp = require("llama_cpp")
    require("arctic_inference.suffix_decoding")
    path = llama_gguf(tmp_path, monkeypatch)
    spec = importlib.util.spec_from_loader("exported_suffix", loader=None)
    module = importlib.util.module_from_spec(spec)
    exec(compile(module_source(policy, "test", gamma=GAMMA, suffix=(DEPTH, CACHED)), "exported_suffix", "exec"),
         module.__dict__)
    llm = llama_cpp.Llama(str(path), n_ctx=256, n_threads=1, verbose=False, logits_all=True, seed=0)
    prompts = [[1, 5, 6, 7, 5, 6, 8, 5, 6, 7, 5, 6], [1, 5, 6, 8, 5, 6, 7]]

    def generate(prompt):
        out = []
        for tok in llm.generate(prompt, temp=0.0):
            out.append(int(tok))
            if len(out) == 40:
                break
        return out

    plain = [generate(p) for p in prompts]
    calls: list = []

    class Recorded(module.PolicySuffixDecoding):
        def __call__(self, input_ids, /, **kwargs):
            draft = super().__call__(input_ids, **kwargs)
            calls[-1].append((list(map(int, input_ids)), list(map(int, draft))))
            return draft

    llm.draft_model = Recorded(DEPTH, CACHED, GAMMA, eos_token_ids=(2,))
    reference = Reference(policy, eos=(2,))
    for prompt, expected in zip(prompts, plain):
        calls.append([])
        llm.draft_model.start(len(prompt))
        assert generate(prompt) == expected
        llm.draft_model.finish(prompt + expected)
        reference.text(prompt, calls[-1], prompt + expected)
    assert any(d for text in calls for _, d in text)  # some call drafted
