"""The transformers draft-model target: a verification-length policy drafting inside transformers' own
assisted-generation loop (``python -m evolve export CHAMPION --to transformers-generate``).

transformers (huggingface/transformers 5.24.0) runs speculative decoding in ``GenerationMixin._assisted_decoding``
(``src/transformers/generation/utils.py``): at each step it asks a ``CandidateGenerator``
(``src/transformers/generation/candidate_generator.py``) for candidate tokens after the text so far, scores them with
one forward of the model and keeps them while they equal the tokens it selects at each position (greedy; with sampling,
its own acceptance), then calls the generator's ``update_candidate_strategy``. ``generate()`` picks the generator in
``GenerationMixin._get_candidate_generator`` from its arguments (its own prompt lookup for ``prompt_lookup_num_tokens``,
an assistant model, ...); transformers ships no suffix decoding and no way to pass a generator of one's own.

The module written (:func:`module_source`: the drafter classes of the llama-cpp-python module,
:mod:`evolve.export.engines.llama_cpp_python`, on a plain base, with the same drafts and decisions) adds
``PolicyCandidates``, a ``CandidateGenerator`` whose candidates are the policy's drafts (the drafter asked for at most
``max_length - length - 1`` of them before the policy decides, as live decoding drafts at most the tokens left but one:
the model adds a token of its own), and ``generate(model, inputs, drafter=..., **kwargs)``: ``model.generate(inputs,
prompt_lookup_num_tokens=GAMMA, **kwargs)`` with that model's ``_get_candidate_generator`` answering
``PolicyCandidates`` for the duration of the call (an attribute of the model instance, restored after it), so that
everything else (the cache, logits processors, stopping criteria, streamer, verification and output) is transformers'
own. ``drafter.start(prompt length)`` is called before and, for suffix decoding, ``drafter.finish(text)`` after, so one
drafter kept across calls holds the global cache of earlier responses. Batches of one row, as transformers' assisted
generation takes; another candidate generator (``prompt_lookup_num_tokens``, ``assistant_model``, ``custom_generate``)
is refused (ValueError).

Checked (``tests/test_export_transformers_generate.py``) by transformers 5.24.0's own ``generate()``: greedy text
equal to its plain decoding's, candidates equal to the project's live drafts.
"""
from __future__ import annotations

import os

from evolve.engine.drafter_base import EngineFamily
from evolve.export.engines import llama_cpp_python as draft_module
from evolve.export.engines.base import Capabilities, Engine, Provenance, Setting
from heuristics.contract import Rule

#: The export target's name, and the engine whose loop runs its module (whose cost files price it).
NAME, COST_ENGINE = "transformers-generate", "transformers"
#: The transformers version the module was checked against (``CandidateGenerator``, ``_get_candidate_generator``,
#: ``_assisted_decoding``).
VERSION = "5.24.0"

_TAIL = '''

class PolicyCandidates(CandidateGenerator):
    """transformers' candidate generator whose candidates are ``drafter``'s drafts (the module doc): at most
    ``max_length - length - 1`` of them, ``max_length`` the generation config's."""

    def __init__(self, drafter, max_length):
        self.drafter, self.max_length = drafter, int(max_length)

    def get_candidates(self, input_ids, **kwargs):
        room = max(self.max_length - input_ids.shape[1] - 1, 0)  # asked at every step, as the drafter counts them
        draft = [int(t) for t in self.drafter(input_ids[0].tolist(), max_tokens=room)][:room]
        if not draft:
            return input_ids, None
        tail = torch.tensor([draft], dtype=input_ids.dtype, device=input_ids.device)
        return torch.cat([input_ids, tail], dim=1), None

    def update_candidate_strategy(self, input_ids, scores, num_matches):
        """Nothing: the drafter reads each step's outcome from how far the next text grew."""


def generate(model, inputs=None, drafter=None, **kwargs):
    """``model.generate(inputs, **kwargs)`` with ``drafter`` (a DRAFTER_CLASS; None: one at the module's defaults)
    proposing the candidates of transformers' assisted-generation loop (the module doc); returns what generate()
    returns. One row: ``inputs`` of shape (1, prompt length)."""
    drafter = DRAFTER_CLASS() if drafter is None else drafter
    ids = inputs if inputs is not None else kwargs.get("input_ids")
    if ids is None or ids.dim() != 2 or ids.shape[0] != 1:
        raise ValueError("generate: give the prompt ids as a (1, length) tensor (assisted generation takes one row)")
    for name in ("prompt_lookup_num_tokens", "assistant_model", "custom_generate"):
        if kwargs.get(name) is not None:
            raise ValueError(f"generate: {name} selects another candidate generator; the drafter is this module's")
    drafter.start(ids.shape[1])

    def candidates(generation_config, **unused):
        return PolicyCandidates(drafter, generation_config.max_length)

    before = vars(model).get("_get_candidate_generator")
    model._get_candidate_generator = candidates
    try:
        out = model.generate(inputs, prompt_lookup_num_tokens=drafter.num_pred_tokens, **kwargs)
    finally:
        if before is None:
            vars(model).pop("_get_candidate_generator", None)
        else:
            model._get_candidate_generator = before
    if hasattr(drafter, "finish"):
        drafter.finish(getattr(out, "sequences", out)[0].tolist())
    return out
'''

def _render(setting: Setting, provenance: Provenance, schedule=None) -> str:
    """The module text of ``setting.rule`` for transformers (:func:`evolve.export.engines.llama_cpp_python._render`
    with :data:`HOST`)."""
    return draft_module._render(setting, provenance, schedule, host=HOST)


#: What transformers' loop runs: the per-draft-step decisions of the llama-cpp-python module, on the same drafters.
ENGINE = Engine(NAME, "transformers (generate)", "a CandidateGenerator module (Python)", (),
                Capabilities(step_policy=True, step_columns=draft_module.ENGINE.capabilities.step_columns),
                _render, VERSION,
                "CandidateGenerator and generate()'s assisted-generation loop of the released package (a module "
                "run in its loop)")

#: transformers: the drafter answers ``PolicyCandidates.get_candidates`` inside ``generate()``.
HOST = draft_module.Host(
    ENGINE, "transformers", "torch, transformers",
    ("import torch", "from transformers.generation.candidate_generator import CandidateGenerator"), "object",
    lambda cls: (f"    import this_module as m\n    drafter = m.{cls}(eos_token_ids=(EOS,))  # keep it across calls\n"
                 f"    out = m.generate(model, input_ids, drafter=drafter, max_new_tokens=64, do_sample=False)"),
    f"generate() starts each text (start(prompt_len)). transformers {VERSION}'s assisted generation verifies the "
    f"drafts in its own loop (GenerationMixin._assisted_decoding): with do_sample=False the text is plain greedy "
    f"decoding's.",
    "the same champion exported for transformers (the export target transformers: an assistant model's settings)",
    _TAIL)


def module_source(rule: Rule, provenance: str, ngram=draft_module.DEFAULT_LOOKUP, gamma: int = 8,
                  notes: tuple[str, ...] = (), suffix: tuple[int, int] | None = None) -> str:
    """The module text of ``rule`` for transformers (:func:`evolve.export.engines.llama_cpp_python.module_source`,
    same arguments and errors, with :data:`HOST`)."""
    return draft_module.module_source(rule, provenance, ngram, gamma, notes, suffix, HOST)


def check_policy(rule: Rule, family: EngineFamily = EngineFamily.LOOKUP) -> None:
    """:func:`evolve.export.engines.llama_cpp_python.check_policy` for transformers' loop."""
    draft_module.check_policy(rule, family, HOST)


def champion_module(spec: str, champions_dir: str | os.PathLike | None = None) -> tuple[Rule, str]:
    """(rule, module text) of ``spec`` (:func:`evolve.export.engines.llama_cpp_python.champion_module`, for
    transformers)."""
    return draft_module.champion_module(spec, champions_dir, HOST)


def policy_module(rule: Rule, source: str, notes: tuple[str, ...] = ()) -> str:
    """:func:`evolve.export.engines.llama_cpp_python.policy_module` for transformers."""
    return draft_module.policy_module(rule, source, notes, HOST)


drafter_of = draft_module.drafter_of

__all__ = ["COST_ENGINE", "ENGINE", "HOST", "NAME", "VERSION", "champion_module", "check_policy", "drafter_of",
           "module_source", "policy_module"]
