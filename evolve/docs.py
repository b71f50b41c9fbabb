"""``python -m evolve.docs``: regenerate (or ``--check``) the tables of README.md and docs/ (:mod:`evolve.cli.docs`)."""
from evolve.cli.docs import docs

if __name__ == "__main__":
    docs(prog_name="python -m evolve.docs")
