"""``python -m evolve``: the search's command line (:mod:`evolve.cli.evolve`)."""
from evolve.cli.evolve import cli

if __name__ == "__main__":
    cli(prog_name="python -m evolve")
