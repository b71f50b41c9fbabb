"""File helpers every writer uses: one writer per output directory and temporary files that tell whether their
writer is alive (``locks``), and where a command may write (``guard``: the output-path guard)."""
