"""Output: what the commands' results look like (tables that fit 100 columns, Markdown, CSV, JSON, plots) and where
they go (``--format``/``--output``, atomic writes). The commands that compute them are :mod:`evolve.commands`."""
