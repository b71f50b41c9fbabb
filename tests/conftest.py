"""Shared fixtures: small seed-model splits (fast to make, schema-valid)."""
from __future__ import annotations

import pytest

from data.io import Traces
from data.seed_model import generate_split


@pytest.fixture(scope="session")
def seed_traces() -> Traces:
    """About 2,500 records of seed 004's data model (seed 7)."""
    return Traces.from_frame(generate_split(50, 7), source="seed_traces")
