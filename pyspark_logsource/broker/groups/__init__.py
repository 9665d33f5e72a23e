"""The group coordinator: membership (:mod:`.coordinator`, its rebalances in
:mod:`.rebalance`), committed offsets (:mod:`.offsets`) and which
groups this broker coordinates (:mod:`.ownership`: in a cluster, those of the ``__consumer_offsets``
partitions it leads)."""

from __future__ import annotations

from .coordinator import GroupCoordinator, GroupState
from .offsets import OFFSETS_TOPIC, CommittedOffset, GroupOffsetStore

__all__ = ["OFFSETS_TOPIC", "CommittedOffset", "GroupCoordinator", "GroupOffsetStore", "GroupState"]
