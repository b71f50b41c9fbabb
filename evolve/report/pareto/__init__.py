"""Rendering ``benchmark.py pareto``'s comparison: the curves and their analysis (``curves``), the table, JSON document
and plot (``format``); the scoring is :mod:`evolve.commands.pareto`."""
