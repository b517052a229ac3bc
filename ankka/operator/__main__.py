"""``python -m ankka.operator``: the same as ``ankka operator``."""

from ankka.operator.cli import main

raise SystemExit(main())
