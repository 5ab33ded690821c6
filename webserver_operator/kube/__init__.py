"""The only layer that talks HTTP to the Kubernetes API server; everything above it sees plain JSON dicts.

Modules, one concern each: ``resources`` (paths), ``errors`` (our exception types), ``config`` (kubeconfig /
in-cluster with token refresh), ``settings`` (timeouts, retries, rate limit), ``retry`` (pure retry policy),
``ratelimit`` (token bucket), ``stream`` (watch body decoding) and ``client`` (``Kube``). The names most callers need
are re-exported here.
"""

from webserver_operator.kube.client import PATCH_CONTENT_TYPES, Kube, PatchType
from webserver_operator.kube.config import load_configuration
from webserver_operator.kube.errors import (
    ApiError,
    ConfigurationError,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    KubeError,
    NotFound,
    ServerError,
    TooManyRequests,
    TransportError,
    Unauthorized,
    api_error_from_response,
)
from webserver_operator.kube.resources import DEPLOYMENTS, EVENTS, LEASES, NAMESPACES, SERVICES, WEBSERVERS, Resource
from webserver_operator.kube.settings import ClientSettings
from webserver_operator.kube.stream import WatchStream

__all__ = [
    "DEPLOYMENTS",
    "EVENTS",
    "LEASES",
    "NAMESPACES",
    "PATCH_CONTENT_TYPES",
    "SERVICES",
    "WEBSERVERS",
    "ApiError",
    "ClientSettings",
    "ConfigurationError",
    "Conflict",
    "Forbidden",
    "Gone",
    "Invalid",
    "Kube",
    "KubeError",
    "NotFound",
    "PatchType",
    "Resource",
    "ServerError",
    "TooManyRequests",
    "TransportError",
    "Unauthorized",
    "WatchStream",
    "api_error_from_response",
    "load_configuration",
]
