"""The quota measurement settings in Kafka's names (validated when the broker's config loads)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ...errors import ConfigError

QUOTA_DEFAULTS: dict[str, str] = {
    # Kafka's defaults: rates over 11 samples of 1 s
    "quota.window.num": "11",
    "quota.window.size.seconds": "1",
}


@dataclass(frozen=True)
class QuotaSettings:
    """How client rates are measured: ``samples`` windows of ``window_s`` seconds."""

    samples: int = 11
    window_s: float = 1.0

    @classmethod
    def from_properties(cls, p: Mapping[str, str]) -> QuotaSettings:
        """ConfigError naming the key for a value that is not an integer >= 1."""
        values = {}
        for key in QUOTA_DEFAULTS:
            raw = str(p.get(key, QUOTA_DEFAULTS[key])).strip()
            try:
                value = int(raw)
            except ValueError:
                raise ConfigError(f"{key} must be an integer, got {raw!r}") from None
            if value < 1:
                raise ConfigError(f"{key} must be >= 1, got {value}")
            values[key] = value
        return cls(values["quota.window.num"], float(values["quota.window.size.seconds"]))
