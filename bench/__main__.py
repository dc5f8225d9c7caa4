"""``python -m bench``: see ``bench/__init__.py``."""

import typer

from bench.cli import main

if __name__ == "__main__":
    typer.run(main)
