"""Tables of scripts/verify_length_smollm2.sh from its output files (run by that script).

    python scripts/verify_length_summary.py --tuned OUT/NAME.bench.json
        the competitors' settings tuned on valid as rule names, one per line:
        fixed_gamma:gamma=G and confidence_threshold:h=H
    python scripts/verify_length_summary.py --out OUT NAME...
        a markdown summary: per dataset, the predicted tokens per second and speedup on the test split
        (from the records, OUT/NAME.bench.json) and live decoding measured beside predicted (OUT/NAME.live.json)
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

POLICIES = ("champion", "best_fixed_gamma", "confidence_threshold", "survival_prefix")


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
             "under the drafter's cost file; competitors tuned on valid):", "",
             "| dataset | " + " | ".join(POLICIES) + " |", "|---" * (len(POLICIES) + 1) + "|"]
    for name in names:
        rows = bench_rows(out / f"{name}.bench.json")
        cells = []
        for p in POLICIES:
            r = rows[p]
            setting = (r["expression"] or "").replace(" (tuned on valid)", "")
            cells.append(f"{r['tokens_per_second']:.2f} tok/s ({r['speedup']:.3f}x)" + (f" `{setting}`" if setting else ""))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", "Live on the test prompts (decoding wall clock, prefill excluded; speedup over plain decoding measured "
                  "in the same run, interleaved prompt by prompt; predicted tok/s = tokens over the cost file's seconds "
                  "for the same calls, predicted speedup = that times its plain_token_s; plain decoding's predicted "
                  "tok/s = 1 / plain_token_s):", "",
              "| dataset | rule | drafted/call | tokens/call | measured tok/s | predicted tok/s | measured/predicted "
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
    return "\n".join(lines) + "\n"


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
