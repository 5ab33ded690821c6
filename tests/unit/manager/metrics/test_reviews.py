"""The review bodies the API server gets and how its answers are read (manager.metrics.reviews, pure)."""

from __future__ import annotations

import pytest

from webserver_operator.manager.metrics.reviews import (
    Decision,
    UserInfo,
    access_decision,
    access_review,
    authenticated_user,
    bearer_token,
    token_review,
)


@pytest.mark.parametrize(
    ("header", "token"),
    [
        ("Bearer abc.def", "abc.def"),
        ("bearer abc", "abc"),  # the scheme is case-insensitive
        ("  Bearer abc  ", "abc"),
        (None, None),
        ("", None),
        ("Basic dXNlcjpwYXNz", None),  # another scheme is no token: 401, not an error
        ("Bearer", None),
        ("Bearer  abc", None),  # k8s.io/apiserver: a space before the token leaves it empty
    ],
)
def test_bearer_token_follows_the_api_servers_rules(header: str | None, token: str | None) -> None:
    assert bearer_token(header) == token


def test_token_review_asks_about_the_token_with_the_api_servers_own_audiences() -> None:
    assert token_review("t0k") == {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "spec": {"token": "t0k"},
    }


def test_an_authenticated_answer_names_the_user_with_groups_and_extra() -> None:
    answer = {
        "status": {
            "authenticated": True,
            "user": {
                "username": "system:serviceaccount:monitoring:prometheus",
                "uid": "u-1",
                "groups": ["system:serviceaccounts", "system:authenticated"],
                "extra": {"authentication.kubernetes.io/pod-name": ["prometheus-0"]},
            },
        }
    }
    assert authenticated_user(answer) == UserInfo(
        name="system:serviceaccount:monitoring:prometheus",
        uid="u-1",
        groups=("system:serviceaccounts", "system:authenticated"),
        extra=(("authentication.kubernetes.io/pod-name", ("prometheus-0",)),),
    )


@pytest.mark.parametrize(
    "answer",
    [
        {},
        {"status": {}},
        {"status": {"authenticated": False, "error": "token expired"}},
        {"status": {"authenticated": "true"}},
    ],
)
def test_anything_but_authenticated_true_is_no_user(answer: dict[str, object]) -> None:
    assert authenticated_user(answer) is None


def test_access_review_asks_for_the_non_resource_url_with_the_whole_identity() -> None:
    user = UserInfo(name="alice", uid="u-2", groups=("devs",), extra=(("scopes", ("a", "b")),))
    assert access_review(user, verb="get", path="/metrics") == {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": "alice",
            "groups": ["devs"],
            "uid": "u-2",
            "extra": {"scopes": ["a", "b"]},
            "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
        },
    }
    bare = access_review(UserInfo(name="bob"), verb="get", path="/metrics")["spec"]
    assert "uid" not in bare and "extra" not in bare


@pytest.mark.parametrize(
    ("status", "decision"),
    [
        (
            {"allowed": True, "reason": "RBAC: allowed by ClusterRoleBinding"},
            Decision(True, "RBAC: allowed by ClusterRoleBinding"),
        ),
        ({"allowed": False, "denied": True, "reason": "no"}, Decision(False, "no")),
        ({"allowed": False}, Decision(False, "")),  # no opinion refuses too
        ({"allowed": False, "evaluationError": "webhook down"}, Decision(False, "webhook down")),
    ],
)
def test_access_is_allowed_only_when_the_answer_says_so(status: dict[str, object], decision: Decision) -> None:
    assert access_decision({"status": status}) == decision
