"""How a process ended, in words: ``died of illegal instruction (SIGILL)``, not ``-4`` or
``132``.

Why here: the one-machine tooling (a llama-server that died before it was ready), the
llama-server image's entrypoint and the operator (an InstallationModel whose server container
keeps dying) all report exits, and a signal must read the same in each. Standard library only:
the llama-server image runs this file with its own python3, without ankka's dependencies.
"""

from __future__ import annotations

import signal

__all__ = ["exit_words", "signal_of", "signal_words"]


def signal_of(returncode: int) -> int | None:
    """The signal a process died of: ``-N`` from :mod:`subprocess`, or ``128+N`` as a shell
    or a container runtime reports it; None for an ordinary exit."""
    if returncode < 0:
        return -returncode
    if 128 < returncode < 128 + signal.NSIG:
        return returncode - 128
    return None


def signal_words(signum: int) -> str:
    """``illegal instruction (SIGILL)``: what it means, then its name."""
    try:
        name = signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"
    meaning = (signal.strsignal(signum) or name).split(":")[0].strip().lower()
    return f"{meaning} ({name})"


def exit_words(returncode: int) -> str:
    """``died of illegal instruction (SIGILL)`` or ``exited with code 1``."""
    signum = signal_of(returncode)
    if signum is None:
        return f"exited with code {returncode}"
    return f"died of {signal_words(signum)}"
