"""The broker's authorization, assembled: the settings (Kafka's names), the :class:`~.model.Authorizer`,
its store and the pipeline step (:class:`~.checks.Enforcer`).

- ``authorizer.class.name``: on when set to Kafka's ``kafka.security.authorizer.AclAuthorizer`` or
  ``org.apache.kafka.metadata.authorizer.StandardAuthorizer`` (any other class is a ConfigError);
- ``super.users``: ``User:admin;User:broker`` (semicolon-separated, as Kafka);
- ``allow.everyone.if.no.acl.found``: false by default.

The store opens with the broker: :meth:`Authorization.open_file` on a single broker,
:meth:`Authorization.open_zk` in cluster mode. Until then every ACL question is answered from an
empty set (only super users pass).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .admin_rules import ALL_RULES
from .checks import Enforcer
from .handlers import AclHandlers
from .model import Authorizer
from .operations import AuthorizedOperations
from .settings import AclSettings
from .store import AclStore, FileAclStore, ZkAclStore

log = logging.getLogger("pyspark_logsource.broker.security")


class Authorization:
    """ACLs of one broker: settings, authorizer, store, the API handlers and the pipeline step."""

    def __init__(self, properties: Mapping[str, str], topics: Callable[[], dict[str, int]]) -> None:
        self.settings = AclSettings.from_properties(properties)
        self.authorizer = Authorizer(self.settings.super_users, self.settings.allow_if_no_acl)
        self.store: AclStore | None = None
        self._topics = topics

    @property
    def enabled(self) -> bool:
        return self.settings.enabled

    def handlers(self) -> AclHandlers:
        return AclHandlers(lambda: self.store, self.enabled)

    def install(self, handlers: Any) -> None:
        """Put the checks in front of ``handlers`` (without an authorizer, none) and the authorized
        operations the responses report (without an authorizer, every operation: Kafka's answer)."""
        if self.enabled:
            Enforcer(self.authorizer, self._topics, ALL_RULES).install(handlers)
            log.info(
                "authorization on: super users %s, allow.everyone.if.no.acl.found=%s",
                ", ".join(sorted(self.settings.super_users)) or "none",
                str(self.settings.allow_if_no_acl).lower(),
            )
        # outside the checks: the entries they answered (denied topics) get their operations too
        AuthorizedOperations(self.authorizer if self.enabled else None).install(handlers)

    def _open(self, store: AclStore) -> None:
        store.on_change = self.authorizer.update
        self.authorizer.update(store.bindings())
        self.store = store

    def open_file(self, directory: Path) -> None:
        if self.enabled:
            self._open(FileAclStore(directory))

    def open_zk(self, zk: Any) -> None:
        if self.enabled:
            if self.store is not None:
                self.store.close()
            self._open(ZkAclStore(zk))

    def close(self) -> None:
        if self.store is not None:
            self.store.close()
