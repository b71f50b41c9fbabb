"""Acceptance rules: the contract, the registry, seed 004's baselines and evolved champions."""
from heuristics.contract import REGISTRY, Rule, get_rule, register, rule, rule_names

__all__ = ["REGISTRY", "Rule", "get_rule", "register", "rule", "rule_names"]
