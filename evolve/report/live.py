"""``python benchmark.py live``: real speculative decoding with each rule against plain decoding, measured.

    python benchmark.py live --target M (--draft PATH | --draft-skip-layers LIST | --draft-window S,R)
        --prompts FILE (--rule NAME | --champion FILE)... [--gamma 5] [--max-new-tokens 64]
        [--temperature 1] [--top-k K] [--top-p P] [--seed 0] [--format table|json] [--output FILE]

The target, the drafter and the sampling are loaded exactly as ``generate_data.py harvest``
loads them (:func:`evolve.traces.harvest.engine.build`). For every prompt, in turn, the target first
decodes the prompt alone (plain autoregressive decoding, one pass per token), then every rule
decodes it speculatively (:func:`evolve.sim.live.speculative_text`), all from the same random
stream ``numpy.random.default_rng([seed, prompt index])``; interleaving the runs prompt by prompt
spreads any change of machine load over all of them. One warm-up text of at most 8 tokens per
run (not counted) loads the compiled kernels first. Per rule (JSON keys of :data:`KEYS`):

* tokens: tokens emitted over all prompts; target_calls: target passes after the prefills;
  tokens_per_call = tokens / target_calls (in [1, gamma + 1]);
* tokens_per_s: tokens per second of wall time (prefills included, the damage measurement
  excluded); ar_tokens_per_s: the same for plain decoding of the same prompts in the same run;
  speedup = tokens_per_s / ar_tokens_per_s;
* tv_per_token: the exact expected total-variation damage per emitted token, from the whole
  vocabulary at every verified position (:mod:`evolve.sim.live`); 0 for a lossless rule
  (up to float64 rounding, about 1e-16);
* tokens_per_call_se: the standard error of tokens_per_call (target calls taken as independent);
  expected_tokens_per_call: 1 + sum_d prod_{i<=d} tau_i(x_i) averaged over the calls, the
  evaluator's tokens per call on the live blocks (it does not sample the accept/reject draws, so
  it separates rules with fewer calls).

With ``data_dir`` and ``split`` only the prompts a harvested dataset put in that split are decoded
(:func:`split_prompts`; e.g. the held-out test prompts of the dataset a champion was evolved on),
each with its own text index's random stream, as the harvest drew it.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from evolve.errors import InputError
from evolve.traces.harvest.config import HarvestConfig
from evolve.traces.harvest.engine import build, text_rng
from evolve.engine.models import sha256_file
from evolve.traces.harvest.prompts import encode_prompt, read_prompts
from evolve.traces.io import load_metadata
from evolve.report.compare.table import champion_from_file
from evolve.report.output import check_output, resolve_format, write_output
from evolve.sim.live import BLOCK_VERIFICATION, LiveCounts, autoregressive_text, rule_features, speculative_text
from heuristics.registry import get_rule

FORMATS: tuple[str, ...] = ("table", "json")
#: Keys of a row (the JSON output's objects, in this order).
KEYS: tuple[str, ...] = ("rule", "tokens", "target_calls", "tokens_per_call", "tokens_per_s", "ar_tokens_per_s",
                         "speedup", "tv_per_token", "tokens_per_call_se", "expected_tokens_per_call")
#: Tokens of the warm-up text of every run.
WARMUP_TOKENS = 8


@dataclass
class LiveReport:
    """Rows (dicts with :data:`KEYS`) in rule order, the plain-decoding totals and a one-line caption."""

    rows: list[dict]
    autoregressive: LiveCounts
    caption: str


def resolve_rules(rule_names: Sequence[str] = (), champion_files: Sequence[str | os.PathLike] = ()) -> list:
    """The rules of ``--rule`` (registered rules, family members, promoted champions, and
    ``block_verification``: :data:`evolve.sim.live.BLOCK_VERIFICATION`) then ``--champion`` files, in order.

    Raises: InputError for none at all, an unknown name, a bad champion file or a rule that reads a
    feature live decoding does not compute.
    """
    rules = [BLOCK_VERIFICATION if name == BLOCK_VERIFICATION.name else get_rule(name, champions=True)
             for name in rule_names]
    rules += [champion_from_file(path) for path in champion_files]
    if not rules:
        raise InputError("options '--rule', '--champion': give at least one rule to decode with")
    for rule in rules:
        if rule is not BLOCK_VERIFICATION:
            rule_features(rule)
    return rules


def split_prompts(prompts_file: str | os.PathLike, data_dir: str | os.PathLike, split: str) -> list[int]:
    """Indices (0-based, among the non-blank lines of ``prompts_file``) of the prompts that the harvested
    dataset ``data_dir`` put in ``split`` (its ``metadata.json`` ``splits``).

    Raises: InputError (one line) when ``data_dir`` is no harvested dataset, was harvested from another
    prompts file (SHA-256 differs), or has no such split.
    """
    read_prompts(prompts_file)  # a missing or unreadable file: its one-line error first
    meta = load_metadata(data_dir)
    config = meta.get("config") or {}
    if meta.get("generator") != "harvest" or "prompts_sha256" not in config:
        raise InputError(f"option '--data': {data_dir}: not a harvested dataset (its metadata.json names no "
                         f"prompts file)")
    digest = sha256_file(prompts_file)
    if digest != config["prompts_sha256"]:
        raise InputError(f"option '--prompts': {prompts_file} is not the prompts file {data_dir} was harvested "
                         f"from ({config.get('prompts')}; SHA-256 differs)")
    splits = meta.get("splits") or {}
    if split not in splits:
        raise InputError(f"option '--split': {data_dir} has no split '{split}' (it has: {', '.join(splits)})")
    return [int(i) for i in splits[split]]


def run_live(config: HarvestConfig, rules: Sequence, on_text: Callable[[int, int], None] | None = None,
             texts: Sequence[int] | None = None) -> LiveReport:
    """Decode the prompts of ``config.prompts`` plainly and with every rule (module doc); returns the report.

    ``config`` gives the models, drafter, gamma, max_new_tokens, sampling, seed, dtype, device and
    threads (its ``out`` is not used). ``texts``: the prompt indices to decode (default all; see
    :func:`split_prompts`); prompt i decodes from ``numpy.random.default_rng([seed, i])``.
    ``on_text(done, total)`` is called after each prompt.
    Raises: InputError as :func:`evolve.traces.harvest.engine.build`, for a bad prompts file or a text index
    beyond its prompts.
    """
    prompts, lines = read_prompts(config.prompts)
    texts = list(range(len(prompts))) if texts is None else list(texts)
    bad = next((i for i in texts if not 0 <= i < len(prompts)), None)
    if bad is not None or not texts:
        raise InputError(f"option '--prompts': {config.prompts} has {len(prompts)} prompts; no prompt "
                         f"{'to decode' if bad is None else f'with index {bad}'}")
    setup = build(config)
    engine = setup.engine
    encoded = {i: encode_prompt(setup.target.tokenizer, prompts[i], f"option '--prompts': {config.prompts}, line "
                                f"{lines[i]}", engine.vocab) for i in texts}
    warm = min(WARMUP_TOKENS, config.max_new_tokens)
    first = texts[0]
    autoregressive_text(engine, encoded[first], warm, text_rng(config.seed, first))
    for rule in rules:
        speculative_text(engine, rule, encoded[first], config.gamma, warm, text_rng(config.seed, first))
    ar = LiveCounts()
    per_rule = [LiveCounts() for _ in rules]
    for done, i in enumerate(texts, 1):
        ar.add(autoregressive_text(engine, encoded[i], config.max_new_tokens, text_rng(config.seed, i))[1])
        for rule, counts in zip(rules, per_rule):
            counts.add(speculative_text(engine, rule, encoded[i], config.gamma, config.max_new_tokens,
                                        text_rng(config.seed, i))[1])
        if on_text is not None:
            on_text(done, len(texts))
    rows = [{"rule": rule.name, "tokens": c.tokens, "target_calls": c.target_calls,
             "tokens_per_call": c.tokens_per_call, "tokens_per_s": c.tokens_per_s, "ar_tokens_per_s": ar.tokens_per_s,
             "speedup": c.tokens_per_s / ar.tokens_per_s, "tv_per_token": c.tv_per_token,
             "tokens_per_call_se": c.tokens_per_call_se, "expected_tokens_per_call": c.expected_tokens_per_call}
            for rule, c in zip(rules, per_rule)]
    drafter = setup.description["drafter"]
    drafter_text = ", ".join(f"{k} {v}" for k, v in drafter.items() if k != "sha256")
    caption = (f"live decoding: target {Path(config.target).name} ({setup.target.architecture}), "
               f"drafter {drafter_text}; "
               f"gamma {config.gamma}, temperature {config.temperature:g}, top-k {config.top_k}, top-p "
               f"{config.top_p:g}; {len(texts)} prompts, at most {config.max_new_tokens} new tokens each, seed "
               f"{config.seed}; plain decoding: {ar.tokens} tokens, {ar.tokens_per_s:.2f} tokens/s")
    return LiveReport(rows, ar, caption)


def format_table(report: LiveReport) -> str:
    """Plain-text table of the rows, the caption above it."""
    header = ["Rule", "Tokens", "Calls", "Tokens/call", "E[tokens/call]", "Tokens/s", "AR tokens/s", "Speedup",
              "TV/token"]
    body = [[r["rule"], f"{r['tokens']}", f"{r['target_calls']}",
             f"{r['tokens_per_call']:.3f} ± {r['tokens_per_call_se']:.3f}", f"{r['expected_tokens_per_call']:.3f}",
             f"{r['tokens_per_s']:.2f}", f"{r['ar_tokens_per_s']:.2f}", f"{r['speedup']:.2f}x",
             f"{r['tv_per_token']:.2e}"] for r in report.rows]
    widths = [max(len(h), *(len(row[i]) for row in body)) for i, h in enumerate(header)]
    lines = [report.caption, "", "  ".join(h.ljust(w) if i == 0 else h.rjust(w)
                                           for i, (h, w) in enumerate(zip(header, widths)))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
              for row in body]
    lines += ["", "AR = plain autoregressive decoding of the target; Speedup = Tokens/s / AR tokens/s (wall clock); "
                  "TV/token = exact expected damage per emitted token (0 = lossless); Tokens/call ± its standard "
                  "error; E[tokens/call] = 1 + sum_d prod_(i<=d) tau_i per call, given the drafts."]
    return "\n".join(lines) + "\n"


def format_json(report: LiveReport) -> str:
    """JSON array of the rows (keys :data:`KEYS`; NaN written as null)."""
    rows = [{k: (None if isinstance(r[k], float) and not math.isfinite(r[k]) else r[k]) for k in KEYS}
            for r in report.rows]
    return json.dumps(rows, indent=2) + "\n"


def live_command(config: HarvestConfig, rule_names: Sequence[str], champion_files: Sequence[str | os.PathLike],
                 fmt: str | None, output: str | os.PathLike | None,
                 on_text: Callable[[int, int], None] | None = None, data_dir: str | os.PathLike | None = None,
                 split: str = "test") -> tuple[LiveReport, str]:
    """Check the options, run :func:`run_live` (on the ``split`` prompts of ``data_dir`` when given,
    :func:`split_prompts`), render the report and write it to ``output`` when given.

    Returns (report, text). Raises InputError for bad options, files or rules.
    """
    fmt = resolve_format(fmt, output, FORMATS)
    check_output(output, None, inputs=(config.prompts, config.target, config.draft, *champion_files))
    config.check()
    rules = resolve_rules(rule_names, champion_files)
    texts = None if data_dir is None else split_prompts(config.prompts, data_dir, split)
    report = run_live(config, rules, on_text, texts)
    text = format_json(report) if fmt == "json" else format_table(report)
    if output is not None:
        write_output(text, output)
    return report, text


__all__ = ["FORMATS", "KEYS", "LiveReport", "format_json", "format_table", "live_command", "resolve_rules",
           "run_live", "split_prompts"]
