"""`python -m streaming`: the `placement-engine` command line (`streaming.cli`), for an environment
without the console script (a packed environment, an unpacked wheel)."""

import sys

from streaming.cli import main

sys.exit(main())
