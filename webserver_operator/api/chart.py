"""The Helm chart's copy of the generated CRD, written from the one rendering in ``api.crd``.

Why a copy at all: Helm templates can only read files inside the chart, and a CRD that must be optional
(``crds.enabled``) and optionally kept on uninstall (``crds.keep``) cannot live in the chart's special ``crds/``
folder (Helm installs that unconditionally and never upgrades it). So the chart stores the generated YAML under
``files/crds/`` and ``templates/crd.yaml`` includes it with ``.Files.Get``. ``make manifests`` rewrites the copy
together with ``config/crd``, and a unit test fails when it differs from ``render_crd_yaml()``.

Called by ``cli manifests``; hands on the chart's copy of the CRD file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from webserver_operator.api.crd import CRD_FILE_NAME, render_crd_yaml

__all__ = ["CHART_CRD_PATH", "write_chart_crd"]

CHART_CRD_PATH: Final = Path("files") / "crds" / CRD_FILE_NAME
"""Where the CRD sits inside the chart directory (the path ``templates/crd.yaml`` reads with ``.Files.Get``)."""


def write_chart_crd(chart_dir: Path) -> Path:
    """Write the generated CRD into the chart at ``chart_dir``; return the path written."""
    path = chart_dir / CHART_CRD_PATH
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_crd_yaml(), encoding="utf-8")
    return path
