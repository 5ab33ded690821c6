"""``KubeClient``: the only object in the operator that talks HTTP to the API server.

Everything above this layer works with plain JSON dicts. Why not the generated ``*Api`` classes and model objects:
deserialising into models is slow, drops unknown fields (lossy round trips are how operators clobber fields they do
not own) and needs per-kind code.

What is kept of kubernetes_asyncio (a named dependency): the kubeconfig and in-cluster loaders (``kube.config``) and
``Configuration`` (host, credentials, TLS files and flags, proxy, the token refresh hook). What is bypassed: all of
``ApiClient`` and its ``RESTClientObject`` (``client/api_client.py``, ``client/rest.py``); ``kube.library`` does not
even import them. ``call_api`` and ``RESTClientObject.request``, on every request, walk the headers, the query and the
whole body through ``sanitize_for_serialization`` (a recursive copy of the object, made for model classes the
operator never uses), rebuild the auth settings dict, encode the body with the standard library's ``json`` and search
the content type with a regular expression. And the module keeps about 2 MB resident for the life of the process
(with ``dateutil``, ``multiprocessing.pool`` and ``six.moves``) only for ``ApiClient.__init__``.

Also bypassed, since issue 19: the aiohttp client session the library would have made. Its per-request objects
(``ClientRequest``, ``ClientResponse``, ``StreamReader``, timers, trace hooks) were over a quarter of the operator's
CPU in a bulk create; ``kube.transport.connection`` (a pool of keep-alive HTTP/1.1 connections) and
``kube.transport.http1`` (the
bytes) do the same exchanges at about a third of the CPU per request (``bench.request_cost``). What the library's
``RESTClientObject.__init__`` configures is kept (kubernetes_asyncio 36.x, read, not guessed): the TLS context
(``_tls_context``: ``ssl.create_default_context`` with ``cafile=ssl_ca_cert``; ``load_cert_chain(cert_file,
keyfile=key_file)`` when ``cert_file`` is set; with ``verify_ssl`` false, ``check_hostname`` off and ``CERT_NONE``;
with ``disable_strict_ssl_verification``, the ``VERIFY_X509_STRICT`` flag cleared), the pool's size
(``connection_pool_maxsize``, here the ``pool_size`` of ``create``), and what ``RESTClientObject.request`` would
pass per request: the proxy and its headers and the TLS server name. ``assert_hostname`` and the other urllib3-era
fields of ``Configuration`` are not read by the library's client either. A request carries the ``User-Agent`` the
``ApiClient`` would have added, ``Accept: application/json``, and the bearer token from
``Configuration.get_api_key_with_prefix``, which runs the library's refresh hook exactly as ``call_api`` did; the
body is encoded once by orjson (``kube.jsoncodec``). No ``Accept-Encoding`` is sent, so the API server answers
uncompressed: on the loopback or pod network of an operator, gzip of large lists costs both sides more CPU than it
saves. ``tests/unit/kube/test_client_tls.py`` checks the TLS context against the library's own ``RESTClientObject``
for the same configurations, so a library upgrade that changes how it builds TLS shows up there.

Traps handled here:

- Timeouts: connecting (the wait for a pooled connection plus the TCP and TLS handshakes) is bounded by the connect
  timeout; an answer that stops coming for the read timeout (time without receiving a byte) fails; each attempt of
  a request is bounded in all by ``REQUEST_TIMEOUT_SECONDS`` (internal: the API server ends its own requests at 60 s,
  so only a server or proxy trickling bytes reaches it). A watch's read timeout (the watch read timeout) bounds the
  wait for the answer's head here and each wait for the next chunk in ``kube.stream``; a watch has no total.
- The bearer token is trimmed of surrounding whitespace, as client-go trims a token file (the library sends the
  file's content as it is, and ``echo $TOKEN > token`` leaves a newline); one with a line break or NUL inside is a
  ``ConfigurationError``.
- Query values go through ``urlencode`` as-is: Python ``True`` would become ``"True"``, so bools are encoded here.
  Paths are percent-encoded (``/`` and RFC 3986 path characters kept).
- The pool must be created inside the running loop and shared; ``KubeClient.create`` does that, ``close()`` closes
  every connection.
- The library's session is made with ``trust_env=True``: aiohttp then reads ``~/.netrc`` and the proxy variables in
  a thread-pool executor on every request (a fifth of the operator's CPU in a profiled bulk create).
  ``HTTPS_PROXY``/``NO_PROXY`` are resolved once here for the API server's host, by Go's rules as client-go does
  (``kube.noproxy``: CIDRs in ``NO_PROXY``, which Python's ``proxy_bypass`` ignores; netrc is not a Kubernetes
  credential source); ``kube.transport.connection`` tunnels through the proxy as Go's ``net/http`` does.
- ``kubernetes_asyncio.watch.Watch`` retries a 410 with the same stale resourceVersion: ``watch()`` here only opens
  and decodes the stream (see ``webserver_operator.kube.stream``); the informer relists.

Writes of a ``gated()`` view (the reconcile path, gated on the leader Lease's ``runtime.leases.fence.LeaseFence``) are
checked when the request starts and again at the last moment, after the rate limiter and the wait for a pooled
connection, with no await left before the request is written (``kube.gate``): a write refused there raises
``WritesStopped`` and nothing of it is sent.

One way to talk to the API: ``request()`` (any verb; the reconciler's merge patches use ``core.vocabulary.MERGE_PATCH``)
and ``watch()``. Every write carries ``fieldManager=webserver-operator``, so ``managedFields`` names the operator as
the manager of what it set. Retries (429, 5xx, transport errors; see ``webserver_operator.kube.retry``) apply to
``request()``, not to ``watch()``, whose caller must handle a failed open anyway; ``without_retries()`` is the view the
reconcile path uses, where the work queue backs off instead. Every attempt, retried or not, is counted in
``rest_client_requests_total{code,method,host}`` and ``rest_client_request_duration_seconds{verb,host}``; labels
never carry paths or object names. Failed attempts are logged with method, path (no query string), status and the
API server's message; never headers or bodies, which may carry tokens or Secret data.

Created by ``manager.operator``; handed to the informers (``WatchApi``), the Leases and, as its no-retry view,
the reconciler and the Event recorder (``ApiRequests``).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import os
import random
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any, Self, Unpack
from urllib.parse import quote, urlencode

from webserver_operator import __version__, metrics
from webserver_operator.core.settings import ClientSettings, WatchSettings
from webserver_operator.core.vocabulary import Decode, QueryValue, RequestOptions
from webserver_operator.kube import jsoncodec, noproxy
from webserver_operator.kube.errors import (
    ConfigurationError,
    KubeError,
    TransportError,
    WritesStopped,
    api_error_from_response,
)
from webserver_operator.kube.gate import WriteCheck
from webserver_operator.kube.library import Configuration
from webserver_operator.kube.ratelimit import TokenBucket
from webserver_operator.kube.retry import RetryPolicy, call_with_retries
from webserver_operator.kube.stream import WatchStream
from webserver_operator.kube.transport.connection import Connection, ConnectionPool, Endpoint, ProxyError
from webserver_operator.kube.transport.http1 import ProtocolError, ResponseHead, encode_request

__all__ = ["FIELD_MANAGER", "REQUEST_TIMEOUT_SECONDS", "USER_AGENT", "KubeClient"]

log = logging.getLogger(__name__)

USER_AGENT = f"webserver-operator/{__version__}"
FIELD_MANAGER = "webserver-operator"
"""``fieldManager`` of every write, so ``managedFields`` shows which fields the operator set."""
_WRITE_METHODS = frozenset({"POST", "PUT", "PATCH"})
_GATED_METHODS = _WRITE_METHODS | {"DELETE"}
_DEFAULT_WATCH_READ_TIMEOUT = WatchSettings().read_timeout
#: kubernetes_asyncio's own default (``Configuration.connection_pool_maxsize``).
DEFAULT_POOL_SIZE = 100
#: Longest one attempt of a request (not a watch) may take, connection, answer and body together: the API server
#: ends a request it has not answered within its own ``--request-timeout`` (60 s by default) with a 504, so an
#: attempt past twice that is a server or proxy trickling bytes under the read timeout. Never shorter than the
#: connect plus read timeouts a user set.
REQUEST_TIMEOUT_SECONDS = 120.0

_JSON = "application/json"
#: Characters left as they are in a request path (RFC 3986 ``pchar`` and ``/``; ``%`` keeps escapes the caller made).
_PATH_SAFE = "/:@!$&'()*+,;=%-._~"
# Status code label of attempts that got no HTTP answer, as client-go.
_NO_STATUS = "<error>"


def _encode_query(query: Mapping[str, QueryValue] | None) -> list[tuple[str, str]]:
    """Query parameters as strings the API server understands (``true``/``false`` for bools)."""
    pairs: list[tuple[str, str]] = []
    for key, value in (query or {}).items():
        if isinstance(value, bool):
            pairs.append((key, "true" if value else "false"))
        else:
            pairs.append((key, str(value)))
    return pairs


def _read_environment_once(configuration: Configuration) -> None:
    """Resolve the proxy once, as the session does not consult the environment per request (``trust_env=False``).

    A proxy set in the configuration wins; otherwise ``HTTPS_PROXY``/``HTTP_PROXY`` for the API server's scheme,
    unless ``NO_PROXY`` covers its host, with Go's rules (CIDRs included; ``kube.noproxy``).
    """
    if not configuration.proxy:
        proxy = noproxy.proxy_for(str(configuration.host), os.environ)
        if proxy:
            configuration.proxy = proxy


def _tls_context(configuration: Configuration) -> ssl.SSLContext:
    """The TLS context kubernetes_asyncio's ``RESTClientObject.__init__`` builds from ``configuration``, in order."""
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, keyfile=configuration.key_file)
    if not configuration.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if configuration.disable_strict_ssl_verification:
        context.verify_flags &= ~ssl.VERIFY_X509_STRICT
    return context


def _endpoint(configuration: Configuration) -> Endpoint:
    """Where the requests go, with the TLS context, server name, proxy and proxy headers of ``configuration``."""
    try:
        return Endpoint.from_url(
            str(configuration.host),
            tls=_tls_context(configuration),
            server_hostname=configuration.tls_server_name or None,
            proxy=configuration.proxy or None,
            proxy_headers=dict(configuration.proxy_headers or {}),
        )
    except ValueError as exc:
        raise ConfigurationError(str(exc)) from exc


class KubeClient:
    """Shared API client. Build it with ``await KubeClient.create(configuration, ...)`` inside the running loop."""

    def __init__(
        self,
        pool: ConnectionPool,
        configuration: Configuration,
        *,
        settings: ClientSettings,
        watch_read_timeout: float = _DEFAULT_WATCH_READ_TIMEOUT,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rand: Callable[[], float] = random.random,
        request_timeout: float = REQUEST_TIMEOUT_SECONDS,
    ) -> None:
        self._pool = pool
        self._settings = settings
        self._request_timeout = max(request_timeout, settings.connect_timeout + settings.read_timeout)
        self._token: tuple[str, str] | None = None  # the last Authorization value as given, and as sent
        self._watch_read_timeout = watch_read_timeout
        self._sleep = sleep
        self._rand = rand
        self._policy = retry or RetryPolicy()
        self._may_write: WriteCheck | None = None
        self._limiter = (
            TokenBucket(qps=settings.qps, burst=settings.burst, sleep=sleep) if settings.qps is not None else None
        )
        endpoint = pool.endpoint
        self._host = endpoint.authority
        self._configuration = configuration
        # What the library's request adds to every call, worked out once (see the module docstring); through a
        # proxy to a plain-HTTP server, every request carries the proxy's headers.
        self._base_headers: tuple[tuple[str, str], ...] = (("User-Agent", USER_AGENT), ("Accept", _JSON))
        if endpoint.proxy and endpoint.tls is None:
            self._base_headers += endpoint.proxy_headers
        self._observers: dict[tuple[str, str], tuple[Any, Any]] = {}

    @classmethod
    async def create(
        cls,
        configuration: Configuration,
        *,
        settings: ClientSettings,
        watch_read_timeout: float = _DEFAULT_WATCH_READ_TIMEOUT,
        retry: RetryPolicy | None = None,
        pool_size: int = DEFAULT_POOL_SIZE,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rand: Callable[[], float] = random.random,
        request_timeout: float = REQUEST_TIMEOUT_SECONDS,
    ) -> Self:
        """Create the client in the running loop (its connections bind to it).

        ``watch_read_timeout`` is ``WatchSettings.read_timeout`` (longer than any watch's ``timeoutSeconds``).
        ``pool_size`` caps the client's open connections (0: no cap). Each client has its own connection pool, so the
        manager gives the informers, whose watches hold a connection each for minutes, a client of their own, and
        the Lease another: watches can then never starve a write or a renewal of a free connection. All clients share
        ``configuration`` and so its credentials and their refresh. ``request_timeout`` bounds each attempt of a
        request (``REQUEST_TIMEOUT_SECONDS``; at least the connect plus the read timeout). ``sleep``/``rand`` are
        test hooks.
        """
        asyncio.get_running_loop()
        _read_environment_once(configuration)
        pool = ConnectionPool(
            _endpoint(configuration),
            limit=pool_size,
            connect_timeout=settings.connect_timeout,
            read_timeout=settings.read_timeout,
        )
        return cls(
            pool,
            configuration,
            settings=settings,
            watch_read_timeout=watch_read_timeout,
            retry=retry,
            sleep=sleep,
            rand=rand,
            request_timeout=request_timeout,
        )

    def gated(self, may_write: WriteCheck) -> KubeClient:
        """A view whose writes (POST, PUT, PATCH, DELETE) are refused while ``may_write()`` names a reason.

        The manager gates the reconcile path on the leader Lease's fence (``runtime.leases.fence.LeaseFence.why_not``):
        once its validity deadline has passed no write leaves the process, even from a reconcile that is still running
        (``WritesStopped``). ``may_write`` is asked when the request starts (a refused write costs no rate-limit
        token) and again at the last moment, after the rate limiter and the wait for a pooled connection, just
        before the request is written (``kube.gate``), on every attempt. Reads are never gated.
        """
        view = copy.copy(self)
        view._may_write = may_write
        return view

    def without_retries(self) -> KubeClient:
        """A view sharing this client's connection pool and rate limit whose requests are tried once.

        For the reconcile path: a failure goes back to the work queue, which backs off per key and honours
        ``Retry-After``, instead of a worker sleeping through the client's own retries first.
        """
        view = copy.copy(self)
        view._policy = replace(self._policy, max_retries=0)
        return view

    @property
    def host(self) -> str:
        """``host[:port]`` of the API server (the ``host`` metric label)."""
        return self._host

    @property
    def settings(self) -> ClientSettings:
        return self._settings

    async def close(self) -> None:
        await self._pool.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # --- raw requests --------------------------------------------------------------------------------------------

    async def request(self, method: str, path: str, **options: Unpack[RequestOptions]) -> dict[str, Any]:
        """Send a request (retried per the retry policy) and return the decoded JSON body (``{}`` when empty).

        Raises ``ApiError`` subclasses for HTTP errors and ``TransportError`` when no answer came. ``body`` is any
        JSON-serialisable value; ``content_type`` defaults to JSON.
        """
        method = method.upper()
        if self._may_write is not None and method in _GATED_METHODS and (why := self._may_write(path)) is not None:
            raise WritesStopped(method=method, path=path, why=why)
        body, content_type = options.get("body"), options.get("content_type")
        pairs = _encode_query(options.get("query"))
        if method in _WRITE_METHODS and not any(key == "fieldManager" for key, _ in pairs):
            pairs.append(("fieldManager", FIELD_MANAGER))

        def on_retry(error: KubeError, delay: float) -> None:
            log.warning("%s %s attempt %d failed, retrying in %.2fs: %s", method, path, error.attempts, delay, error)

        try:
            return await call_with_retries(
                lambda: self._attempt(
                    method,
                    path,
                    query=pairs,
                    body=body,
                    content_type=content_type or _JSON,
                    decode=options.get("decode") or jsoncodec.decode,
                ),
                policy=self._policy,
                sleep=self._sleep,
                rand=self._rand,
                on_retry=on_retry,
            )
        except KubeError as error:
            if error.retriable:
                log.warning("%s %s gave up after %d attempts: %s", method, path, error.attempts, error)
            raise

    async def _attempt(
        self,
        method: str,
        path: str,
        *,
        query: list[tuple[str, str]],
        body: object | None,
        content_type: str,
        decode: Decode,
    ) -> dict[str, Any]:
        started = time.monotonic()
        deadline = asyncio.timeout(self._request_timeout)
        try:
            async with deadline:
                connection, head = await self._send(method, path, query=query, body=body, content_type=content_type)
                try:
                    data = await connection.read_body()
                except (OSError, ProtocolError) as exc:
                    self._observe(method, _NO_STATUS, started)
                    raise self._transport_error(exc, method=method, path=path) from exc
                finally:
                    connection.release()
        except TimeoutError as exc:
            self._observe(method, _NO_STATUS, started)
            cause: BaseException = exc
            if deadline.expired():
                cause = TimeoutError(f"no complete answer within the request timeout ({self._request_timeout:g}s)")
            raise self._transport_error(cause, method=method, path=path) from exc
        status = head.status
        self._observe(method, str(status), started)
        if not 200 <= status < 300:
            error = api_error_from_response(status, data, method=method, path=path, headers=head.headers())
            log.debug("%s %s -> %d %s: %s", method, path, status, error.reason, error.message)
            raise error
        return self._decode(data, decode, method=method, path=path)

    async def _send(
        self,
        method: str,
        path: str,
        *,
        query: list[tuple[str, str]],
        body: object | None,
        content_type: str | None,
        streaming: bool = False,
    ) -> tuple[Connection, ResponseHead]:
        """One HTTP exchange up to the answer's head; transport failures become ``TransportError``.

        Returns the connection (the caller reads the body and ``release()``s it) and the head. A gated view's
        writes are checked once more at the last moment: after the rate limiter and the wait for a connection,
        with no await before the request is written.
        """
        if self._limiter is not None:
            await self._limiter.acquire()
        fields = self._base_headers
        if content_type is not None:
            fields += (("Content-Type", content_type),)
        if "BearerToken" in self._configuration.api_key:
            # Runs the library's refresh hook (exec plugins, in-cluster token rotation), as ``call_api`` does.
            fields += (
                (
                    "Authorization",
                    self._authorization(await self._configuration.get_api_key_with_prefix("BearerToken")),
                ),
            )
        target = quote(path, safe=_PATH_SAFE)
        if query:
            target = f"{target}?{urlencode(query)}"
        data = None if body is None else body if isinstance(body, bytes) else jsoncodec.encode(body)
        pool = self._pool
        request = encode_request(method, pool.endpoint.target(target), self._host, fields, data)
        started = time.monotonic()
        connection: Connection | None = None
        try:
            connection = await pool.acquire()
            check = self._may_write
            if check is not None and method in _GATED_METHODS and (why := check(path)) is not None:
                raise WritesStopped(method=method, path=path, why=why)
            return connection, await connection.send(request, streaming=streaming)
        except BaseException as exc:
            if connection is not None:
                # Unused (a refused write), cancelled or left without an answer: the pool decides whether it is
                # reusable, and the slot is free again either way.
                connection.release()
            if not isinstance(exc, (TimeoutError, OSError, ProtocolError)):
                raise
            self._observe(method, _NO_STATUS, started)
            error = self._transport_error(exc, method=method, path=path)
            log.debug("%s %s -> no answer: %s", method, path, error.cause)
            raise error from exc

    def _authorization(self, value: str) -> str:
        """The ``Authorization`` value with the token's surrounding whitespace trimmed, as client-go trims a token file.

        A token file ending in a newline (``echo $TOKEN > token``, a Secret written by hand) is common; the library
        sends its content as it is, and the line break made every request fail. Worked out once per token value.
        """
        cached = self._token
        if cached is not None and cached[0] is value:
            return cached[1]
        scheme, space, credentials = value.strip().partition(" ")
        credentials = credentials.strip()
        if not space or not credentials:
            raise ConfigurationError(
                "the bearer token is empty: check the ServiceAccount token file or the kubeconfig user's "
                "token/tokenFile"
            )
        if any(character in credentials for character in "\r\n\x00"):
            raise ConfigurationError(
                "the bearer token holds a line break or NUL: check the ServiceAccount token file or the kubeconfig "
                "user's token/tokenFile (one token, on one line)"
            )
        self._token = (value, f"{scheme} {credentials}")
        return self._token[1]

    def _observe(self, method: str, code: str, started: float) -> None:
        # The labelled children are looked up once per (method, code): ``labels()`` builds and hashes a key and takes
        # a lock on every call. The views made by ``gated``/``without_retries`` share this dict (a shallow copy).
        children = self._observers.get((method, code))
        if children is None:
            children = (
                metrics.REST_CLIENT_REQUESTS.labels(code=code, method=method, host=self._host),
                metrics.REST_CLIENT_REQUEST_DURATION.labels(verb=method, host=self._host),
            )
            self._observers[(method, code)] = children
        children[0].inc()
        children[1].observe(time.monotonic() - started)

    def _transport_error(self, exc: BaseException, *, method: str, path: str) -> TransportError:
        retriable = True
        if isinstance(exc, TimeoutError):
            # A TimeoutError without text is the pool's: no free connection, or no handshake, within the timeout.
            what = str(exc) or "no connection to the API server within the connect timeout"
            cause = (
                f"timed out ({what}; connect timeout {self._settings.connect_timeout:g}s, "
                f"read timeout {self._settings.read_timeout:g}s)"
            )
        elif isinstance(exc, ssl.SSLCertVerificationError):
            retriable = False
            cause = f"TLS certificate verification failed ({exc}): check the CA in the kubeconfig / ServiceAccount"
        elif isinstance(exc, ProxyError):
            retriable = False
            cause = str(exc)
        else:
            cause = f"{type(exc).__name__}: {exc}"
        return TransportError(method=method, path=path, cause=cause, host=self._host, retriable=retriable)

    @staticmethod
    def _decode(data: bytes, decode: Decode, *, method: str, path: str) -> dict[str, Any]:
        if not data.strip():
            return {}
        try:
            decoded = decode(data)
        except ValueError as exc:
            raise TransportError(
                method=method, path=path, cause=f"the answer is not JSON ({exc})", retriable=False
            ) from exc
        if not isinstance(decoded, dict):
            raise TransportError(
                method=method, path=path, cause=f"the answer is a JSON {type(decoded).__name__}", retriable=False
            )
        return decoded

    # --- watch ---------------------------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def watch(
        self, path: str, *, query: Mapping[str, QueryValue], decode: Decode | None = None
    ) -> AsyncIterator[WatchStream]:
        """Open a watch on a collection ``path``; an async context manager yielding an async iterator of events.

        ::

            async with kube.watch(DEPLOYMENTS.path(), query={"resourceVersion": rv, "allowWatchBookmarks": True,
                                                              "timeoutSeconds": 290}) as events:
                async for event in events:   # {"type": "ADDED"|...|"BOOKMARK"|"ERROR", "object": {...}}
                    ...

        Opening raises ``ApiError`` on a non-200 answer (410 Gone for a too-old resourceVersion, 403...) and
        ``TransportError`` when the server cannot be reached; not retried. Iterating raises ``TransportError`` on a
        read timeout, a reset connection or a body cut mid-event, and ends normally when the server closes the
        stream (``timeoutSeconds`` elapsed): re-watch from the last resourceVersion seen. ``ERROR`` events (a
        ``Status`` in ``object``, e.g. code 410 "Expired") are yielded as they are. Leaving the block closes the
        connection. ``timeoutSeconds`` is required and must be below the watch read timeout
        (``WatchSettings.read_timeout``), so that a healthy stream is always ended by the server, never by the
        client's read timeout.
        """
        timeout_seconds = query.get("timeoutSeconds")
        if isinstance(timeout_seconds, bool) or not str(timeout_seconds).isdigit():
            raise ValueError("watch needs an integer timeoutSeconds (server-side end of the stream), e.g. 290")
        if not 0 < int(str(timeout_seconds)) < self._watch_read_timeout:
            raise ValueError(
                f"watch timeoutSeconds={timeout_seconds} must be > 0 and below the client watch read timeout "
                f"({self._watch_read_timeout:g}s)"
            )
        pairs = [(k, v) for k, v in _encode_query(query) if k != "watch"] + [("watch", "true")]
        started = time.monotonic()
        try:
            async with asyncio.timeout(self._watch_read_timeout):
                connection, head = await self._send(
                    "GET", path, query=pairs, body=None, content_type=None, streaming=True
                )
        except TimeoutError as exc:
            self._observe("GET", _NO_STATUS, started)
            cause = f"no answer within the watch read timeout ({self._watch_read_timeout:g}s)"
            raise TransportError(method="GET", path=path, cause=cause, host=self._host) from exc
        stream: WatchStream | None = None
        try:
            self._observe("GET", str(head.status), started)
            if head.status != 200:
                try:
                    data = await connection.read_body()
                except (TimeoutError, OSError, ProtocolError) as exc:
                    raise self._transport_error(exc, method="GET", path=path) from exc
                error = api_error_from_response(
                    head.status, data, method="GET", path=path, headers=head.headers(), verb="watch"
                )
                log.debug("watch %s -> %d %s: %s", path, error.status, error.reason, error.message)
                raise error
            stream = WatchStream(
                read_chunk=connection.read_chunk,
                method="GET",
                path=path,
                host=self._host,
                read_timeout=self._watch_read_timeout,
                interrupt=connection.interrupt,
                decode=decode or jsoncodec.decode,
            )
            yield stream
        finally:
            if stream is not None:
                stream.close()
            connection.release()  # reused only when the stream was read to its end
