"""The demo's picture: events per minute, and the streaming query's lag over time."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: the demo runs on machines without a display

import matplotlib.dates as mdates  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402


def plot_demo(
    per_minute: Sequence[tuple[datetime | int, int]],
    lag: Sequence[tuple[float, int]],
    path: str | Path,
    *,
    rates: Sequence[tuple[float, float]] = (),
    topic: str = "",
) -> Path:
    """Write a two-panel PNG to ``path`` and return it.

    ``per_minute``: (minute start as UTC datetime or epoch ms, event count) rows.
    ``lag``: (seconds since the live producer started, records behind the log
    end) samples; ``rates``: (seconds, input rows/s of a micro-batch).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(10, 7.5), constrained_layout=True)
    title = "pyspark-logsource demo" + (f" - topic '{topic}'" if topic else "")
    fig.suptitle(title, fontsize=14, fontweight="bold")

    minutes = [_as_utc(m) for m, _ in per_minute]
    counts = [int(c) for _, c in per_minute]
    if minutes:
        ax1.bar(minutes, counts, width=1 / 1440 * 0.9, align="edge", color="#3b75af")
        ax1.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M"))
    else:
        ax1.text(0.5, 0.5, "no events", ha="center", va="center", transform=ax1.transAxes)
    ax1.set_title("Events per minute (Spark batch query on the topic)")
    ax1.set_xlabel("event time (UTC, HH:MM)")
    ax1.set_ylabel("events per minute")
    ax1.grid(axis="y", alpha=0.3)
    ax1.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:,.0f}"))

    secs = [float(s) for s, _ in lag]
    behind = [int(b) for _, b in lag]
    ax2.set_title("Streaming query vs. a live producer")
    ax2.set_xlabel("time since the live producer started (s)")
    ax2.set_ylabel("lag (records behind the log end)", color="#c0392b")
    if secs:
        ax2.plot(secs, behind, marker="o", markersize=3, color="#c0392b", label="lag (records)")
        ax2.set_ylim(bottom=0)
        ax3 = ax2.twinx()
        ax3.plot(
            [float(t) for t, _ in rates],
            [float(r) for _, r in rates],
            marker="s",
            markersize=4,
            linestyle="--",
            color="#27ae60",
            label="input rate per micro-batch (rows/s)",
        )
        ax3.set_ylabel("input rate (rows/s)", color="#27ae60")
        ax3.set_ylim(bottom=0)
        ax3.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:,.0f}"))
        lines = ax2.get_lines() + ax3.get_lines()
        ax2.legend(lines, [ln.get_label() for ln in lines], loc="upper left", framealpha=0.85)
    else:
        ax2.text(0.5, 0.5, "no progress reported", ha="center", va="center", transform=ax2.transAxes)
    ax2.grid(alpha=0.3)
    ax2.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:,.0f}"))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _as_utc(m: datetime | int) -> datetime:
    if isinstance(m, datetime):
        # Spark hands back naive datetimes in the session time zone (UTC in conf/).
        return m if m.tzinfo else m.replace(tzinfo=timezone.utc)
    return datetime.fromtimestamp(int(m) / 1000, tz=timezone.utc)
