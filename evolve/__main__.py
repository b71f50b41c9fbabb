"""``python -m evolve run|show|promote``: evolve acceptance rules (thin entry point of :mod:`evolve.cli.evolve`).

Every option is listed in docs/reference/commands.md.
"""
from evolve.cli.evolve import cli

if __name__ == "__main__":
    cli(prog_name="python -m evolve")
