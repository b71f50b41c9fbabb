"""Training drafters for a local target (``python -m evolve train-drafter``): :mod:`evolve.train.eagle` trains an
EAGLE-3-style head on the target's own responses and writes it in the published layout that
``--draft-eagle`` loads (:mod:`evolve.engine.eagle`)."""
