"""``python -m chaos``: see ``chaos/__init__.py``."""

import typer

from chaos.cli import main

if __name__ == "__main__":
    typer.run(main)
