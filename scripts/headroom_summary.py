"""Tables of scripts/headroom_smollm2.sh from its output files (run by that script).

    python scripts/headroom_summary.py --tuned OUT/NAME.bench.json
        the best fixed length tuned on valid as a rule name (fixed_gamma:gamma=G)
    python scripts/headroom_summary.py --logistic OUT/NAME.bench.json OUT/NAME.logistic.json
        the learned_logistic row's formula written as a champion file (so live decoding runs it)
    python scripts/headroom_summary.py --suffix OUT/NAME.bench.json ROW GAMMA OUT/NAME.ROW.json
        suffix decoding's own rule at the knobs of the row ROW (suffix_vllm_default or suffix_tuned), at most GAMMA
        drafts, written as a champion file (a policy on the suffix columns, the tree depth's room aside: live
        decoding runs it)
    python scripts/headroom_summary.py --vllm-default GAMMA OUT.json
        the same at vLLM 0.33.0's default knobs (no benchmark output needed)
    python scripts/headroom_summary.py --out OUT NAME...
        a markdown summary per workload: the predicted tokens per second on the held-out test split of every policy
        row and the bound, the champion's share of the headroom with its interval, its standing against each
        competitor, the cross-validated guard's verdict, and the live figures (speedups and the live shares)
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROWS = ("suffix_vllm_default", "suffix_tuned", "best_fixed_gamma", "confidence_threshold", "survival_prefix",
        "llama_cpp_p_min", "sglang_adaptive", "dynamic_sd_goodput", "acceptance_band", "learned_logistic",
        "learned_gbm", "length_oracle")


def bench(path: Path) -> dict:
    return json.loads(path.read_text())


def rows_of(doc: dict) -> dict[str, dict]:
    return {r["heuristic"]: r for r in doc["rows"]}


def tuned(path: Path) -> str:
    g = re.match(r"gamma=(\d+)", rows_of(bench(path))["best_fixed_gamma"]["expression"]).group(1)
    return f"fixed_gamma:gamma={g}"


def write_policy(name: str, expression: str, description: str, out: Path) -> None:
    """A verification-length policy written as the champion file ``out`` (so live decoding runs it)."""
    from heuristics.champions import Champion, save_champion
    from heuristics.length_policies import KIND_NAME

    champ = Champion(name=name, expression=expression, kind=KIND_NAME, features=[], description=description,
                     objective="tokens_per_second", metrics={"train": {}, "valid": {}})
    saved, code = save_champion(champ, out.parent, overwrite=True)
    saved.rename(out)
    code.unlink()


def logistic(path: Path, out: Path) -> None:
    setting = rows_of(bench(path))["learned_logistic"]["expression"]
    expression = setting.split(": ", 1)[1].rsplit(" (tuned on", 1)[0]
    write_policy("learned_logistic", expression,
                 "the logistic stopping rule of benchmark.py, trained on train, h tuned on valid", out)


def suffix(path: Path, row: str, gamma: str, out: Path) -> None:
    from heuristics.length_policies import suffix_rule

    setting = rows_of(bench(path))[row]["expression"]
    knobs = dict(re.findall(r"(\w+)=([0-9.]+)", setting))
    rule = suffix_rule(float(knobs["suffix_decoding_max_spec_factor"]), float(knobs["max_spec_offset"]),
                       float(knobs["suffix_decoding_min_token_prob"]), int(gamma))
    write_policy(f"{row}_as_policy", rule.expression,
                 f"suffix decoding's own rule at the knobs of benchmark.py's {row} row: {setting}", out)


def vllm_default(gamma: str, out: Path) -> None:
    from heuristics.length_policies import SUFFIX_VLLM_DEFAULT, suffix_rule

    rule = suffix_rule(*SUFFIX_VLLM_DEFAULT[1:], int(gamma))  # (depth, factor, offset, min_token_prob)
    write_policy("suffix_vllm_default_as_policy", rule.expression,
                 f"suffix decoding's own rule at vLLM 0.33.0's default knobs, at most {gamma} drafts", out)


def fmt(x, spec=".3f") -> str:
    return "n/a" if x is None else format(x, spec)


def summary(out: Path, names: list[str]) -> str:
    lines = []
    for name in names:
        doc = bench(out / f"{name}.bench.json")
        rows = rows_of(doc)
        heads = {rec["champion"] for rec in doc.get("headroom") or ()}  # the champions the headroom is measured for
        champion = next((r for r in doc["rows"] if r["role"] == "champion" and r["heuristic"] in heads), None)
        lines += [f"### {name}", "", "Predicted on the held-out test split (tokens per second under the cost file, "
                  "speedup over plain decoding):", "", "| row | setting | tok/s | speedup |", "|---|---|---:|---:|"]
        for r in ([champion] if champion else []) + [rows[n] for n in ROWS if n in rows]:
            setting = (r["expression"] or "")[:80].replace("|", "\\|")
            lines.append(f"| {r['heuristic']} | `{setting}` | {fmt(r['tokens_per_second'], '.2f')} | "
                         f"{fmt(r['speedup'])}x |")
        for rec in doc.get("headroom") or ():
            h = rec["headroom"]
            lines += ["", f"Headroom share of {rec['champion']}: {fmt(h['share'], '.2f')} [{fmt(h['low'], '.2f')}, "
                          f"{fmt(h['high'], '.2f')}] over {h['texts']} texts"
                          + (f" ({h['caveat']})" if h.get("caveat") else "") + ". Champion over each competitor:", "",
                      "| competitor | ratio [95%] |", "|---|---:|"]
            lines += [f"| {x['name']} | {fmt(x['ratio'])} [{fmt(x['low'])}, {fmt(x['high'])}] |"
                      for x in rec["rivals"]]
        run = out / f"{name}.run.json"
        if run.is_file():
            guard = json.loads(run.read_text()).get("champion_guard") or {}
            lines += ["", f"Champion guard: {guard.get('reason', 'not run')}"]
        live = out / f"{name}.live.json"
        if live.is_file():
            lines += ["", "Live on the test prompts (speedup over plain decoding: median of repeats [95% interval over "
                          "texts]; predicted by the cost file for the same calls):", "",
                      "| rule | tok/s | speedup [95%] | predicted speedup | live headroom share (priced, measured) |",
                      "|---|---:|---:|---:|---:|"]
            for r in json.loads(live.read_text()):
                share = (f"{fmt(r.get('headroom_priced'), '.2f')}, {fmt(r.get('headroom_measured'), '.2f')}"
                         if "headroom_priced" in r else "")
                lines.append(f"| {r['rule']} | {fmt(r['tokens_per_s'], '.2f')} | {fmt(r['speedup'])}x "
                             f"[{fmt(r.get('speedup_low'))}, {fmt(r.get('speedup_high'))}] | "
                             f"{fmt(r.get('predicted_speedup'))}x | {share} |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tuned", type=Path)
    ap.add_argument("--logistic", nargs=2, type=Path)
    ap.add_argument("--suffix", nargs=4)
    ap.add_argument("--vllm-default", nargs=2)
    ap.add_argument("--out", type=Path)
    ap.add_argument("names", nargs="*")
    a = ap.parse_args(argv)
    if a.tuned:
        print(tuned(a.tuned))
    elif a.logistic:
        logistic(*a.logistic)
    elif a.suffix:
        suffix(Path(a.suffix[0]), a.suffix[1], a.suffix[2], Path(a.suffix[3]))
    elif a.vllm_default:
        vllm_default(a.vllm_default[0], Path(a.vllm_default[1]))
    else:
        print(summary(a.out, a.names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
