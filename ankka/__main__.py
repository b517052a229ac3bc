import sys

from ankka.cli import main

sys.exit(main())
