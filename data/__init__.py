"""Trace datasets: the schema (version 1), loading with validation, writing, generators.

Generated datasets are written to this folder by default (``data/train.parquet``,
``data/valid.parquet``, ``data/test.parquet``, ``data/metadata.json``); they are
git-ignored, only the code is tracked.
"""
from data.errors import InputError
from data.schema import OPTIONAL_COLUMNS, REQUIRED_COLUMNS, SCHEMA_VERSION
from data.io import SPLITS, Traces, load_dataset, load_metadata, load_split, write_dataset

__all__ = [
    "InputError", "SCHEMA_VERSION", "REQUIRED_COLUMNS", "OPTIONAL_COLUMNS", "SPLITS",
    "Traces", "load_split", "load_dataset", "load_metadata", "write_dataset",
]
