"""The parts of ``scripts/gpu_costs.py``, which measures GPU cost files: the model shapes (``shapes``), a minimal
pure-torch Llama and EAGLE-3-style head (``llama``), the timed calls on each engine (``engines``), one group's
measurement (``measure``) and the cost file it becomes (``cost_file``).

Standalone, as the script: torch, transformers (optional) and the standard library only, never the ``evolve``
package. The script puts ``scripts/`` on the import path (Python does, for the script's own folder).
"""
