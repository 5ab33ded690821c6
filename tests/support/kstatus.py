"""The kstatus verdict of objects, computed by the real kstatus library (hack/kstatus, built from Go modules).

Why the real one: Helm 4's ``--wait`` and Flux decide "ready" with kstatus (``github.com/fluxcd/cli-utils``, the
version Helm 4.2 links). Re-implementing its rules in Python would test our reading of them, not the tools users
run. The command is built once into the tools cache, keyed by its sources, and reused.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "hack" / "kstatus"


def kstatus_binary() -> Path:
    digest = hashlib.sha256()
    for name in ("go.mod", "go.sum", "main.go"):
        digest.update((SOURCE / name).read_bytes())
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "webserver-operator" / "kstatus"
    binary = cache / digest.hexdigest()[:12] / "kstatus"
    if not binary.exists():
        binary.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "CGO_ENABLED": "0"}
        subprocess.run(
            ["go", "build", "-trimpath", "-ldflags=-s -w", "-o", str(binary), "."],
            cwd=SOURCE,
            env=env,
            check=True,
            timeout=600,
        )
    return binary


def verdicts(objects: list[dict[str, Any]]) -> list[dict[str, str]]:
    """``[{"status": "InProgress"|"Current"|"Failed"|..., "message": ...}]``, one per object."""
    stdin = "".join(json.dumps(obj) + "\n" for obj in objects)
    out = subprocess.run(
        [str(kstatus_binary())], input=stdin, capture_output=True, text=True, check=True, timeout=60
    ).stdout
    return [json.loads(line) for line in out.splitlines()]
