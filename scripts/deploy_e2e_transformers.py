"""End to end, transformers: export champions for transformers and decode SmolLM2-135M-Instruct with each file applied
exactly as its ``use:`` line says (the assistant's generation_config updated from the file, or the file's keyword
arguments to ``generate()`` for prompt lookup), SmolLM2 as its own assistant; the library's own candidate generator,
read in the loop (its ``num_assistant_tokens`` / ``num_output_tokens``, its assistant's
``assistant_confidence_threshold``, the candidates it returns each step), shows the exported draft length and threshold
took effect, and the text equals plain greedy decoding's. Not run by CI.

    python scripts/deploy_e2e_transformers.py MODEL.gguf OUT_DIR [NEW_TOKENS]

The confidence file states that its threshold holds only where scikit-learn is not importable; this project installs
scikit-learn, so that run sets transformers' ``is_sklearn_available`` to False, the condition the file names.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers.generation import candidate_generator as cg

from heuristics.champions import Champion, save_champion

PROMPT = "List the days of the week, then list them again in the same order, then once more:"


def export(spec: str, out: Path) -> dict:
    subprocess.run([sys.executable, "-m", "evolve", "export", spec, "--to", "transformers", "--output", str(out)],
                   check=True)
    return json.loads(out.read_text())


def watch(seen: list) -> None:
    """Record each candidate generator's settings and the tokens it drafts per step (the library's own values)."""
    for cls, read in ((cg.AssistedCandidateGenerator, lambda g: {
            "num_assistant_tokens": g.num_assistant_tokens,
            "assistant_confidence_threshold": g.assistant_generation_config.assistant_confidence_threshold}),
                      (cg.PromptLookupCandidateGenerator, lambda g: {"num_output_tokens": g.num_output_tokens,
                                                                      "max_matching_ngram_size":
                                                                          g.max_matching_ngram_size})):
        init, get = cls.__init__, cls.get_candidates

        def __init__(self, *a, _init=init, _read=read, _cls=cls, **k):
            _init(self, *a, **k)
            seen.append({"generator": _cls.__name__, **_read(self), "drafted": [], "object": self})

        def get_candidates(self, input_ids, *a, _get=get, **k):
            out = _get(self, input_ids, *a, **k)
            seen[-1]["drafted"].append(int(out[0].shape[-1] - input_ids.shape[-1]))
            return out

        cls.__init__, cls.get_candidates = __init__, get_candidates


def main(model_file: str, out: str, new_tokens: int = 64) -> None:
    path, out_dir = Path(model_file), Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    tok = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    load = lambda: AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)  # noqa
    target = load()
    ids = tok(PROMPT, return_tensors="pt").input_ids
    plain = target.generate(ids, do_sample=False, max_new_tokens=new_tokens)[0, ids.shape[1]:].tolist()
    save_champion(Champion(name="lookup_length_5", expression="sub(4.5, draft_index)", description="e2e",
                           kind="verify-length", features=("draft_index",),
                           metrics={"train": {"fitness": 0.5}, "valid": {"fitness": 0.5}},
                           provenance={"data": {"generator_config": {"drafter": {"kind": "ngram", "max": 3,
                                                                                 "min": 1}}}}),
                  out_dir, overwrite=True)
    seen: list = []
    watch(seen)
    rows = []
    for name, spec in (("fixed length 4", "fixed_gamma:gamma=4"), ("confidence h=0.5 cap 6",
                                                                  "min(sub(draft_top_prob, 0.5), sub(5.5, draft_index))"),
                       ("prompt lookup length 5", str(out_dir / "lookup_length_5.json"))):
        if spec.startswith("min("):
            save_champion(Champion(name="confidence_cap6", expression=spec, description="e2e", kind="verify-length",
                                   features=("draft_top_prob", "draft_index"),
                                   metrics={"train": {"fitness": 0.5}, "valid": {"fitness": 0.5}}),
                          out_dir, overwrite=True)
            spec = str(out_dir / "confidence_cap6.json")
            cg.is_sklearn_available = lambda: False  # the condition the file states for its threshold
        settings = export(spec, out_dir / f"{name.split()[0]}.json")
        use = settings.pop("_provenance")[-1]
        if "prompt_lookup_num_tokens" in settings:
            text = target.generate(ids, do_sample=False, max_new_tokens=new_tokens, **settings)
        else:
            assistant = load()
            assistant.generation_config.update(**settings)
            text = target.generate(ids, do_sample=False, max_new_tokens=new_tokens, assistant_model=assistant)
        found = seen[-1]
        generator = found.pop("object")
        if "assistant_confidence_threshold" in found:
            found["threshold_after"] = generator.assistant_generation_config.assistant_confidence_threshold
        row = {"file": name, "settings": settings, "use": use, **found,
               "same_text_as_plain_greedy": text[0, ids.shape[1]:].tolist() == plain}
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "use"}))
    (out_dir / "transformers_e2e.json").write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], *(int(a) for a in sys.argv[3:]))
