"""Error types built from real API server Status bodies, and the messages people read."""

from __future__ import annotations

import copy
import json
import math
import pickle
from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import format_datetime

import pytest

from webserver_operator.kube.errors import (
    MAX_RETRY_AFTER,
    ApiError,
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
    parse_retry_after,
)

DEPLOY = "/apis/apps/v1/namespaces/default/deployments/web"


def status(code: int, reason: str, message: str, details: Mapping[str, object] | None = None) -> bytes:
    body: dict[str, object] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details is not None:
        body["details"] = dict(details)
    return json.dumps(body).encode()


def test_not_found() -> None:
    body = status(
        404, "NotFound", 'deployments.apps "web" not found', {"name": "web", "group": "apps", "kind": "deployments"}
    )
    err = api_error_from_response(404, body, method="GET", path=DEPLOY, headers={})
    assert type(err) is NotFound
    assert (err.status, err.reason, err.message) == (404, "NotFound", 'deployments.apps "web" not found')
    assert err.details["name"] == "web"
    assert err.verb == "get"
    assert not err.retriable
    text = str(err)
    assert text.startswith(f'GET {DEPLOY} failed with HTTP 404 NotFound: deployments.apps "web" not found.')
    assert "install that CRD" in text


def test_conflict_already_exists_vs_conflict() -> None:
    exists = api_error_from_response(
        409,
        status(409, "AlreadyExists", 'services "web" already exists', {"name": "web", "kind": "services"}),
        method="POST",
        path="/api/v1/namespaces/default/services",
        headers={},
    )
    assert isinstance(exists, Conflict)
    assert exists.already_exists
    assert exists.verb == "create"
    assert "never overwrites" in str(exists)

    conflict = api_error_from_response(
        409,
        status(
            409,
            "Conflict",
            'Operation cannot be fulfilled on deployments.apps "web": the object has been modified; '
            "please apply your changes to the latest version and try again",
        ),
        method="PUT",
        path=DEPLOY,
        headers={},
    )
    assert isinstance(conflict, Conflict)
    assert not conflict.already_exists
    assert "re-read" in str(conflict)


def test_gone_expired_on_watch() -> None:
    err = api_error_from_response(
        410,
        status(410, "Expired", "too old resource version: 1 (2345)"),
        method="GET",
        path="/apis/apps/v1/deployments",
        headers={},
        verb="watch",
    )
    assert isinstance(err, Gone)
    assert err.reason == "Expired"
    assert err.verb == "watch"
    assert "list again" in str(err)


def test_invalid_keeps_the_api_message_verbatim() -> None:
    message = (
        'Service "web" is invalid: spec.ports[0].nodePort: Invalid value: 80: provided port is not in the valid '
        "range. The range of valid ports is 30000-32767"
    )
    details = {
        "name": "web",
        "kind": "Service",
        "causes": [{"reason": "FieldValueInvalid", "message": "Invalid value: 80", "field": "spec.ports[0].nodePort"}],
    }
    err = api_error_from_response(
        422, status(422, "Invalid", message, details), method="POST", path="/api/v1/namespaces/d/services", headers={}
    )
    assert isinstance(err, Invalid)
    assert err.message == message
    assert message in str(err)
    assert err.details["causes"][0]["field"] == "spec.ports[0].nodePort"


def test_forbidden_names_the_missing_rbac_rule() -> None:
    message = (
        'deployments.apps "web" is forbidden: User "system:serviceaccount:ops:webserver-operator" cannot patch '
        'resource "deployments" in API group "apps" in the namespace "default"'
    )
    err = api_error_from_response(403, status(403, "Forbidden", message), method="PATCH", path=DEPLOY, headers={})
    assert isinstance(err, Forbidden)
    assert 'Grant the operator\'s ServiceAccount "patch" on resource "deployments" in API group apps' in str(err)
    assert "chart's RBAC" in str(err)

    status_err = api_error_from_response(
        403,
        status(403, "Forbidden", 'webservers.example.com "w" is forbidden: User "x" cannot update resource ...'),
        method="PUT",
        path="/apis/example.com/v1/namespaces/d/webservers/w/status",
        headers={},
    )
    assert '"update" on resource "webservers/status" in API group example.com' in str(status_err)

    core = api_error_from_response(
        403,
        status(403, "Forbidden", 'events is forbidden: User "x" cannot create resource "events"'),
        method="POST",
        path="/api/v1/namespaces/d/events",
        headers={},
    )
    assert '"create" on resource "events" in API group "" (core)' in str(core)


def test_forbidden_that_is_not_rbac() -> None:
    message = 'services "web" is forbidden: unable to create new content in namespace d because it is being terminated'
    err = api_error_from_response(
        403, status(403, "Forbidden", message), method="POST", path="/api/v1/namespaces/d/services", headers={}
    )
    assert "Grant" not in str(err)
    assert message in str(err)


def test_unauthorized_and_too_many_requests() -> None:
    unauthorized = api_error_from_response(
        401, status(401, "Unauthorized", "Unauthorized"), method="GET", path=DEPLOY, headers={}
    )
    assert isinstance(unauthorized, Unauthorized)
    assert "credentials" in str(unauthorized)
    assert not unauthorized.retriable

    throttled = api_error_from_response(
        429,
        status(429, "TooManyRequests", "Too many requests, please try again later.", {"retryAfterSeconds": 1}),
        method="GET",
        path=DEPLOY,
        headers={"Retry-After": "2"},
    )
    assert isinstance(throttled, TooManyRequests)
    assert throttled.retriable
    assert throttled.retry_after == 2.0  # the header wins over details.retryAfterSeconds

    from_details = api_error_from_response(
        429,
        status(429, "TooManyRequests", "slow down", {"retryAfterSeconds": 3}),
        method="GET",
        path=DEPLOY,
        headers={},
    )
    assert from_details.retry_after == 3.0


@pytest.mark.parametrize(("code", "retriable"), [(500, True), (502, True), (503, True), (504, True), (501, False)])
def test_server_errors(code: int, retriable: bool) -> None:
    err = api_error_from_response(
        code,
        status(code, "InternalError", "Internal error occurred: etcdserver: request timed out"),
        method="GET",
        path=DEPLOY,
        headers={"retry-after": "1"},
    )
    assert isinstance(err, ServerError)
    assert err.retriable is retriable
    assert err.retry_after == 1.0  # header names are case-insensitive


def test_non_status_bodies() -> None:
    html = b"<html><body>" + b"x" * 1000 + b"</body></html>"
    err = api_error_from_response(502, html, method="GET", path=DEPLOY, headers={})
    assert err.reason == "BadGateway"
    assert err.message.startswith("<html>")
    assert err.message.endswith("...")
    assert len(err.message) < 400

    empty = api_error_from_response(400, b"", method="GET", path=DEPLOY, headers=None)
    assert type(empty) is ApiError
    assert empty.reason == "BadRequest"
    assert "without an explanation" in empty.message

    teapot = api_error_from_response(418, b"{not json", method="GET", path=DEPLOY, headers=None)
    assert type(teapot) is ApiError
    assert teapot.message == "{not json"


def test_parse_retry_after() -> None:
    assert parse_retry_after(None) is None
    assert parse_retry_after("1") == 1.0
    assert parse_retry_after(" 2.5 ") == 2.5
    assert parse_retry_after("-3") == 0.0
    assert parse_retry_after("soon") is None
    assert parse_retry_after("nan") is None
    when = datetime(2030, 1, 1, tzinfo=UTC)
    assert parse_retry_after(format_datetime(when, usegmt=True), now=when.timestamp() - 7) == pytest.approx(7.0)


def test_transport_error_message_and_copy() -> None:
    err = TransportError(method="get", path=DEPLOY, cause="ClientConnectorError: refused", host="10.0.0.1:6443")
    err.attempts = 6
    text = str(err)
    assert text.startswith(f"GET {DEPLOY} failed after 6 attempts: no answer from the API server at 10.0.0.1:6443")
    assert "reachable" in text
    assert isinstance(err, KubeError)
    assert err.retriable
    clone = pickle.loads(pickle.dumps(err))  # noqa: S301 - our own bytes
    assert str(clone) == text

    api = api_error_from_response(404, status(404, "NotFound", "gone"), method="GET", path=DEPLOY, headers={})
    api_clone = copy.copy(api)
    assert type(api_clone) is NotFound
    assert str(api_clone) == str(api)
    assert repr(api) == f"NotFound(status=404, reason='NotFound', GET {DEPLOY})"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"NaN", None),  # json.loads takes NaN: asyncio.sleep(nan) never returns
        (b"Infinity", MAX_RETRY_AFTER),
        (b"-Infinity", 0.0),
        (b"-5", 0.0),
        (b"1e308", MAX_RETRY_AFTER),
        (b"9" * 400, MAX_RETRY_AFTER),  # float() of it raised OverflowError, out of a Lease's renewal loop
        (b"-" + b"9" * 400, 0.0),
        (b"2.5", 2.5),
        (b"true", None),
        (b'"3"', None),
    ],
)
def test_retry_after_seconds_in_a_status_is_always_a_finite_bounded_delay(raw: bytes, expected: float | None) -> None:
    body = b'{"kind":"Status","code":429,"reason":"TooManyRequests","details":{"retryAfterSeconds":%b}}' % raw
    error = api_error_from_response(429, body, method="GET", path=DEPLOY, headers={})
    assert error.retry_after == expected


@pytest.mark.parametrize(
    ("header", "expected"),
    [("nan", None), ("inf", MAX_RETRY_AFTER), ("-inf", 0.0), ("1e400", MAX_RETRY_AFTER), ("9" * 400, MAX_RETRY_AFTER)],
)
def test_retry_after_headers_are_bounded_too(header: str, expected: float | None) -> None:
    assert parse_retry_after(header) == expected
    error = api_error_from_response(503, b"", method="GET", path=DEPLOY, headers={"Retry-After": header})
    assert error.retry_after == expected


def test_an_error_built_with_a_non_finite_delay_carries_a_bounded_one() -> None:
    error = ApiError(status=429, reason="TooManyRequests", message="", method="GET", path=DEPLOY, retry_after=math.nan)
    assert error.retry_after is None
    error = ApiError(status=429, reason="TooManyRequests", message="", method="GET", path=DEPLOY, retry_after=math.inf)
    assert error.retry_after == MAX_RETRY_AFTER
