"""`python -m webserver_operator` runs the CLI (same as the `webserver-operator` console script)."""

import sys

from webserver_operator.cli import main

sys.exit(main())
