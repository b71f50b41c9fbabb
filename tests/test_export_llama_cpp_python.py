"""The llama-cpp-python export (:mod:`evolve.export.engines.llama_cpp_python`): a standalone ``LlamaDraftModel``
whose drafts are this project's prompt lookup cut by the policy, as ``benchmark.py live`` decides them."""
from __future__ import annotations

import importlib.util
import sys
import textwrap
from types import SimpleNamespace

import numpy as np
import pytest
from engine_helpers import require
from hypothesis import given, settings, strategies as st

from evolve.engine.ngram import NgramDrafter
from evolve.errors import InputError
from evolve.export.engines.llama_cpp_python import COLUMN_VALUES, module_source
from heuristics.champions import Champion, save_champion
from evolve.kinds.verify_length.live import PolicyHistory, policy_keep
from evolve.commands.rules import rule_named
from heuristics.contract import Rule

#: llama_cpp/llama_speculative.py's abstract class, as llama-cpp-python defines it.
STUB = '''
import abc


class LlamaDraftModel(abc.ABC):
    @abc.abstractmethod
    def __call__(self, input_ids, /, **kwargs):
        raise NotImplementedError()
'''


def _policy(expression: str) -> Rule:
    return Rule(f"p_{abs(hash(expression)) % 997}", "test policy", "test", expression=expression, lossless=True,
                kind="verify-length")


POLICIES = [rule_named("fixed_gamma:gamma=0"), rule_named("fixed_gamma:gamma=2"), rule_named("fixed_gamma:gamma=5"),
            _policy("div(position, sub(lookup_len, draft_index))"),
            _policy("sub(lookup_freq, 0.6)"),
            _policy("if_gt(position, 12.0, sub(3.5, draft_index), sub(mul(lookup_len, lookup_freq), draft_index))"),
            _policy("if_gt(position, 12.0, sub(3.5, draft_index), sub(mul(lookup_len, lookup_freq), draft_index))"),
            _policy("sub(sub(lookup_len, 0.5), mul(0.4, draft_index))"),
            # the request so far (history features): how the text's earlier calls fared
            _policy("sub(add(accept_ewma, mul(0.3, prev_accepted)), add(0.5, mul(0.2, draft_index)))"),
            _policy("if_gt(since_reject, 1.0, sub(4.0, draft_index), sub(first_hit_ewma, add(0.6, draft_index)))"),
            _policy("sub(add(sub(prev_verified, prev_accepted), 1.5), draft_index)")]
#: The policies above that read the text's history.
HISTORY_POLICIES = POLICIES[-3:]


def _load(source: str, root, name: str):
    """Import the generated module ``source`` with the stub llama_cpp package on sys.path."""
    package = root / "stub" / "llama_cpp"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text("")
    (package / "llama_speculative.py").write_text(textwrap.dedent(STUB))
    path = root / f"{name}.py"
    path.write_text(source)
    sys.path.insert(0, str(root / "stub"))
    try:
        for cached in [m for m in sys.modules if m == "llama_cpp" or m.startswith("llama_cpp.")]:
            del sys.modules[cached]
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(root / "stub"))
        for cached in [m for m in sys.modules if m == "llama_cpp" or m.startswith("llama_cpp.")]:
            del sys.modules[cached]
    return module


def reference_draft(rule, ctx, prompt_len: int, gamma: int, ngram=(3, 1), eos=(), history=None):
    """What live decoding (:meth:`evolve.live.decoding.ChainDecoder.text`) drafts for ``ctx`` (the project's drafter and
    policy), with the text's ``history`` state (None: a text's start)."""
    drafter = NgramDrafter(ngram[0], ngram[1], 100)
    engine = SimpleNamespace(eos=set(eos))
    keep = policy_keep(rule, len(ctx) - prompt_len, history)
    ahead = drafter.lookahead(engine, list(ctx)) if keep.lookahead else {}
    if not keep(0, [], [], [], ahead):
        return []
    batch = SimpleNamespace(rows=[SimpleNamespace(ctx=list(ctx))])
    return list(drafter.propose(engine, batch, [gamma], keep)[0][0])


def llama_gguf(tmp_path, monkeypatch):
    """test_harvest.py's tiny GGUF, with a BPE merge that llama.cpp's loader requires (its vocabulary's 'z' becomes
    'ab', the product of the one merge 'a b', so transformers' loader accepts it too)."""
    gguf = pytest.importorskip("gguf")
    from test_harvest import _gguf_pair

    add = gguf.GGUFWriter.add_token_list

    def with_merge(self, tokens):
        tokens = list(tokens)
        tokens[tokens.index("z")] = "ab"
        add(self, tokens)
        self.add_token_merges(["a b"])
    monkeypatch.setattr(gguf.GGUFWriter, "add_token_list", with_merge)
    return _gguf_pair(tmp_path)[0]


@pytest.fixture(scope="module")
def modules(tmp_path_factory):
    root = tmp_path_factory.mktemp("lcp")
    return [(rule, _load(module_source(rule, "test"), root, f"exported_{i}")) for i, rule in enumerate(POLICIES)]


def test_module_imports_nothing_of_the_project(modules):
    for rule, module in modules:
        text = open(module.__file__).read()
        assert "evolve" not in [line.split()[1].split(".")[0] for line in text.splitlines()
                                if line.startswith(("import ", "from "))]
        assert "LlamaDraftModel" in [c.__name__ for c in module.PolicyPromptLookup.__mro__]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 4), min_size=2, max_size=40), st.integers(0, 30), st.integers(1, 8),
       st.sampled_from([(3, 1), (2, 2), (4, 2)]))
def test_drafts_equal_the_projects_drafter_and_policy(modules, tokens, cut, gamma, ngram):
    prompt_len = min(cut, len(tokens) - 1)
    for rule, module in modules:
        model = module.PolicyPromptLookup(ngram[0], ngram[1], gamma, eos_token_ids=(4,))
        model.start(prompt_len)
        got = model(np.asarray(tokens, dtype=np.intc))
        assert got.dtype == np.intc
        assert list(got) == reference_draft(rule, tokens, prompt_len, gamma, ngram, eos=(4,)), rule.name


def _greedy(next_token, prompt, n, draft_model=None, calls=None):
    """llama-cpp-python's ``Llama.generate`` loop under greedy decoding with a deterministic model: after each
    sampled token the draft model gets the text so far; the model's token at each drafted position is sampled in
    turn, the drafts kept while they equal it; at the first that differs (the corrected token), or after the last
    draft (the token after the drafts), the draft model is called again."""
    ctx, out = list(prompt), []
    tok = next_token(ctx)
    ctx.append(tok)
    out.append(tok)
    while len(out) < n:
        draft = list(draft_model(np.asarray(ctx, dtype=np.intc))) if draft_model is not None else []
        if calls is not None:
            calls.append((list(ctx), draft))
        for d in [*draft, None]:  # each drafted position, then the one after the drafts
            if len(out) >= n:
                break
            tok = next_token(ctx)
            ctx.append(tok)
            out.append(tok)
            if tok != d:
                break
    return out


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(0, 5), min_size=3, max_size=20), st.integers(0, 2**16))
def test_inside_the_generate_loop_drafts_match_and_text_is_greedy(modules, prompt, salt):
    """Without start(): the draft model finds each text's prompt itself; texts equal plain greedy decoding."""
    def next_token(ctx):
        return int((ctx[-1] * 3 + len(ctx) % 4 + salt) % 6) if len(ctx) % 5 else int(ctx[-2])

    plain = _greedy(next_token, prompt, 30)
    for rule, module in modules:
        model = module.PolicyPromptLookup(3, 1, 6)
        for _ in range(2):  # a second text with the same prompt: a new text again (its history starts again)
            calls = []
            assert _greedy(next_token, prompt, 30, model, calls) == plain
            assert_live_drafts(rule, calls, len(prompt))


def assert_live_drafts(rule, calls, prompt_len: int, gamma: int = 6, eos=()):
    """Every call's draft ((text, draft) in call order, one text) is what live decoding drafts there, its history
    advanced as live decoding advances it (:class:`evolve.kinds.verify_length.live.PolicyHistory`) by each call's
    outcome: the drafts verified, and those kept (the text's growth before the next call, less the sampled token)."""
    live = PolicyHistory(rule)
    for i, (ctx, draft) in enumerate(calls):
        expected = reference_draft(rule, ctx, prompt_len, gamma, eos=eos, history=live.state.copy())
        assert draft == expected, (rule.name, i)
        if i + 1 < len(calls):
            live.observe(len(draft), len(calls[i + 1][0]) - len(ctx) - 1)


def test_history_policies_draft_by_their_history():
    """The history policies above are not a fixed function of the current text: the same text with another
    history drafts differently, so the tests above check that the module tracks it."""
    ctx = [1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2]
    for rule in HISTORY_POLICIES:
        drafts = {tuple(reference_draft(rule, ctx, 3, 6, history=h))
                  for h in ([0.0, 0.0, 1.0, 1.0, 0.0], [6.0, 0.0, 0.1, 0.0, 0.0], [6.0, 6.0, 0.9, 1.0, 12.0])}
        assert len(drafts) > 1, rule.name


def _unavailable() -> list[str]:
    """Every feature a verification-length policy may read that the lookup drafter inside llama-cpp-python cannot give:
    the drafter's probabilities (constant 1 or 0 for a one-hot lookup draft) among them."""
    from evolve.gp.primitives import FEATURES, OPTIONAL_FEATURES
    from evolve.kinds.registry import KINDS

    kind = KINDS["verify-length"]
    names = [f for f in (*FEATURES, *OPTIONAL_FEATURES, *kind.derived_features) if f not in kind.excluded_features]
    return sorted({f for f in names if f not in COLUMN_VALUES})


def test_every_drafter_probability_is_among_the_refused():
    assert {"draft_prob", "draft_top_prob", "draft_cumprob", "draft_entropy"} <= set(_unavailable())


@pytest.mark.parametrize("feature", _unavailable())
def test_a_column_the_lookup_drafter_cannot_give_is_refused(feature, tmp_path):
    """A policy reading it would run inside llama-cpp-python as another policy (a constant column): refused in one
    line, by the module writer and by the command."""
    from click.testing import CliRunner

    from evolve.cli.evolve import cli

    with pytest.raises(InputError, match=f"reads '{feature}'") as err:
        module_source(_policy(f"sub({feature}, draft_index)"), "test")
    assert "\n" not in str(err.value)
    path = save_champion(Champion(name="p", expression=f"sub({feature}, draft_index)", description="t",
                                  features=tuple(sorted({feature, "draft_index"})), kind="verify-length",
                                  metrics={"train": {"fitness": 0.5}, "valid": {"fitness": 0.5}}), tmp_path)[0]
    res = CliRunner().invoke(cli, ["export", str(path), "--to", "llama-cpp-python", "--output", str(tmp_path / "m")])
    assert res.exit_code == 2 and f"reads '{feature}'" in res.stderr and not (tmp_path / "m").exists()


def test_other_kinds_and_lossy_verifiers_are_refused():
    with pytest.raises(InputError, match="verification-length policy"):
        module_source(rule_named("standard_rejection"), "test")
    lossy = Rule("lossy", "", "", expression="sub(2.5, draft_index)", kind="verify-length",
                 settings=(("verify_with", "fuzzy_sd:T=0.1"),))
    with pytest.raises(InputError, match="verifies with"):
        module_source(lossy, "test")


@pytest.mark.parametrize("policy", [POLICIES[6], *HISTORY_POLICIES], ids=lambda r: r.expression)
def test_greedy_decoding_with_the_exported_module_equals_plain_decoding_in_llama_cpp(tmp_path, monkeypatch, policy):
    """With llama-cpp-python installed: a tiny GGUF decodes the same tokens greedily with the exported draft model
    as without it, and inside ``Llama.generate`` every call drafts what live decoding drafts with the text's
    history. Run in CI (the conformance lane: llama-cpp-python 0.3.36, built by .ci/run)."""
    llama_cpp = require("llama_cpp")
    path = llama_gguf(tmp_path, monkeypatch)
    spec = importlib.util.spec_from_loader("exported_real", loader=None)
    module = importlib.util.module_from_spec(spec)
    exec(compile(module_source(policy, "test"), "exported_real", "exec"), module.__dict__)
    llm = llama_cpp.Llama(str(path), n_ctx=256, n_threads=1, verbose=False, logits_all=True, seed=0)
    prompt = [1, 5, 6, 7, 5, 6, 8, 5, 6, 7, 5, 6]
    plain = []
    for tok in llm.generate(prompt, temp=0.0):
        plain.append(tok)
        if len(plain) == 40:
            break
    calls = []

    class Recorded(module.PolicyPromptLookup):
        def __call__(self, input_ids, /, **kwargs):
            draft = super().__call__(input_ids, **kwargs)
            calls.append((list(map(int, input_ids)), list(map(int, draft))))
            return draft

    llm.draft_model = Recorded(3, 1, 6, eos_token_ids=(2,))
    spec_out = []
    for tok in llm.generate(prompt, temp=0.0):
        spec_out.append(tok)
        if len(spec_out) == 40:
            break
    assert spec_out == plain
    assert llm.draft_model._prompt_len == len(prompt)  # found by the draft model itself
    assert any(calls[i][1] for i in range(len(calls)))  # some call drafted
    assert_live_drafts(policy, calls, len(prompt), eos=(2,))


@pytest.mark.parametrize("spec,exports", [("fixed_gamma:gamma=3", True), ("confidence_threshold:h=0.5", False),
                                          ("standard_rejection", False), ("mixture_0.9", False)])
def test_export_command_writes_the_module_or_refuses_in_one_line(tmp_path, spec, exports):
    """``python -m evolve export SPEC --to llama-cpp-python``: a verification-length policy is written as the module;
    a program of another kind is refused in one line naming the nearest setting (exit 2, no traceback, no file)."""
    from click.testing import CliRunner

    from evolve.cli.evolve import cli

    out = tmp_path / "draft.py"
    res = CliRunner().invoke(cli, ["export", spec, "--to", "llama-cpp-python", "--output", str(out)])
    if exports:
        assert res.exit_code == 0, res.output
        assert "class PolicyPromptLookup(_PolicyDraft)" in out.read_text()
        assert "class _PolicyDraft(LlamaDraftModel)" in out.read_text()
    else:
        assert res.exit_code == 2 and "Traceback" not in res.output and not out.exists()
        assert len(res.output.strip().splitlines()) == 1
        assert "nearest setting" in res.output or "cannot give" in res.output
