"""Token buckets per sender and in total; bounded table."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from m2mc.errors import ConfigError
from m2mc.security import RateLimitConfig, RateLimiter


def test_burst_then_steady_rate() -> None:
    limiter = RateLimiter(RateLimitConfig(rate=10, burst=5, total_rate=1e6, total_burst=1e6))
    assert [limiter.allow("a", 0.0) for _ in range(7)] == [True] * 5 + [False] * 2
    # 0.1 s refills one token at 10/s.
    assert limiter.allow("a", 0.1) is True
    assert limiter.allow("a", 0.1) is False
    assert limiter.stats.allowed == 6 and limiter.stats.limited == 3


def test_one_noisy_sender_does_not_limit_another() -> None:
    limiter = RateLimiter(RateLimitConfig(rate=1, burst=3, total_rate=1e6, total_burst=1e6))
    for _ in range(100):
        limiter.allow("noisy", 0.0)
    assert limiter.allow("quiet", 0.0) is True


def test_total_bucket_caps_forged_sender_ids() -> None:
    limiter = RateLimiter(RateLimitConfig(rate=100, burst=100, total_rate=10, total_burst=20,
                                          max_senders=50))
    allowed = sum(limiter.allow(f"forged-{i}", 0.0) for i in range(10_000))
    assert allowed == 20
    assert len(limiter) == 50 and limiter.stats.evictions == 10_000 - 50
    assert limiter.stats.limited_total == 10_000 - 20


@settings(max_examples=100, deadline=None)
@given(rate=st.floats(0.5, 100), burst=st.integers(1, 50),
       times=st.lists(st.floats(0, 100), min_size=1, max_size=300))
def test_never_more_than_burst_plus_rate_times_elapsed(rate: float, burst: int,
                                                      times: list[float]) -> None:
    limiter = RateLimiter(RateLimitConfig(rate=rate, burst=burst, total_rate=1e9,
                                          total_burst=1e9))
    times.sort()
    allowed = sum(limiter.allow("s", t) for t in times)
    assert allowed <= burst + rate * (times[-1] - times[0]) + 1e-6


def test_bad_settings() -> None:
    with pytest.raises(ConfigError):
        RateLimiter(RateLimitConfig(rate=0))
    with pytest.raises(ConfigError):
        RateLimiter(RateLimitConfig(max_senders=0))
