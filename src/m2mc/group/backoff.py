"""The random back-off before a message that others may send too and that one copy
of serves everybody: a NACK (group/repair.py), a sync response (group/msp.py), a
membership-news status (group/status_clock.py), an advertisement reply (group/gjlp.py).

Each member that wants to send it waits a random time and sends only if it has not
heard another's copy meanwhile. Uniform waits serve a few members well, but the number
of copies sent grows with the number of members that draw: about one per propagation
delay's worth of the back-off window. Reliable-multicast work (Nonnenmacher and
Biersack, "Scalable feedback for large groups"; NORM, RFC 5740, takes their timer)
showed that a truncated exponential, whose parameter grows with the log of the group's
size, keeps the expected number of copies near one at any size: few members draw
early, and the first copy usually reaches the others before their timers run out.
docs/decisions.md, "Feedback back-off grows with the group".
"""

from __future__ import annotations

import math
import random

__all__ = ["suppression_backoff"]


def suppression_backoff(rng: random.Random, limit: float, group_size: int,
                        uniform_up_to: int, widen: bool = False) -> float:
    """A back-off: uniform in ``[0, limit]`` in a group of up to ``uniform_up_to``
    members (as before, and as the seeds have it); in a larger one drawn from the
    truncated exponential with parameter ``lam = ln(group_size) + 1`` over
    ``[0, limit]``, or (``widen``) over ``[0, limit * lam]`` (100 members: 5.6 times
    as wide, 1,000: 7.9), for a ``limit`` only a few propagation delays wide."""
    if group_size <= uniform_up_to or limit <= 0.0:
        return rng.uniform(0.0, limit)
    lam = math.log(group_size) + 1.0
    if widen:
        # The exponential's scale (limit / lam) must stay several propagation delays
        # wide, or the early draws cannot hear each other.
        limit *= lam
    spread = math.exp(lam) - 1.0
    # The inverse of the truncated exponential's distribution function at a uniform
    # point: x * spread * limit / lam runs over [1, e^lam], so the result over [0, limit].
    x = rng.uniform(0.0, lam / limit) + lam / (limit * spread)
    return min(limit, max(0.0, (limit / lam) * math.log(x * spread * limit / lam)))
