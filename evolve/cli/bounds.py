"""The upper bounds of the counts, sizes and repeats the commands take, so that any request can finish.

Every integer option of every command has an upper bound (click's ``IntRange(max=...)``, which ``--help`` shows as
``1<=x<=N``); ``tests/test_hostile_round5_bounds.py`` walks the commands' parameters and fails for one without.
The drafters' values are bounded by their
registry (:data:`evolve.engine.drafter_base.VALUE_LIMITS`). The bounds are chosen for the machines this project
targets (a CPU of a few cores to one accelerator, tens of GB of
memory and disk): far above what any documented run uses, below what would not finish or would exhaust memory.
"""
from __future__ import annotations

#: Seeds: what numpy's and Python's generators take (a signed 64-bit integer).
MAX_SEED = 2 ** 63 - 1
#: Torch CPU threads, Dask workers.
MAX_THREADS = 1024
#: Draft length (tokens per block) of data and scoring (a run's ``gamma`` setting has the same bound).
MAX_GAMMA = 1000
#: Draft length the harvest and the drafters draw per block (a forward pass per drafted token).
MAX_HARVEST_GAMMA = 64
#: Tokens generated per prompt (a model's context is at most this long).
MAX_NEW_TOKENS = 65536
#: Texts decoded together in one padded batch; prompts per ``generate`` call.
MAX_BATCH = 1024
#: Shards of a sharded harvest (Dask tasks).
MAX_SHARDS = 100_000
#: Drafted nodes per draft tree (one row each in the tree tables).
MAX_TREE_NODES = 4096
#: Children per expanded node of a draft tree (as ``benchmark.py simulate --max-width``).
MAX_TREE_WIDTH = 64
#: Timing repeats of one measurement.
MAX_REPEATS = 1000
#: Train sequences of a synthetic dataset (about 50 records each with the default model: 10^8 records, about 23 GB
#: of Parquet, and 0.6 of that again for valid and test; beyond memory, written with --chunk-sequences).
MAX_SEQUENCES = 2_000_000
#: Random programs, population, individuals of a speed measurement.
MAX_PROGRAMS = 1_000_000
#: Generations of a speed measurement's evolution.
MAX_GENERATIONS = 10_000
#: Tokens of a speed measurement's synthetic data held in memory.
MAX_TOKENS = 100_000_000
#: Tokens of the speed measurement's large dataset, written to disk chunk by chunk (about 230 bytes a token).
MAX_LARGE_TOKENS = 200_000_000
#: Texts of a harvest speed measurement.
MAX_TEXTS = 10_000
#: Vocabulary sizes (a draft vocabulary, the top-k of an entropy gate).
MAX_VOCAB = 1 << 20
#: Unrolled draft steps of the training-time test.
MAX_TTT = 64
#: Concurrent requests of a concurrency model.
MAX_CONCURRENCY = 100_000
#: Repeats of live decoding (every prompt decoded that many times by every row, each a full decode on the models).
MAX_LIVE_REPEATS = 100
#: Bootstrap replicates of an interval over texts (a replicates x texts weight matrix is held in memory).
MAX_REPLICATES = 100_000
#: A prompt-lookup draft length K of a peer (tokens drafted per step).
MAX_LOOKUP = 64

__all__ = ["MAX_BATCH", "MAX_CONCURRENCY", "MAX_GAMMA", "MAX_GENERATIONS", "MAX_HARVEST_GAMMA", "MAX_LARGE_TOKENS",
           "MAX_NEW_TOKENS", "MAX_PROGRAMS", "MAX_REPEATS", "MAX_SEED", "MAX_SEQUENCES", "MAX_SHARDS",
           "MAX_TEXTS", "MAX_THREADS", "MAX_TOKENS", "MAX_TREE_NODES", "MAX_TREE_WIDTH", "MAX_TTT", "MAX_VOCAB",
           "MAX_LIVE_REPEATS", "MAX_REPLICATES", "MAX_LOOKUP"]
