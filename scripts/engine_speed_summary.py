"""Whether drafting pays in each engine (docs/results/engines.md): the champion of a workload and every fixed draft
length (plain decoding included), scored on the valid and test splits under each engine's own cost file
(:func:`evolve.export.engines.priced.priced_policy`, the tables ``python -m evolve export --to llama-cpp-python
--costs`` prints).

    python scripts/engine_speed_summary.py results/engine grounded_llama spec_llama
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


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
