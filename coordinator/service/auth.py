"""Who is calling, and may they touch this group (DESIGN §7, seed 000's "Read Group").

Authentication: a bearer token, looked up in a tokens file (`TOKEN PRINCIPAL` per line). A request
without a token is the principal `ANONYMOUS` when anonymous access is on, and refused (401)
otherwise. Authorization: ACLs (`PRINCIPAL OPERATIONS GROUP-PATTERN` per line) in Kafka's words:

- `Read`: heartbeat, prepare-assignment, install-assignment (the seed's "Read Group");
- `Describe`: find-coordinator, list and describe groups; implied by every other operation, as in
  Kafka, because a member that may heartbeat can see its own group anyway;
- `Alter`: set a group's connectors or config;
- `Delete`: delete a group;
- `All`: everything.

Without an ACL file every authenticated principal may do everything: authentication alone. The
files are read once at start-up; a malformed line stops the start with its file and line number,
because a silently skipped ACL line is a hole.
"""

from __future__ import annotations

import fnmatch
import hmac
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

ANONYMOUS = "ANONYMOUS"


class Operation(Enum):
    READ = "Read"
    DESCRIBE = "Describe"
    ALTER = "Alter"
    DELETE = "Delete"
    ALL = "All"


class AuthError(Exception):
    """A request that must be refused: 401 (who are you?) or 403 (not on this group)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class ConfigError(ValueError):
    """A tokens or ACL file that cannot be used."""


@dataclass(frozen=True)
class Acl:
    principal: str  # a principal name, or "*" for every principal
    operations: frozenset[Operation]
    group_pattern: str  # a shell glob over group ids

    def allows(self, principal: str, operation: Operation, group_id: str) -> bool:
        if self.principal != "*" and self.principal != principal:
            return False
        if not (Operation.ALL in self.operations or operation in self.operations or operation is Operation.DESCRIBE):
            return False
        return fnmatch.fnmatchcase(group_id, self.group_pattern)


class Authorizer:
    """Authenticates requests and checks ACLs. `Authorizer.open()` lets everyone do everything."""

    def __init__(
        self, tokens: dict[str, str] | None = None, acls: Iterable[Acl] | None = None, allow_anonymous: bool = False
    ) -> None:
        self.tokens = dict(tokens or {})
        self.acls = None if acls is None else tuple(acls)
        self.allow_anonymous = allow_anonymous

    @classmethod
    def open(cls) -> Authorizer:
        return cls(allow_anonymous=True)

    @classmethod
    def from_files(
        cls, tokens_file: str | Path | None, acls_file: str | Path | None, allow_anonymous: bool
    ) -> Authorizer:
        tokens = parse_tokens(_read(tokens_file), str(tokens_file)) if tokens_file else {}
        acls = parse_acls(_read(acls_file), str(acls_file)) if acls_file else None
        if not tokens and not allow_anonymous:
            raise ConfigError(
                "no tokens file and anonymous access is off: nobody could call the API "
                "(pass --tokens FILE, or --allow-anonymous for a development setup)"
            )
        return cls(tokens, acls, allow_anonymous)

    def authenticate(self, authorization: str | None) -> str:
        """The principal of a request with this `Authorization` header."""
        if not authorization:
            if self.allow_anonymous:
                return ANONYMOUS
            raise AuthError(401, "a bearer token is required (Authorization: Bearer TOKEN)")
        scheme, _, token = authorization.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise AuthError(401, "the Authorization header must be 'Bearer TOKEN'")
        principal = None
        # Compare against every token so the time taken does not tell how much of a guess matched.
        for known, name in self.tokens.items():
            # surrogateescape: aiohttp decodes a header's non-UTF-8 bytes that way; such a token is
            # simply unknown, never an error.
            if hmac.compare_digest(known.encode(), token.encode("utf-8", "surrogateescape")):
                principal = name
        if principal is None:
            raise AuthError(401, "unknown token")
        return principal

    def allowed(self, principal: str, operation: Operation, group_id: str) -> bool:
        if self.acls is None:
            return True
        return any(acl.allows(principal, operation, group_id) for acl in self.acls)

    def authorize(self, principal: str, operation: Operation, group_id: str) -> None:
        if not self.allowed(principal, operation, group_id):
            raise AuthError(403, f"{principal} may not {operation.value} group {group_id}")


def _read(path: str | Path) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror}") from None


def _lines(text: str) -> Iterable[tuple[int, list[str]]]:
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if line:
            yield number, line.split()


def parse_tokens(text: str, source: str = "tokens") -> dict[str, str]:
    tokens: dict[str, str] = {}
    for number, fields in _lines(text):
        if len(fields) != 2:
            raise ConfigError(f"{source}:{number}: expected 'TOKEN PRINCIPAL'")
        token, principal = fields
        if token in tokens:
            raise ConfigError(f"{source}:{number}: this token is already given to {tokens[token]}")
        tokens[token] = principal
    return tokens


_OPERATIONS = {op.value.lower(): op for op in Operation}


def parse_acls(text: str, source: str = "acls") -> list[Acl]:
    acls = []
    for number, fields in _lines(text):
        if len(fields) != 3:
            raise ConfigError(f"{source}:{number}: expected 'PRINCIPAL OPERATIONS GROUP-PATTERN'")
        principal, operations, pattern = fields
        ops = set()
        for name in operations.split(","):
            op = _OPERATIONS.get(name.strip().lower())
            if op is None:
                raise ConfigError(
                    f"{source}:{number}: unknown operation {name!r} (one of {', '.join(o.value for o in Operation)})"
                )
            ops.add(op)
        acls.append(Acl(principal, frozenset(ops), pattern))
    return acls
