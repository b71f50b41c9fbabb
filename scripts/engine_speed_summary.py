"""Whether drafting pays in each engine (docs/results/engines.md): the champion of a workload and every fixed draft
length (plain decoding included), scored on the valid and test splits under each engine's own cost file
(:func:`evolve.export.engines.priced.priced_policy`, the tables ``python -m evolve export --to llama-cpp-python
--costs`` prints).

    python scripts/engine_speed_summary.py results/engine grounded_llama spec_llama
    python scripts/engine_speed_summary.py --valid-prompts PROMPTS DATASET OUT   # a dataset's valid prompts, a line each

The second form writes the prompts a harvested dataset put in its valid split, one a line (a prompt's line breaks
written as spaces), for ``benchmark.py live --tune-prompts``: the engines' own prompt lookup is tuned there, never on
the test prompts it is measured on.
"""
from __future__ import annotations

import sys
from pathlib import Path

from evolve.export.engines.priced import priced_policy, priced_table
from heuristics.champions import read_champion


def main(out: str, names: list[str]) -> None:
    root = Path(out)
    for name in names:
        rule = read_champion(root / f"{name}.champion.json").rule()
        for engine in ("llama-cpp-python", "transformers"):
            costs = str(root / "costs" / f"{engine}.json")
            priced = priced_policy(rule, str(root / name), costs, None, engine)
            print(f"## {name}, {engine}\n")
            print(priced_table(priced, engine, str(root / name), costs))


def valid_prompts(prompts: str, dataset: str, out: str) -> None:
    """Write the valid-split prompts of ``dataset`` (harvested from ``prompts``) to ``out``, one a line."""
    from evolve.harvest.subset import split_prompts
    from evolve.files.atomic import atomic_write_text
    from evolve.harvest.prompts import read_prompt_file
    from evolve.traces.io import load_metadata

    categories = (load_metadata(dataset).get("config") or {}).get("categories")  # as the dataset was harvested
    texts = read_prompt_file(prompts).select(categories).texts
    chosen = split_prompts(prompts, dataset, "valid", categories)
    atomic_write_text(out, "".join(" ".join(texts[i].prompt.split()) + "\n" for i in chosen))


if __name__ == "__main__":
    if sys.argv[1] == "--valid-prompts":
        valid_prompts(*sys.argv[2:5])
    else:
        main(sys.argv[1], sys.argv[2:])
