"""Show what `ankka up` runs: each part, its PID, address and log. Exit 3 when nothing runs."""

import argparse

from ankka.local.up.cli import status as run

__all__ = ["configure", "run"]


def configure(parser: argparse.ArgumentParser) -> None:
    """No options."""
