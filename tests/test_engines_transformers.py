"""The transformers conformance lane: every file the exporter writes for transformers is applied exactly as its
``use:`` line says (to the assistant model's ``generation_config`` with ``GenerationConfig.update``, or as
``generate()`` keyword arguments selecting prompt lookup) and run through transformers 5.24's real ``generate()`` on
tiny offline Llama models; the library's own candidate generators, observed in the loop, draft the exported length
per step (the confidence threshold as written where scikit-learn is not importable), and greedy decoding gives plain
greedy decoding's text."""
from __future__ import annotations

import json

import pytest

from engine_helpers import DRAFTERS, cases, drafted, losing_cases, require
from evolve.export.engines import transformers as exporter

NEW_TOKENS = 24


@pytest.fixture(scope="module")
def models(llama_files):
    transformers = require("transformers")
    assert transformers.__version__ == exporter.VERSION
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    target = AutoModelForCausalLM.from_pretrained(llama_files["target"])
    tok = AutoTokenizer.from_pretrained(llama_files["target"])
    ids = tok("w1 w2 w3 w1 w2 w3 w4 w1 w2", return_tensors="pt").input_ids
    return target, llama_files["draft"], ids


@pytest.fixture
def observed(monkeypatch):
    """Per candidate generator created: its settings at the start and the tokens it drafted at each step."""
    from transformers.generation import candidate_generator as cg

    seen: list[dict] = []

    def watch(cls, settings):
        init, get = cls.__init__, cls.get_candidates

        def __init__(self, *a, **k):
            init(self, *a, **k)
            seen.append({"cls": cls.__name__, **settings(self), "drafted": [], "self": self})

        def get_candidates(self, input_ids, *a, **k):
            out = get(self, input_ids, *a, **k)
            seen[-1]["drafted"].append(out[0].shape[-1] - input_ids.shape[-1])
            return out

        monkeypatch.setattr(cls, "__init__", __init__)
        monkeypatch.setattr(cls, "get_candidates", get_candidates)

    watch(cg.AssistedCandidateGenerator, lambda g: {"tokens": g.num_assistant_tokens,
                                                    "threshold": g.assistant_generation_config.
                                                    assistant_confidence_threshold})
    watch(cg.PromptLookupCandidateGenerator, lambda g: {"tokens": g.num_output_tokens,
                                                        "ngram": g.max_matching_ngram_size})
    return seen


def run(models, settings: dict, use: str):
    """``generate()`` as the file's ``use:`` line says, greedily; returns the new tokens."""
    from transformers import AutoModelForCausalLM

    target, draft_path, ids = models
    if "prompt_lookup_num_tokens" in settings:
        assert "model.generate(**inputs, **settings)" in use
        out = target.generate(ids, do_sample=False, max_new_tokens=NEW_TOKENS, **settings)
    else:
        assert "draft.generation_config.update(**settings)" in use
        draft = AutoModelForCausalLM.from_pretrained(draft_path)
        draft.generation_config.update(**settings)
        out = target.generate(ids, do_sample=False, max_new_tokens=NEW_TOKENS, assistant_model=draft)
    return out[0, ids.shape[1]:].tolist()


def test_every_file_is_run_as_scored(models, observed, monkeypatch, vocab_dataset, tmp_path):
    from transformers.generation import candidate_generator as cg

    monkeypatch.setattr(cg, "is_sklearn_available", lambda: False)  # the condition the files state for thresholds
    target, _, ids = models
    plain = target.generate(ids, do_sample=False, max_new_tokens=NEW_TOKENS)[0, ids.shape[1]:].tolist()
    done: set[str] = set()
    for case in [*cases(exporter.ENGINE), *losing_cases(exporter.ENGINE, vocab_dataset, tmp_path)]:
        if case.refusal:
            assert "\n" not in case.refusal, case.label
            continue
        body = json.loads(case.text)
        use = body.pop("_provenance")[-1]
        if not body:
            assert "plain decoding" in use and drafted(case.setting) in (0, None), case.label
            continue
        key = json.dumps(body, sort_keys=True)
        if key in done:
            continue
        done.add(key)
        observed.clear()
        assert run(models, body, use) == plain, case.label  # greedy: plain greedy decoding's text
        (generator,) = observed
        steps = drafted(case.setting)
        assert generator["tokens"] == steps, case.label
        assert max(generator["drafted"]) <= steps, (case.label, generator)
        if DRAFTERS[case.drafter].lookup:
            assert generator["cls"] == "PromptLookupCandidateGenerator" and generator["ngram"] == 3
        else:
            assert generator["threshold"] == body["assistant_confidence_threshold"], case.label
            if body["assistant_confidence_threshold"] == 0:  # no stop: every step drafts the length
                assert steps in generator["drafted"], (case.label, generator["drafted"])
                assert set(generator["drafted"][:-1]) <= {steps}, (case.label, generator["drafted"])
            # without scikit-learn the threshold stays as written through the generation
            assert generator["self"].assistant_generation_config.assistant_confidence_threshold == \
                body["assistant_confidence_threshold"]
    assert len(done) >= 8


def test_keyword_arguments_are_not_the_assistants_settings(models, observed):
    """Why the file goes to the assistant's generation_config: passed to generate() as keyword arguments the
    settings are ignored and the library defaults (20 tokens, threshold 0.4, the engine-default row) run."""
    from transformers import AutoModelForCausalLM

    target, draft_path, ids = models
    draft = AutoModelForCausalLM.from_pretrained(draft_path)
    target.generate(ids, do_sample=False, max_new_tokens=NEW_TOKENS, assistant_model=draft, num_assistant_tokens=3,
                    assistant_confidence_threshold=0.0)
    assert (observed[-1]["tokens"], observed[-1]["threshold"]) == (exporter.DEFAULT_TOKENS, exporter.DEFAULT_THRESHOLD)


def test_a_threshold_is_retuned_where_scikit_learn_is_importable(models, observed, monkeypatch):
    """The condition written into confidence files: with scikit-learn the library moves the threshold during
    generation (so the file says it holds only without it)."""
    pytest.importorskip("sklearn")
    from transformers import AutoModelForCausalLM
    from transformers.generation import candidate_generator as cg

    monkeypatch.setattr(cg, "is_sklearn_available", lambda: True)
    target, draft_path, ids = models
    draft = AutoModelForCausalLM.from_pretrained(draft_path)
    draft.generation_config.update(num_assistant_tokens=4, num_assistant_tokens_schedule="constant",
                                   assistant_confidence_threshold=0.05)
    target.generate(ids, do_sample=False, max_new_tokens=60, assistant_model=draft)
    assert hasattr(observed[-1]["self"], "probs")  # the ROC re-tuning is armed
    assert exporter.SKLEARN_CONDITION in exporter.render(
        *next((c.setting, c) for c in cases(exporter.ENGINE) if c.setting and c.setting.note)[:1],
        __import__("evolve.export.engines.base", fromlist=["Provenance"]).Provenance("r", "e", "s", "k", True))
