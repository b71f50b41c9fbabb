"""Kinds of program, one package each: what a program's value means and everything that is the kind's own.

``evolve.kinds.registry`` lists the kinds; ``evolve.kinds.base`` defines a kind (:class:`ProgramKind`) and the
hooks a kind gives the commands (:class:`KindHooks`). Each kind's package (``threshold``, ``relaxation``,
``verify_length``, ``tree_shape``) holds its descriptor in ``__init__`` and its modules layer by layer, named
by the floor they sit on: ``eval_*`` (scoring), ``search_*`` (warm start), ``report_*`` (command rows),
``export_*`` (the exported module's layout) and ``plugin`` (the hooks, registered once). This package's
``__init__`` imports nothing, so a low floor can import a kind's descriptor without the upper floors.
"""
