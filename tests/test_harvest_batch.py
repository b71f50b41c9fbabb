"""Batched harvesting (``--batch-size``) and top-k/top-p sampling of the harvester (data/harvest).

The tiny random Llama models of the harvest tests (tests/harvest_helpers.py) are used; nothing is downloaded.
"""
from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("scipy.stats")

from evolve.harvest import loop as hv  # noqa: E402
from evolve.traces.io import SPLITS, load_dataset  # noqa: E402

from harvest_helpers import WORDS, chi2_pvalue, first_tokens, run_harvest, tiny_llama  # noqa: E402

#: Tiny models run fastest (and identically) on one thread (the fixture is in conftest.py).
pytestmark = pytest.mark.usefixtures("one_thread")

GAMMA = 4
MAX_NEW = 24


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Prompts of 1 to 9 words (so rows of a batch have different lengths and need padding)."""
    root = tmp_path_factory.mktemp("harvest_batch")
    rng = np.random.default_rng(8)
    prompts = root / "prompts.txt"
    prompts.write_text("\n".join(" ".join(rng.choice(WORDS, size=n)) for n in (1, 9, 3, 6, 2, 8, 1, 5, 4, 7, 2))
                       + "\n")
    return {"root": root, "prompts": str(prompts), "target": str(tiny_llama(root / "target", 0, 4)),
            "draft": str(tiny_llama(root / "draft", 1, 2))}


def _config(files, out, **kw) -> hv.HarvestConfig:
    base = dict(target=files["target"], prompts=files["prompts"], gamma=GAMMA, max_new_tokens=MAX_NEW,
                temperature=1.0, seed=5, out=str(out))
    base.update(kw)
    return hv.HarvestConfig(**base)


def _frames(out) -> pd.DataFrame:
    return pd.concat([pd.read_parquet(out / f"{s}.parquet") for s in SPLITS], ignore_index=True)


def _texts(out) -> list[dict]:
    return [json.loads(line) for line in open(out / "texts.jsonl")]


def _assert_same_records(a: pd.DataFrame, b: pd.DataFrame) -> None:
    """Integer and bool columns equal; float columns (and array-valued ones) equal up to float32
    round-off: rtol 1e-4 (the tiny models' large random weights amplify round-off; typical
    differences are 1e-7) and atol 1e-7, or 1e-5 for the block-verification columns (sums of
    differences of products of probability ratios)."""
    assert list(a.columns) == list(b.columns) and len(a) == len(b)
    for col in a.columns:
        x, y = a[col].to_numpy(), b[col].to_numpy()
        if x.dtype == object:
            x, y = np.stack(x).astype(np.float64), np.stack(y).astype(np.float64)
        if x.dtype.kind == "f":
            np.testing.assert_allclose(x, y, rtol=1e-4, atol=1e-5 if col.startswith("block_") else 1e-7,
                                       err_msg=col)
        else:
            assert (x == y).all(), col


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["model", "skip_layers", "window"])
def test_batch_sizes_give_the_same_records(files, kind):
    """A text's records do not depend on the batch it is decoded in: batch sizes 1, 4 and 11 (all
    texts at once) give the same texts and the same records up to float round-off."""
    kw = {"model": {"draft": files["draft"]}, "skip_layers": {"skip_layers": (1, 2)},
          "window": {"window": (1, 3)}}[kind]
    outs = {}
    for b in (1, 4, 11):
        outs[b] = files["root"] / f"{kind}-b{b}"
        res = hv.harvest(_config(files, outs[b], batch_size=b, **kw), progress=False)
        assert res.texts_done == 11 and res.consolidated
        load_dataset(outs[b])  # validates
    ref = _frames(outs[1])
    assert len(ref) > 150
    for b in (4, 11):
        assert [t["completion"] for t in _texts(outs[b])] == [t["completion"] for t in _texts(outs[1])]
        _assert_same_records(_frames(outs[b]), ref)


@pytest.mark.slow
def test_resume_with_another_batch_size(files, monkeypatch):
    """Ctrl-C in a batch-4 harvest keeps the finished texts; resuming with batch 3 completes the
    same dataset as an uninterrupted batch-1 harvest (up to round-off)."""
    ref_out = files["root"] / "ref-resume"
    hv.harvest(_config(files, ref_out, window=(1, 3)), progress=False)
    out = files["root"] / "resumed"
    done = []

    def stop_after_three(t):
        done.append(t)
        if len(done) == 3:
            raise KeyboardInterrupt

    first = hv.harvest(_config(files, out, window=(1, 3), batch_size=4), progress=False,
                       on_text_done=stop_after_three)
    assert first.interrupted and first.texts_done == 3
    second = hv.harvest(_config(files, out, window=(1, 3), batch_size=3), progress=False)
    assert not second.interrupted and second.texts_done == 11
    _assert_same_records(_frames(out), _frames(ref_out))
    assert _texts(out) == _texts(ref_out)


def test_rows_join_and_leave_a_batch(files):
    """Continuous batching: with max_new_tokens of 2..9 per text in one batch of 3, every text gets
    exactly its own generation and records, as when decoded alone."""
    setup = hv.build(_config(files, files["root"] / "unused", draft=files["draft"]))
    prompts = [[4, 5], [7], [3, 9, 12, 8, 6, 5, 4], [10, 11, 12], [5]]
    alone = [setup.engine.generate(p, GAMMA, 9, np.random.default_rng([1, i])) for i, p in enumerate(prompts)]
    together = dict(setup.engine.run_texts([(i, p, np.random.default_rng([1, i])) for i, p in enumerate(prompts)],
                                           GAMMA, 9, batch_size=3))
    assert sorted(together) == list(range(5))
    for i, a in enumerate(alone):
        b = together[i]
        assert b.tokens == a.tokens and b.finish == a.finish and b.target_calls == a.target_calls
        _assert_same_records(b.frame(i), a.frame(i))


# ----------------------------------------------------------------------------- top-k / top-p


def _hf_truncated(logits, temperature, top_k, top_p):
    """The distribution transformers' own logits processors sample from (temperature, top-k, top-p)."""
    from transformers.generation.logits_process import (
        LogitsProcessorList, TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper)

    procs = LogitsProcessorList([TemperatureLogitsWarper(temperature)]
                                + ([TopKLogitsWarper(top_k)] if top_k else [])
                                + ([TopPLogitsWarper(top_p)] if top_p < 1 else []))
    x = procs(None, logits.clone().to(torch.float64))
    return torch.softmax(x, dim=-1).numpy()


def test_top_k_top_p_match_transformers_logits_processors():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(50, 40, generator=g, dtype=torch.float64) * 2.5
    for t, k, p in ((1.0, 5, 1.0), (0.7, 0, 0.9), (1.3, 10, 0.8), (1.0, 1, 1.0), (1.0, 0, 0.05), (0.5, 40, 0.99)):
        ours, ent = hv.distributions(logits, t, k, p)
        np.testing.assert_allclose(ours, _hf_truncated(logits, t, k, p), rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(ours.sum(axis=1), 1.0, rtol=1e-12)
        safe = np.where(ours > 0, ours, 1.0)
        np.testing.assert_allclose(ent, -(ours * np.log(safe)).sum(axis=1), rtol=1e-10, atol=1e-12)
        if k:
            assert ((ours > 0).sum(axis=1) <= k).all()
    # hand-computed: of probabilities 0.5, 0.3, 0.15, 0.05, top-p 0.75 keeps 0.5 and 0.3 (0.3 crosses 0.75)
    x = torch.log(torch.tensor([[0.05, 0.5, 0.15, 0.3]], dtype=torch.float64))
    np.testing.assert_allclose(hv.distributions(x, 1.0, 0, 0.75)[0], [[0, 0.625, 0, 0.375]], rtol=1e-12)
    np.testing.assert_allclose(hv.distributions(x, 1.0, 3, 1.0)[0], [[0, 0.5 / 0.95, 0.15 / 0.95, 0.3 / 0.95]],
                               rtol=1e-12)
    # ties at the top-k boundary are all kept, as transformers does
    tie = torch.tensor([[2.0, 1.0, 1.0, 0.0]], dtype=torch.float64)
    assert (hv.distributions(tie, 1.0, 2, 1.0)[0] > 0).sum() == 3


@pytest.mark.slow
def test_top_k_top_p_harvest_is_lossless_and_truncated(files, tmp_path):
    """With top-k/top-p the drafts come from the truncated q, the records describe the truncated
    distributions, and the emitted token follows the truncated p (chi-square), so the options
    act on both models as an engine's sampler does."""
    out = tmp_path / "tk"
    hv.harvest(_config(files, out, draft=files["draft"], top_k=6, top_p=0.9, batch_size=4), progress=False)
    df = _frames(out)
    assert (df["draft_prob"] > 0).all() and (df["target_prob"] == 0).any()  # drafts outside the target's top-k/p
    assert df.loc[df["target_prob"] == 0, "baseline_accepts"].eq(False).all()
    setup = hv.build(_config(files, tmp_path / "unused", draft=files["draft"], gamma=1, top_k=6, top_p=0.9))
    engine = setup.engine
    prompt = [7, 12, 3]
    with torch.inference_mode():
        logits = setup.target.model(input_ids=torch.tensor([prompt])).logits[0, -1:, :engine.vocab]
    p = engine.distributions(logits)[0][0]
    assert 1 < (p > 0).sum() <= 6
    counts = first_tokens(engine, prompt, 500, seed=3)
    assert counts[p == 0].sum() == 0 and chi2_pvalue(counts, p) > 1e-3


def test_bad_sampling_and_batch_options(files, tmp_path):
    base = ["--target", files["target"], "--draft-window", "1,2", "--prompts", files["prompts"],
            "--out", str(tmp_path / "o"), "--no-progress"]
    for args, needle in ((["--top-k", "-1"], "--top-k"), (["--top-p", "0"], "--top-p"),
                         (["--top-p", "1.5"], "--top-p"), (["--batch-size", "0"], "--batch-size")):
        code, output = run_harvest(base + args)
        lines = output.strip().splitlines()
        assert code == 2 and len(lines) == 1 and needle in lines[0], (args, output)


@pytest.mark.slow
def test_perf_harvest_measures_batches_and_generate(files, tmp_path):
    """``benchmark.py perf --harvest MODEL`` merges harvest and generate() tokens/s, the forward-pass
    share and the targets into the perf JSON (on the tiny target: 4 layers, layers 1 and 2 skipped)."""
    from click.testing import CliRunner

    from evolve.cli.perf import perf

    out = tmp_path / "perf.json"
    out.write_text(json.dumps({"earlier": 1}))
    result = CliRunner().invoke(perf, ["--harvest", files["target"], "--harvest-prompts", files["prompts"],
                                       "--harvest-texts", "4", "--harvest-tokens", "8", "--threads", "1",
                                       "--output", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    h = report["harvest"]
    assert report["earlier"] == 1 and h["drafter"]["skip_layers"] == [1, 2] and h["texts"] == 4
    for key in ("harvest_tokens_per_s", "generate_tokens_per_s", "harvest_forward_share"):
        assert set(h[key]) == {"1", "8"} and all(v > 0 for v in h[key].values())
    assert all(0 < v <= 1 for v in h["harvest_forward_share"].values())
    assert h["harvest_tokens"]["1"] == h["harvest_tokens"]["8"]  # the same texts at both batch sizes
    assert set(h["targets_met"]) == {"batch_speedup_3x", "forward_share_50pct"} and "harvest tok/s" in result.output
