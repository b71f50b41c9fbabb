"""Whether drafting pays in each engine (docs/results/engines.md): the champion of a workload and every fixed draft
length (plain decoding included), scored on the valid and test splits under each engine's own cost file
(:func:`evolve.export.engines.priced.priced_policy`, the tables ``python -m evolve export --to llama-cpp-python
--costs`` prints).

    python scripts/engine_speed_summary.py results/engine grounded_llama spec_llama
    python scripts/engine_speed_summary.py --valid-prompts PROMPTS DATASET OUT   # a dataset's valid prompts

The second form writes the prompts a harvested dataset put in its valid split (a plain file's one a line, a prompt's
line breaks written as spaces; a JSON Lines file's valid questions as their lines), for ``benchmark.py live
--tune-prompts``: the engines' own prompt lookup is tuned there, never on the test prompts it is measured on.
"""
from __future__ import annotations

import sys
from pathlib import Path

from evolve.export.engines.priced import priced_policy, priced_table
from heuristics.champions import read_champion


def main(out: str, names: list[str]) -> None:
    from evolve.engine.drafter_base import EngineFamily
    from evolve.export.engines.deploy import harvest_drafter
    from evolve.export.engines.registry import ENGINES

    root = Path(out)
    for name in names:
        champion = root / f"{name}.champion.json"
        rule = read_champion(champion).rule()
        suffix = harvest_drafter(str(champion), root / name).family is EngineFamily.SUFFIX
        for engine in ("llama-cpp-python", "transformers"):
            # llama-cpp-python's module runs suffix decoding; a configuration engine only where its capabilities say
            if suffix and engine in ENGINES and ENGINES[engine].capabilities.suffix is None:
                print(f"## {name}, {engine}\n\n{engine} ships no suffix decoding: not priced\n")
                continue
            costs = str(root / "costs" / f"{engine}.json")
            priced = priced_policy(rule, str(root / name), costs, None, engine)
            print(f"## {name}, {engine}\n")
            print(priced_table(priced, engine, str(root / name), costs))


def valid_prompts(prompts: str, dataset: str, out: str) -> None:
    """Write the valid-split prompts of ``dataset`` (harvested from ``prompts``) to ``out``: a plain file's one a line
    (a prompt's line breaks written as spaces); a JSON Lines file's valid questions as their own lines, unchanged
    (``--tune-prompts`` reads their first turns, line breaks kept)."""
    from evolve.harvest.subset import split_prompts
    from evolve.files.atomic import atomic_write_text
    from evolve.harvest.prompts import is_jsonl, read_prompt_file
    from evolve.traces.io import load_metadata

    if is_jsonl(prompts) != is_jsonl(out):  # --tune-prompts reads a file by its name's ending
        sys.exit(f"{out}: name it {'.jsonl' if is_jsonl(prompts) else 'with another ending than .jsonl'}, as "
                 f"{prompts} is (benchmark.py live --tune-prompts reads a file by its name's ending)")
    categories = (load_metadata(dataset).get("config") or {}).get("categories")  # as the dataset was harvested
    texts = read_prompt_file(prompts).select(categories).texts
    chosen = split_prompts(prompts, dataset, "valid", categories)
    if is_jsonl(prompts):
        lines = Path(prompts).read_text(encoding="utf-8").split("\n")
        atomic_write_text(out, "".join(lines[n - 1] + "\n" for n in sorted({texts[i].line for i in chosen})))
    else:
        atomic_write_text(out, "".join(" ".join(texts[i].prompt.split()) + "\n" for i in chosen))


if __name__ == "__main__":
    if sys.argv[1] == "--valid-prompts":
        valid_prompts(*sys.argv[2:5])
    else:
        main(sys.argv[1], sys.argv[2:])
