"""The SGLang conformance lane: every flag line the exporter writes for SGLang is parsed by the argument parser SGLang
0.5.23 builds from its own ``ServerArgs`` field definitions (``ServerArgs.add_cli_args``, the released wheel installed
by the ``engines`` extra without its GPU dependencies), and means what it was scored as: the draft steps, top-k and
draft tokens of a chain or a top-k tree (draft tokens = steps + 1 with top-k 1, as SGLang's speculative hook sets
them), the two accept thresholds, block verification, and the algorithm of the harvest's drafter."""
from __future__ import annotations

import argparse
import shlex

import pytest

from engine_helpers import DRAFTERS, block, cases, drafted, losing_cases, require
from evolve.export.engines import sglang as exporter


@pytest.fixture(scope="module")
def parser():
    server_args = require("sglang.srt.server_args")
    from importlib.metadata import version
    assert version("sglang") == exporter.VERSION
    parser = argparse.ArgumentParser()
    server_args.ServerArgs.add_cli_args(parser)
    return parser


def flag_line(text: str) -> list[str]:
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert len(lines) <= 1, text
    return shlex.split(lines[0]) if lines else []


def test_every_flag_line_is_read_as_scored(parser, vocab_dataset, tmp_path):
    written = list(cases(exporter.ENGINE)) + list(losing_cases(exporter.ENGINE, vocab_dataset, tmp_path))
    assert len(written) > 80
    for case in written:
        if case.refusal:
            assert "\n" not in case.refusal and ("nearest" in case.refusal), case.label
            continue
        words = flag_line(case.text)
        use = next(line for line in case.text.splitlines() if "use:" in line)
        if not words:
            assert "plain decoding" in use and drafted(case.setting) in (0, None), case.label
            continue
        if "--speculative-algorithm" not in words:  # the user adds the drafter: any of the EAGLE family
            assert "--speculative-algorithm ALGO" in use, case.label
            words += ["--speculative-algorithm", "EAGLE"]
        args = parser.parse_args(["--model-path", "m", *words])
        setting, drafter = case.setting, DRAFTERS[case.drafter]
        steps = drafted(setting)
        if steps:
            if args.speculative_eagle_topk == 1:
                assert args.speculative_num_steps == steps, case.label
            else:  # a top-k tree: k children of the top k nodes of each level
                k, d = args.speculative_eagle_topk, args.speculative_num_steps
                assert k + (d - 1) * k * k == steps, case.label
            assert args.speculative_num_draft_tokens == steps + 1, case.label
        assert args.speculative_use_block_verification == block(setting), case.label
        if setting.rule.kind == "threshold":
            single, acc = args.speculative_accept_threshold_single, args.speculative_accept_threshold_acc
            assert setting.rule.name == "standard_rejection" and (single, acc) == (1.0, 1.0) or \
                setting.rule.name == f"sglang_{single:g}_{acc:g}", case.label
        if steps and drafter.lookup:
            assert args.speculative_algorithm == "NGRAM"
            assert args.speculative_ngram_max_bfs_breadth == args.speculative_eagle_topk  # NGRAM: its top-k
        elif steps and drafter.kind in ("model", "eagle"):
            assert args.speculative_algorithm == {"model": "STANDALONE", "eagle": "EAGLE3"}[drafter.kind]


def test_block_verification_only_with_the_eagle_family():
    """SGLang runs block verification for EAGLE/EAGLE3 drafters only (its speculative hook raises otherwise): a
    block-verified champion harvested by prompt lookup or a draft model is refused in one line."""
    refused = [c for c in cases(exporter.ENGINE) if c.refusal and "block verification only" in c.refusal]
    assert {c.drafter for c in refused} == {"ngram", "model"}
    hook = require("sglang.srt.arg_groups.speculative_hook")
    import inspect
    assert '("EAGLE", "EAGLE3", "DFLASH", "DSPARK")' in inspect.getsource(hook.handle_speculative_decoding)
