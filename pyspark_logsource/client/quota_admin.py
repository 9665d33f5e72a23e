"""Client-quota administration for :class:`~.admin.Admin`, as Kafka's Admin does it (KIP-546):
DescribeClientQuotas (48) and AlterClientQuotas (49), sent to any broker (in a cluster the broker that gets
an alteration writes it to ZooKeeper and every broker applies it)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from ..errors import error_for_code
from ..protocol import quota_messages as qm

if TYPE_CHECKING:
    from .network import NetworkClient


class QuotaAdmin:
    """The client-quota methods of Admin (needs ``_client``)."""

    _client: NetworkClient

    def describe_client_quotas(
        self, components: Sequence[qm.QuotaFilterComponent] = (), strict: bool = False
    ) -> list[qm.QuotaEntry]:
        """The quota entities the filter matches, each with its values (no component: every entity).
        A refused filter raises its typed error (InvalidRequest, UnsupportedVersion)."""
        resp = self._client.request(qm.DescribeClientQuotasRequest(list(components), strict))
        if resp.error_code:
            raise error_for_code(resp.error_code, resp.error_message or "cannot describe client quotas")
        return list(resp.entries or [])

    def alter_client_quotas(
        self, alterations: Mapping[qm.Entity, Mapping[str, float | None]], validate_only: bool = False
    ) -> None:
        """Set (a number) or remove (None) quota values of each entity; an entity is
        ``(("user", name), ("client-id", name))`` (a part may be left out; name None: the default).
        The first refused entity raises its typed error (the others are applied)."""
        entries = [
            qm.QuotaAlteration(
                tuple(entity),
                [qm.QuotaOp(k, 0.0, True) if v is None else qm.QuotaOp(k, float(v)) for k, v in ops.items()],
            )
            for entity, ops in alterations.items()
        ]
        resp = self._client.request(qm.AlterClientQuotasRequest(entries, validate_only))
        for r in resp.entries:
            if r.error_code:
                raise error_for_code(
                    r.error_code, r.error_message or f"cannot alter the quotas of {r.entity}"
                )
