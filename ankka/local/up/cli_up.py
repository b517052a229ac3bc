"""Start the platform on this machine: the model, the gateway over mTLS and the runtime.

MODULE:ATTR names the Service (default examples.up_service:service:
the weather agent and the researcher, an autonomous agent). Progress is shown per part
(what, how long, which address); a part that fails stops the others and names its log. Stays
in the foreground: Ctrl-C, or `ankka down` from another shell, stops everything. State (the
local CA, certificates, logs, the session store) lives in $ANKKA_STATE or
~/.local/state/ankka. The runtime serves the console at /console.
"""

from ankka.local.up.cli import configure_up as configure
from ankka.local.up.cli import run_up as run

__all__ = ["configure", "run"]
