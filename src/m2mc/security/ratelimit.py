"""Token-bucket rate limiting of control traffic, per sender and in total (sans-IO).

Each sender has a bucket of ``burst`` tokens refilled at ``rate`` tokens per
second; a message costs one token (or ``cost``). A second bucket caps all
senders together (``total_rate``/``total_burst``), so a flood that forges a new
sender id for every packet is still held to a fixed budget.

The per-sender table holds at most ``max_senders`` entries. Admitting one more
evicts the sender heard least recently; if it comes back it starts with a full
bucket. A full bucket is the same as no entry, so an eviction forgets at most
``burst`` tokens of debt, and the total bucket still holds.

``now`` comes from the caller; the limiter never reads a clock.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from m2mc.errors import ConfigError

__all__ = ["RateLimitConfig", "RateLimitStats", "RateLimiter", "TokenBucket"]


@dataclass(slots=True)
class TokenBucket:
    rate: float
    burst: float
    tokens: float
    stamp: float

    def take(self, now: float, cost: float) -> bool:
        elapsed = now - self.stamp
        if elapsed > 0:
            self.tokens = min(self.burst, self.tokens + elapsed * self.rate)
            self.stamp = now
        if self.tokens >= cost:
            self.tokens -= cost
            return True
        return False


@dataclass(slots=True)
class RateLimitConfig:
    """Defaults allow a chatty member (sync, NACK, status) and stop a flood."""

    rate: float = 50.0  # per-sender messages per second
    burst: float = 100.0
    total_rate: float = 2000.0  # all senders together
    total_burst: float = 4000.0
    max_senders: int = 4096

    def validate(self) -> None:
        for name in ("rate", "burst", "total_rate", "total_burst"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"rate limit {name} must be > 0, got {getattr(self, name)}")
        if self.max_senders < 1:
            raise ConfigError(f"rate limit max_senders must be >= 1, got {self.max_senders}")


@dataclass(slots=True)
class RateLimitStats:
    allowed: int = 0
    limited: int = 0  # refused by the sender's own bucket
    limited_total: int = 0  # refused by the shared bucket
    evictions: int = 0

    def as_dict(self) -> dict[str, object]:
        return {"allowed": self.allowed, "limited": self.limited,
                "limited_total": self.limited_total, "evictions": self.evictions}


class RateLimiter:
    """``allow(sender, now)``: may this sender's control message be processed now?"""

    def __init__(self, config: RateLimitConfig | None = None, *,
                 stats: RateLimitStats | None = None) -> None:
        """``stats``: counters to add to (several limiters may share one)."""
        self.config = config or RateLimitConfig()
        self.config.validate()
        cfg = self.config
        self._buckets: OrderedDict[str, TokenBucket] = OrderedDict()
        self._total: TokenBucket | None = None
        self._total_template = (cfg.total_rate, cfg.total_burst)
        self.stats = stats if stats is not None else RateLimitStats()

    def __len__(self) -> int:
        return len(self._buckets)

    def allow(self, sender: str, now: float, cost: float = 1.0) -> bool:
        cfg = self.config
        stats = self.stats
        buckets = self._buckets
        bucket = buckets.get(sender)
        if bucket is None:
            bucket = TokenBucket(cfg.rate, cfg.burst, cfg.burst, now)
            buckets[sender] = bucket
            if len(buckets) > cfg.max_senders:
                buckets.popitem(last=False)
                stats.evictions += 1
        else:
            buckets.move_to_end(sender)
        total = self._total
        if total is None:
            rate, burst = self._total_template
            total = self._total = TokenBucket(rate, burst, burst, now)
        # Refill the sender's bucket first; only spend the shared budget on a message
        # the sender was entitled to, so one noisy sender cannot drain it for others.
        if not bucket.take(now, cost):
            stats.limited += 1
            return False
        if not total.take(now, cost):
            bucket.tokens += cost  # not processed: give the sender its token back
            stats.limited_total += 1
            return False
        stats.allowed += 1
        return True
