"""Live speculative decoding on real models: each rule, policy or verifier run inside a real decode loop
(``decoding``; draft trees and tree shapes: ``trees``), measured by ``python benchmark.py live`` (:mod:`evolve.commands.live`)."""
