"""Trace datasets: the schema (version 1), reading with validation, atomic writing, the synthetic
trace models (:mod:`evolve.traces.synth`); traces harvested from real models are written by
:mod:`evolve.harvest`, beside the engine it drives.

Generated datasets are written to the folder ``data/`` of the working directory by default
(``data/train.parquet``, ``data/valid.parquet``, ``data/test.parquet``, ``data/metadata.json``).
Import names from the module that defines them (:mod:`evolve.traces.io`, :mod:`evolve.traces.schema`).
"""
