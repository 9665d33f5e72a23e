"""The group coordinator: membership (:mod:`.coordinator`) and committed offsets (:mod:`.offsets`)."""

from __future__ import annotations

from .coordinator import GroupCoordinator, GroupState
from .offsets import OFFSETS_TOPIC, CommittedOffset, GroupOffsetStore

__all__ = ["OFFSETS_TOPIC", "CommittedOffset", "GroupCoordinator", "GroupOffsetStore", "GroupState"]
