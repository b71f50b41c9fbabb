"""Rendering ``benchmark.py``'s comparison: its rows (``rows``), the verdict (``verdict``) and the table, Markdown, CSV
and JSON (``format``); the scoring is :mod:`evolve.commands.compare`."""
