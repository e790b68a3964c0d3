"""Tokens and ACL files, and the decisions they lead to (no broker)."""

from __future__ import annotations

import pytest

from coordinator.service.auth import ANONYMOUS, AuthError, Authorizer, ConfigError, Operation, parse_acls, parse_tokens

TOKENS = "# who\nt-alice alice\nt-ops   ops  # operators\n\nt-any  anyone\n"
ACLS = """
alice   Read          connect-a*
ops     Alter,Delete  *
*       Describe      public-*
"""


def _authorizer(**kw) -> Authorizer:  # noqa: ANN003
    return Authorizer(parse_tokens(TOKENS), parse_acls(ACLS), **kw)


def test_tokens_name_principals() -> None:
    a = _authorizer()
    assert a.authenticate("Bearer t-alice") == "alice"
    assert a.authenticate("bearer   t-ops") == "ops"
    for header in (None, "", "Bearer", "Bearer nope", "Basic dC1hbGljZQ==", "t-alice"):
        with pytest.raises(AuthError) as e:
            a.authenticate(header)
        assert e.value.status == 401


def test_anonymous_only_when_allowed() -> None:
    assert _authorizer(allow_anonymous=True).authenticate(None) == ANONYMOUS
    # A wrong token is refused even when anonymous access is on: a typo must not downgrade silently.
    with pytest.raises(AuthError):
        _authorizer(allow_anonymous=True).authenticate("Bearer typo")


@pytest.mark.parametrize(
    ("principal", "operation", "group", "allowed"),
    [
        ("alice", Operation.READ, "connect-a1", True),
        ("alice", Operation.DESCRIBE, "connect-a1", True),  # implied by Read
        ("alice", Operation.READ, "connect-b", False),
        ("alice", Operation.ALTER, "connect-a1", False),
        ("ops", Operation.ALTER, "anything", True),
        ("ops", Operation.DELETE, "anything", True),
        ("ops", Operation.READ, "anything", False),
        ("anyone", Operation.DESCRIBE, "public-x", True),
        ("anyone", Operation.READ, "public-x", False),
        (ANONYMOUS, Operation.DESCRIBE, "connect-a1", False),
    ],
)
def test_acls(principal: str, operation: Operation, group: str, allowed: bool) -> None:
    a = _authorizer()
    assert a.allowed(principal, operation, group) is allowed
    if not allowed:
        with pytest.raises(AuthError) as e:
            a.authorize(principal, operation, group)
        assert e.value.status == 403 and group in str(e.value)


def test_without_acls_every_authenticated_principal_may_do_everything() -> None:
    a = Authorizer(parse_tokens(TOKENS), None)
    assert all(a.allowed("alice", op, "g") for op in Operation)


@pytest.mark.parametrize(
    ("text", "parser", "line"),
    [
        ("t1 alice\nt2\n", parse_tokens, ":2:"),
        ("t1 alice\nt1 bob\n", parse_tokens, ":2:"),
        ("alice Read\n", parse_acls, ":1:"),
        ("\nalice Write g\n", parse_acls, ":2:"),
    ],
)
def test_malformed_files_name_the_line(text: str, parser, line: str) -> None:  # noqa: ANN001
    with pytest.raises(ConfigError) as e:
        parser(text, "f")
    assert str(e.value).startswith("f" + line)


def test_no_way_in_is_refused_at_start(tmp_path) -> None:  # noqa: ANN001
    with pytest.raises(ConfigError, match="--allow-anonymous"):
        Authorizer.from_files(None, None, allow_anonymous=False)
    with pytest.raises(ConfigError, match="cannot read"):
        Authorizer.from_files(tmp_path / "missing", None, allow_anonymous=False)
