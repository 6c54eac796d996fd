"""Hypothesis profiles for the whole suite.

``ci`` (the default) is bounded and derandomized, so that CI runs the same examples every time
and stays fast on 2 cores; ``--hypothesis-profile=long`` is for local soak runs of the stateful
and property tests (random, many more examples, longer sequences). Tests that set their own
``max_examples`` keep it under either profile.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    max_examples=200,
    stateful_step_count=25,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "long",
    max_examples=1000,
    stateful_step_count=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
# The plugin's --hypothesis-profile option, read after this file, overrides the default.
settings.load_profile("ci")
