"""Tables of scripts/verify_length_smollm2.sh from its output files (run by that script).

    python scripts/verify_length_summary.py --tuned OUT/NAME.bench.json
        the competitors' settings tuned on valid as rule names, one per line:
        fixed_gamma:gamma=G and confidence_threshold:h=H
    python scripts/verify_length_summary.py --out OUT NAME[=DATA,COSTS]...
        a markdown summary: per dataset, the predicted tokens per second and speedup on the test split
        (from the records, OUT/NAME.bench.json) and live decoding measured beside predicted (OUT/NAME.live.json);
        with DATA (the dataset directory) and COSTS (its cost file), also every live policy's speedup predicted
        from the test records under both block weightings (call, position) beside the live one
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

POLICIES = ("champion", "best_fixed_gamma", "confidence_threshold", "survival_prefix", "length_oracle")


def bench_rows(path: Path) -> dict[str, dict]:
    data = json.loads(path.read_text())
    rows = data["rows"] if isinstance(data, dict) else data
    return {r["heuristic"]: r for r in rows}


def tuned(path: Path) -> list[str]:
    rows = bench_rows(path)
    g = re.match(r"gamma=(\d+)", rows["best_fixed_gamma"]["expression"]).group(1)
    h = re.match(r"h=([0-9.]+)", rows["confidence_threshold"]["expression"]).group(1)
    return [f"fixed_gamma:gamma={g}", f"confidence_threshold:h={h}"]


def summary(out: Path, names: list[str]) -> str:
    lines = ["Predicted on the held-out test split, from the records (tokens/s and speedup over plain decoding "
             "under the drafter's cost file; competitors tuned on valid; length_oracle is a bound, not a policy: the best "
             "lengths knowing each block's outcome):", "",
             "| dataset | " + " | ".join(POLICIES) + " |", "|---" * (len(POLICIES) + 1) + "|"]
    specs = [n.split("=", 1) for n in names if "=" in n]
    names = [n.split("=", 1)[0] for n in names]
    for name in names:
        rows = bench_rows(out / f"{name}.bench.json")
        cells = []
        for p in POLICIES:
            r = rows.get(p)
            if r is None:  # a table written before the row existed
                cells.append("")
                continue
            setting = "" if p == "length_oracle" else (r["expression"] or "").replace(" (tuned on valid)", "")
            cells.append(f"{r['tokens_per_second']:.2f} tok/s ({r['speedup']:.3f}x)" + (f" `{setting}`" if setting else ""))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", "Live on the test prompts (decoding wall clock, prefill excluded; speedup over plain decoding measured "
                  "in the same run, interleaved prompt by prompt; predicted tok/s = tokens over the cost file's seconds "
                  "for the same calls, predicted speedup = that times its plain_token_s; plain decoding's predicted "
                  "tok/s = 1 / plain_token_s):", "",
              "| dataset | rule | drafted/call | mean acc. len (tokens/call) | measured tok/s | predicted tok/s | measured/predicted "
              "tok/s | speedup | predicted speedup | measured/predicted speedup |",
              "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name in names:
        live = out / f"{name}.live.json"
        if not live.exists():
            continue
        rows = json.loads(live.read_text())
        plain = rows[0]["ar_tokens_per_s"]
        plain_predicted = rows[0]["predicted_tokens_per_s"] / rows[0]["predicted_speedup"]
        lines.append(f"| {name} | plain decoding | 0 | 1 | {plain:.2f} | {plain_predicted:.2f} | "
                     f"{plain / plain_predicted:.3f} | 1.00x | | |")
        for r in rows:
            ratio = r["speedup"] / r["predicted_speedup"]
            lines.append(f"| {name} | {r['rule']} | {r['mean_drafted']:.2f} | {r['tokens_per_call']:.3f} | "
                         f"{r['tokens_per_s']:.2f} | {r['predicted_tokens_per_s']:.2f} | "
                         f"{r['tokens_per_s'] / r['predicted_tokens_per_s']:.3f} | {r['speedup']:.3f}x | "
                         f"{r['predicted_speedup']:.3f}x | {ratio:.3f} |")
    if specs:
        lines += ["", "Speedup of the live policies predicted from the test records under each block weighting "
                      "(call: each harvested block one call of the policy; position: each block the text positions "
                      "its harvest call covered) against the speedup measured live and predicted for the live "
                      "calls:", "",
                  "| dataset | rule | call weighting | position weighting | live, predicted for its calls | "
                  "live, measured |", "|---|---|---:|---:|---:|---:|"]
        for name, where in specs:
            data_dir, costs_file = where.split(",")
            for rule, call, position, live in estimator_rows(out, name, data_dir, costs_file):
                lines.append(f"| {name} | {rule} | {call:.3f}x | {position:.3f}x | {live['predicted_speedup']:.3f}x | "
                             f"{live['speedup']:.3f}x |")
    return "\n".join(lines) + "\n"


def estimator_rows(out: Path, name: str, data_dir: str, costs_file: str):
    """(rule, call-weighted speedup, position-weighted speedup, live row) of every verification-length policy of
    OUT/NAME.live.json (standard rejection and block verification are skipped), on the test split of ``data_dir``."""
    from evolve.eval.costs import load_costs
    from evolve.eval.evaluator import EvalData
    from evolve.kinds.verify_length.eval_policy import LengthPopulationEvaluator
    from evolve.traces.io import load_split
    from heuristics.champions import load_champion
    from heuristics.registry import get_rule

    costs = load_costs(costs_file)
    data = EvalData.from_traces(load_split(data_dir, "test"))
    gamma = int(data.depth.max()) + 1
    for live in json.loads((out / f"{name}.live.json").read_text()):
        label = live["rule"]
        if label == "champion":
            program = load_champion(out / f"{name}.champion.json").program
        elif ":" in label:
            program = get_rule(label).program
        else:
            continue
        call, position = (LengthPopulationEvaluator(data, gamma=gamma, costs=costs, weighting=w).evaluate([program])[0]
                          .speedup for w in ("call", "position"))  # a policy reading the history walks each text
        yield label, call, position, live


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tuned", type=Path)
    parser.add_argument("--out", type=Path)
    parser.add_argument("names", nargs="*")
    args = parser.parse_args(argv)
    if args.tuned is not None:
        print("\n".join(tuned(args.tuned)))
    else:
        sys.stdout.write(summary(args.out, args.names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
