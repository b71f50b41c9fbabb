"""The independent-features model (generator ``independent``): the showcase benchmark's trace data.

Each feature of a record is drawn on its own, so the records are not consistent
with any pair of real draft/target distributions; the records are labelled by
the standard rule (``baseline_accepts = rand_value < min(1, target_prob /
draft_prob)``), so every rule can be scored against it on the same tokens. It
is the data model of the showcase benchmark. Per sequence of length
avg/2 + U[0, avg) and per token at index ``position``:

* top_token_match ~ Bernoulli(0.72)
* draft_prob = 0.05 + 0.9 * Beta(a, 1.5), a = 3 if position < 5 else 2
* match:    target_prob = clamp(0.85*draft_prob + 0.15*U + (0.3*U - 0.15), 0.01, 0.99)
* no match: target_prob = clamp(draft_prob*(1 - (0.3 + 0.5*U)), 0.01, 0.5)
* base = 2 + 4U; draft_entropy = base*(1 + 0.3U);
  target_entropy = base*(0.8 + 0.3U) if match else base*(1 + 0.5U)
* rand_value = U; baseline_accepts = rand_value < min(1, target_prob/draft_prob)

Each U is a fresh uniform draw.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from evolve.verification.tokenwise import standard_threshold

GENERATOR_NAME = "independent"
GENERATOR_VERSION = 1


@dataclass(frozen=True)
class IndependentModelConfig:
    """Knobs of the independent-features model (average sequence length, top-token match rate)."""

    avg_length: int = 50
    match_rate: float = 0.72

    def to_dict(self) -> dict:
        """JSON-serialisable dict."""
        return asdict(self)


def generate_split(sequences: int, seed: int | np.random.SeedSequence,
                   config: IndependentModelConfig = IndependentModelConfig()) -> pd.DataFrame:
    """Draw ``sequences`` sequences from the independent-features model.

    Args:
        sequences: number of sequences (>= 1).
        seed: integer seed or SeedSequence; the same seed gives the same frame.
        config: model knobs.

    Returns: DataFrame with the schema's required columns (seq_id, position,
    draft_prob, target_prob, draft_entropy, target_entropy, top_token_match,
    rand_value, baseline_accepts), about ``sequences * avg_length`` rows.
    """
    rng = np.random.default_rng(seed)
    avg = config.avg_length
    lengths = avg // 2 + rng.integers(0, avg, size=sequences)
    n = int(lengths.sum())
    seq_id = np.repeat(np.arange(sequences, dtype=np.int64), lengths)
    starts = np.repeat(np.cumsum(lengths) - lengths, lengths)
    position = np.arange(n, dtype=np.int64) - starts

    match = rng.random(n) < config.match_rate
    a = np.where(position < 5, 3.0, 2.0)
    draft_prob = 0.05 + 0.9 * rng.beta(a, 1.5)
    u1, u2, u3 = rng.random(n), rng.random(n), rng.random(n)
    target_match = np.clip(0.85 * draft_prob + 0.15 * u1 + (0.3 * u2 - 0.15), 0.01, 0.99)
    target_miss = np.clip(draft_prob * (1.0 - (0.3 + 0.5 * u3)), 0.01, 0.5)
    target_prob = np.where(match, target_match, target_miss)
    base = 2.0 + 4.0 * rng.random(n)
    draft_entropy = base * (1.0 + 0.3 * rng.random(n))
    u4 = rng.random(n)
    target_entropy = np.where(match, base * (0.8 + 0.3 * u4), base * (1.0 + 0.5 * rng.random(n)))
    rand_value = rng.random(n)
    baseline = rand_value < standard_threshold(target_prob, draft_prob)
    return pd.DataFrame({
        "seq_id": seq_id, "position": position, "draft_prob": draft_prob, "target_prob": target_prob,
        "draft_entropy": draft_entropy, "target_entropy": target_entropy, "top_token_match": match,
        "rand_value": rand_value, "baseline_accepts": baseline,
    })
