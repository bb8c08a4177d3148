"""Settings for the whole suite.

Hypothesis's default 200 ms deadline per example is a timing assertion: on a shared,
loaded machine an example that takes 1 ms can take 250 ms once, and the test fails
for nothing it checks. The suite asserts behaviour, never speed, so no example has a
deadline (bench/ measures speed)."""

from hypothesis import settings

settings.register_profile("m2mc", deadline=None)
settings.load_profile("m2mc")
