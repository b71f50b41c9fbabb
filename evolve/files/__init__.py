"""File helpers every writer uses: atomic writes through a temporary file and a rename (``atomic``), one writer
per output directory and temporary files that tell whether their writer is alive (``locks``), and where a command
may write (``guard``: the output-path guard)."""
