"""``python -m dlq``: see ``dlq.cli``."""

from dlq.cli import main

main()
