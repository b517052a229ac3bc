"""Stop what `ankka up` started, by the PIDs it recorded in $ANKKA_STATE/run.json."""

import argparse

from ankka.local.up.cli import down as run

__all__ = ["configure", "run"]


def configure(parser: argparse.ArgumentParser) -> None:
    """No options."""
