"""Hypothesis profiles for the reliability fuzz tests (``tests/parsing/test_fuzz.py``).

``make fuzz`` sets ``HYPOTHESIS_PROFILE=fuzz`` and gets the long runs; otherwise the short
ones run in ``make test``. The profiles are applied with ``@settings(PROFILE)`` on each test,
so they do not change other modules' hypothesis settings. ``HEAVY`` is for properties that
push a megabyte through the whole agent per example.
"""

from __future__ import annotations

import json
import os

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example]

EXAMPLES = {"default": 200, "fuzz": 10_000}
HEAVY_EXAMPLES = {"default": 5, "fuzz": 100}

_name = "fuzz" if os.environ.get("HYPOTHESIS_PROFILE") == "fuzz" else "default"

settings.register_profile(
    "reliability-" + _name,
    max_examples=EXAMPLES[_name],
    deadline=None,
    suppress_health_check=_SLOW_OK,
)
settings.register_profile(
    "reliability-heavy-" + _name,
    max_examples=HEAVY_EXAMPLES[_name],
    deadline=None,
    suppress_health_check=_SLOW_OK,
)
PROFILE = settings.get_profile("reliability-" + _name)
HEAVY = settings.get_profile("reliability-heavy-" + _name)

JSON_TEXT = st.text(alphabet=st.sampled_from("ab é\"\\'{}[](),:\n\t<>|`"), max_size=8)
"""Short strings full of the characters that break JSON and the call readers."""
JSON_VALUE = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-1000, 10**20),
        st.floats(allow_nan=True, allow_infinity=True),
        JSON_TEXT,
    ),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(JSON_TEXT, inner, max_size=3),
    max_leaves=6,
)
"""Small JSON values (NaN and infinities included) for generated call arguments."""


def json_members(draw: st.DrawFn, pairs: list[tuple[str, str]]) -> str:
    """An object's text from its members' texts (key, value text), a key now and then
    written twice, spaced as drawn."""
    if draw(st.integers(0, 5)) == 0 and pairs:
        pairs = [*pairs, draw(st.sampled_from(pairs))]  # a key written twice
    space = draw(st.sampled_from(["", " ", "\n  "]))
    return "{" + space + ("," + space).join(f"{json.dumps(k)}: {v}" for k, v in pairs) + "}"
