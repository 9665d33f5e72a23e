"""The authorization settings in Kafka's names (validated when the broker's config loads)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ....errors import ConfigError

AUTHORIZER_CLASSES = (
    "kafka.security.authorizer.AclAuthorizer",
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "kafka.security.auth.SimpleAclAuthorizer",
)

ACL_DEFAULTS: dict[str, str] = {
    "authorizer.class.name": "",
    "super.users": "",
    "allow.everyone.if.no.acl.found": "false",
}


@dataclass(frozen=True)
class AclSettings:
    enabled: bool = False
    super_users: frozenset[str] = frozenset()
    allow_if_no_acl: bool = False

    @classmethod
    def from_properties(cls, p: Mapping[str, str]) -> AclSettings:
        name = p.get("authorizer.class.name", "").strip()
        if name and name not in AUTHORIZER_CLASSES:
            raise ConfigError(
                f"authorizer.class.name={name} is not supported: use {' or '.join(AUTHORIZER_CLASSES[:2])}"
            )
        users = frozenset(u.strip() for u in p.get("super.users", "").split(";") if u.strip())
        bad = [u for u in users if ":" not in u]
        if bad:
            raise ConfigError(
                f"super.users entries are principals like User:admin, got {', '.join(sorted(bad))}"
            )
        flag = p.get("allow.everyone.if.no.acl.found", "false").strip().lower()
        if flag not in ("true", "false"):
            raise ConfigError(f"allow.everyone.if.no.acl.found must be true or false, got {flag!r}")
        return cls(bool(name), users, flag == "true")
