"""Acceptance rules: the contract (:mod:`heuristics.contract`), the baselines and the published
rule families (plain data), champion files, and the one registry assembling them
(:mod:`heuristics.registry`). Importing the package registers nothing."""
