"""`python -m drmas.cli` runs the command line, as the `drmas` script does."""

import sys

from drmas.cli.main import main

sys.exit(main())
