"""`python -m cli`: the `atommem` command."""

import sys

from cli.main import main

sys.exit(main())
