"""The command drivers: what each command of ``benchmark.py``, ``generate_data.py`` and ``python -m evolve`` does
once its options are parsed (the command line, :mod:`evolve.cli`, parses them; :mod:`evolve.report` renders what a
driver returns): ``compare`` (``benchmark.py``), ``pareto``, ``simulate``, ``live``, ``trees``, ``groups``, the
documented tables (``doctables``) and the shared helpers of several commands (``rules``: what ``--rule NAME`` names;
``options``: naming the parameter of a value a lower layer checked)."""
