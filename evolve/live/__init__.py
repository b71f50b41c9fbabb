"""Live speculative decoding on real models: each rule, policy or verifier run inside a real decode loop
(``decoding``), measured by ``python benchmark.py live`` (:mod:`evolve.report.live`)."""
