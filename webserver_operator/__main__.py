"""`python -m webserver_operator` runs the CLI (same as the `webserver-operator` console script).

Run by ``python -m webserver_operator``; hands straight on to ``cli.main``.
"""

import sys

from webserver_operator.cli import main

__all__: list[str] = []

sys.exit(main())
