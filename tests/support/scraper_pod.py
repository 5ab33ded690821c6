"""A pod that scrapes /metrics from inside the cluster the way Prometheus does, for the kind e2e suite.

Why a pod: through the API server's proxy (``kubectl get --raw .../proxy/metrics``) no bearer token reaches the
operator (the API server consumes it) and the port is spoken to in plain HTTP. A pod with a ServiceAccount of its
own scrapes as a ServiceMonitor says: HTTPS, ``bearerTokenFile`` (its projected token), ``insecureSkipVerify`` for
the self-signed certificate, from a namespace the chart's NetworkPolicy admits. It runs the operator image (it has
Python) under the restricted Pod Security Standard, and ``kubectl exec`` runs each scrape in it.
"""

from __future__ import annotations

import json

from tests.support.cluster import Cluster

#: The pod's own projected ServiceAccount token: what ``bearerTokenFile`` names in the ServiceMonitor.
POD_TOKEN = "file:/var/run/secrets/kubernetes.io/serviceaccount/token"

#: Run in the pod: GET argv[1] with the token of argv[2] ("file:<path>", "none" or the token itself); print the
#: status, a newline and the body. argv[3] == "insecure" skips certificate verification.
_SCRAPE = """
import ssl, sys, urllib.error, urllib.request
url, source, verify = sys.argv[1:4]
token = open(source[5:]).read().strip() if source.startswith("file:") else ("" if source == "none" else source)
context = ssl.create_default_context()
if verify == "insecure":
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
request = urllib.request.Request(url, headers={"Authorization": "Bearer " + token} if token else {})
try:
    with urllib.request.urlopen(request, context=context, timeout=10) as response:
        status, body = response.status, response.read().decode()
except urllib.error.HTTPError as err:
    status, body = err.code, err.read().decode()
print(status)
print(body, end="")
"""


class ScraperPod:
    """``ScraperPod(cluster, namespace=..., serviceaccount=..., image=...).start()``, then ``scrape``."""

    def __init__(
        self, cluster: Cluster, *, namespace: str, serviceaccount: str, image: str, name: str = "metrics-scraper"
    ) -> None:
        self.cluster = cluster
        self.namespace = namespace
        self.serviceaccount = serviceaccount
        self.image = image
        self.name = name

    def start(self) -> ScraperPod:
        restricted = {
            "allowPrivilegeEscalation": False,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        }
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": self.name, "labels": {"app.kubernetes.io/component": "test-scraper"}},
            "spec": {
                "serviceAccountName": self.serviceaccount,
                "enableServiceLinks": False,
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "scraper",
                        "image": self.image,
                        "imagePullPolicy": "IfNotPresent",
                        "command": ["python", "-c", "import time; time.sleep(3600)"],
                        "securityContext": restricted,
                    }
                ],
            },
        }
        self.cluster.kubectl("apply", "-n", self.namespace, "-f", "-", input=json.dumps(pod))
        self.cluster.kubectl(
            "wait", "--for=condition=Ready", f"pod/{self.name}", "-n", self.namespace, "--timeout=120s", timeout=150
        )
        return self

    def scrape(
        self,
        url: str,
        *,
        token: str = POD_TOKEN,
        insecure: bool = True,
    ) -> tuple[int, str]:
        """GET ``url`` from the pod; ``token`` is ``file:<path>`` (default: the pod's own), ``none`` or a token.

        Answers ``(0, what went wrong)`` when no HTTP answer came (a timeout, a refused connection: e.g. the Service
        still routing to a pod of a rollout that is going away), so callers can ask again as Prometheus would.
        """
        verify = "insecure" if insecure else "verify"
        result = self.cluster.kubectl(
            "exec", self.name, "-n", self.namespace, "--", "python", "-c", _SCRAPE, url, token, verify, check=False
        )
        if result.returncode != 0:
            return 0, result.stderr.strip()[-2000:]
        status, _, body = result.stdout.partition("\n")
        return int(status), body
