"""Where the repository, its scripts and the built tools are.

Why one module: the tests, the benchmark and the chaos harness all run hack/ scripts and read config/ files, and
each used to work out the repository root from its own file's depth. Every path here is absolute, so callers work
from any directory. The tools' directory is asked of hack/tools.sh, which owns the cache key.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HACK = ROOT / "hack"
CONFIG = ROOT / "config"
CHART = ROOT / "charts" / "webserver-operator"
CRD_FILE = CONFIG / "crd" / "bases" / "web.webserver-operator.dev_webservers.yaml"


def tools_bin() -> Path:
    """The bin directory of the tools built by ``make tools`` (kubectl, kwokctl, helm, ...) for this checkout."""
    out = subprocess.run([str(HACK / "tools.sh"), "bindir"], check=True, capture_output=True, text=True)
    return Path(out.stdout.strip())
