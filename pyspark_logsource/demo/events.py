"""A fast, vectorized generator of realistic web activity events (page views).

Every column is drawn with numpy and every JSON value is assembled with one
Arrow string kernel per chunk, so a million events take about a second and no
Python code runs per event. What makes the data realistic enough to query:

* users follow a Zipf-like law (a few heavy users, a long tail), pages too;
* referrers are mostly internal pages, then search engines, social sites and
  direct traffic; user agents are a weighted mix of real browser strings;
* timestamps cover a recent window with a daily-traffic-like wave and short
  bursts, and are non-decreasing across chunks (as a live site would log them).

The key of each record is the user id, so a user's events land in one partition.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: Arrow schema of the tables produced here (what ``Producer.send_arrow`` takes).
EVENT_SCHEMA = pa.schema(
    [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("timestamp", pa.timestamp("ms")),
    ]
)

#: The JSON fields of a value, as a Spark DDL schema for ``from_json``.
VALUE_DDL = (
    "event STRING, user_id STRING, page STRING, referrer STRING, user_agent STRING, "
    "country STRING, duration_ms INT, ts LONG"
)

_SECTIONS = [
    ("/", 1),
    ("/search", 1),
    ("/cart", 1),
    ("/checkout", 1),
    ("/login", 1),
    ("/account", 1),
    ("/products/", 120),
    ("/category/", 24),
    ("/blog/", 40),
    ("/help/", 14),
]
_CATEGORIES = ["shoes", "shirts", "jackets", "bags", "watches", "hats", "socks", "jeans"]
_EXTERNAL_REFERRERS = [
    ("https://www.google.com/", 0.55),
    ("https://www.bing.com/", 0.07),
    ("https://duckduckgo.com/", 0.05),
    ("https://t.co/", 0.06),
    ("https://www.facebook.com/", 0.08),
    ("https://www.reddit.com/", 0.05),
    ("https://news.ycombinator.com/", 0.02),
    ("https://newsletter.example.com/", 0.12),
]
_USER_AGENTS = [
    (
        "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0 Safari/537.36",
        0.38,
    ),
    (
        "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1",
        0.22,
    ),
    (
        "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0 Mobile Safari/537.36",
        0.14,
    ),
    (
        "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_4) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Safari/605.1.15",
        0.11,
    ),
    ("Mozilla/5.0 (X11; Linux x86_64; rv:125.0) Gecko/20100101 Firefox/125.0", 0.06),
    (
        "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0 Safari/537.36 Edg/124.0",
        0.06,
    ),
    ("Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", 0.03),
]
_COUNTRIES = [
    ("US", 0.34),
    ("DE", 0.09),
    ("GB", 0.08),
    ("IN", 0.08),
    ("FR", 0.06),
    ("BR", 0.05),
    ("JP", 0.05),
    ("CA", 0.04),
    ("NL", 0.03),
    ("ES", 0.03),
    ("AU", 0.03),
    ("PL", 0.02),
    ("SE", 0.02),
    ("MX", 0.08),
]


def _pages() -> list[str]:
    pages: list[str] = []
    for prefix, count in _SECTIONS:
        if count == 1:
            pages.append(prefix)
        elif prefix == "/category/":
            pages += [
                f"/category/{c}?page={n}"
                for n in range(1, count // len(_CATEGORIES) + 1)
                for c in _CATEGORIES
            ]
        else:
            pages += [f"{prefix}{i:04d}" for i in range(1, count + 1)]
    return pages


def zipf_weights(n: int, s: float) -> np.ndarray:
    """Probabilities of ranks 1..n under a Zipf law with exponent ``s``."""
    w = 1.0 / np.arange(1, n + 1, dtype=np.float64) ** s
    return w / w.sum()


def _sampler(p: np.ndarray) -> np.ndarray:
    cdf = np.cumsum(p)
    cdf[-1] = 1.0  # guard against float round-off leaving a gap at the top
    return cdf


@dataclass
class EventGenerator:
    """Generates page-view events as Arrow tables (``key``, ``value``, ``timestamp``).

    ``start_ms``/``window_ms`` bound the timestamps (default: the hour before now);
    the same ``seed`` gives the same events.
    """

    users: int = 50_000
    seed: int = 42
    start_ms: int | None = None
    window_ms: int = 3_600_000
    user_skew: float = 1.05
    page_skew: float = 1.2
    _rng: np.random.Generator = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.users < 1:
            raise ValueError("users must be >= 1")
        if self.window_ms < 1:
            raise ValueError("window_ms must be >= 1")
        self._rng = np.random.default_rng(self.seed)
        if self.start_ms is None:
            self.start_ms = int(time.time() * 1000) - self.window_ms
        # Popularity rank is shuffled over ids so heavy users are not simply the small ids.
        ids = self._rng.permutation(self.users) + 100_000
        self._user_vocab = pc.binary_join_element_wise("u", pc.cast(pa.array(ids), pa.string()), "")
        self._grid = self._intensity_cdf()
        self._user_cdf = _sampler(zipf_weights(self.users, self.user_skew))
        pages = _pages()
        tail = pages[6:]  # the fixed site pages stay the most popular; the rest get random ranks
        self._rng.shuffle(tail)
        pages = pages[:6] + tail
        self._page_vocab = pa.array(pages)
        self._page_cdf = _sampler(zipf_weights(len(pages), self.page_skew))
        ext = [r for r, _ in _EXTERNAL_REFERRERS]
        ext_p = np.array([w for _, w in _EXTERNAL_REFERRERS])
        # Referrer vocabulary: direct (empty), external sites, then the site's own pages.
        self._ref_vocab = pa.array([""] + ext + [f"https://shop.example.com{p}" for p in pages[:40]])
        ref_p = np.concatenate([[0.18], 0.27 * ext_p / ext_p.sum(), 0.55 * zipf_weights(40, 1.0)])
        self._ref_cdf = _sampler(ref_p / ref_p.sum())
        self._ua_vocab = pa.array([u for u, _ in _USER_AGENTS])
        ua_p = np.array([w for _, w in _USER_AGENTS])
        self._ua_cdf = _sampler(ua_p / ua_p.sum())
        self._country_vocab = pa.array([c for c, _ in _COUNTRIES])
        c_p = np.array([w for _, w in _COUNTRIES])
        self._country_cdf = _sampler(c_p / c_p.sum())

    def _pick(self, vocab: pa.Array, cdf: np.ndarray, n: int) -> pa.Array:
        idx = np.searchsorted(cdf, self._rng.random(n), side="right")
        return vocab.take(pa.array(np.minimum(idx, len(cdf) - 1)))

    def _intensity_cdf(self) -> tuple[np.ndarray, np.ndarray, float]:
        # Traffic over the window on ~1 s bins: a slow wave plus a few short bursts,
        # so that the events-per-minute curve has a shape.
        bins = int(min(max(self.window_ms // 1000, 1), 100_000))
        width = self.window_ms / bins
        phase = np.arange(bins) / bins
        intensity = (
            1.0
            + 0.45 * np.sin(2 * np.pi * (phase * 1.5 + 0.1))
            + 0.8 * (np.sin(2 * np.pi * phase * 11) > 0.95)
        )
        return self.start_ms + np.arange(bins) * width, _sampler(intensity / intensity.sum()), width

    def timestamps(self, n: int, q_lo: float = 0.0, q_hi: float = 1.0) -> np.ndarray:
        """``n`` sorted timestamps (ms) between the ``q_lo`` and ``q_hi`` quantiles of the window's traffic."""
        edges, cdf, width = self._grid
        u = q_lo + self._rng.random(n) * (q_hi - q_lo)
        u.sort()
        b = np.minimum(np.searchsorted(cdf, u, side="right"), len(cdf) - 1)
        prev = np.where(b > 0, cdf[np.maximum(b - 1, 0)], 0.0)
        # Position inside the bin follows u, which keeps the output sorted.
        frac = np.clip((u - prev) / np.maximum(cdf[b] - prev, 1e-300), 0.0, 1.0 - 1e-9)
        return (edges[b] + frac * width).astype(np.int64)

    def chunk(
        self, n: int, q_lo: float = 0.0, q_hi: float = 1.0, *, timestamps: np.ndarray | None = None
    ) -> pa.Table:
        """One table of ``n`` events, timestamps between traffic quantiles ``q_lo`` and ``q_hi``
        of the window (or the given ``timestamps``, ms, e.g. "now" for a live producer)."""
        rng = self._rng
        users = self._pick(self._user_vocab, self._user_cdf, n)
        pages = self._pick(self._page_vocab, self._page_cdf, n)
        refs = self._pick(self._ref_vocab, self._ref_cdf, n)
        uas = self._pick(self._ua_vocab, self._ua_cdf, n)
        countries = self._pick(self._country_vocab, self._country_cdf, n)
        duration = np.minimum(rng.lognormal(8.5, 1.0, n), 3_600_000).astype(np.int64)
        ts = self.timestamps(n, q_lo, q_hi) if timestamps is None else np.asarray(timestamps, dtype=np.int64)
        if len(ts) != n:
            raise ValueError(f"{len(ts)} timestamps for {n} events")
        # Vocabularies hold no quote or backslash, so plain concatenation is valid JSON.
        value = pc.binary_join_element_wise(
            '{"event":"page_view","user_id":"',
            users,
            '","page":"',
            pages,
            '","referrer":"',
            refs,
            '","user_agent":"',
            uas,
            '","country":"',
            countries,
            '","duration_ms":',
            pc.cast(pa.array(duration), pa.string()),
            ',"ts":',
            pc.cast(pa.array(ts), pa.string()),
            "}",
            "",
        )
        return pa.table(
            [users.cast(pa.binary()), value.cast(pa.binary()), pa.array(ts, pa.timestamp("ms"))],
            schema=EVENT_SCHEMA,
        )

    def chunks(self, total: int, chunk_size: int = 100_000) -> Iterator[pa.Table]:
        """``total`` events in tables of at most ``chunk_size``, covering the window in time order."""
        if total < 0 or chunk_size < 1:
            raise ValueError("total must be >= 0 and chunk_size >= 1")
        done = 0
        while done < total:
            n = min(chunk_size, total - done)
            yield self.chunk(n, done / total, (done + n) / total)
            done += n


def live_chunk(gen: EventGenerator, n: int, now_ms: int | None = None, spread_ms: int = 1000) -> pa.Table:
    """``n`` events that happened in the ``spread_ms`` before ``now_ms`` (default: now)."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    ts = np.sort(now - (gen._rng.random(n) * spread_ms).astype(np.int64))
    return gen.chunk(n, timestamps=ts)


def generate(n: int, *, seed: int = 42, start_ms: int | None = None, window_ms: int = 3_600_000) -> pa.Table:
    """``n`` page-view events as one Arrow table (see :class:`EventGenerator`)."""
    gen = EventGenerator(seed=seed, start_ms=start_ms, window_ms=window_ms)
    parts = list(gen.chunks(n))
    return pa.concat_tables(parts) if parts else EVENT_SCHEMA.empty_table()
