"""``python benchmark.py``: every rule and champion scored on a split by its kind of program (``table``), per
question category (``categories``), under a cost file (``speed``) and against concurrent requests
(``concurrency``); :mod:`evolve.report.compare` renders the result."""
