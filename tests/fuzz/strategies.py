"""Hypothesis strategies for the wire formats: any bytes, any JSON of any depth, and valid
messages with one field replaced by any JSON value."""

from __future__ import annotations

import json
import os
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

# A fixed budget (and a fixed seed, `derandomize`) per parser in `make test`; raise it for a
# longer local hunt: FRAMEFLEET_FUZZ_EXAMPLES=20000 .venv/bin/pytest tests/fuzz
EXAMPLES = int(os.environ.get("FRAMEFLEET_FUZZ_EXAMPLES", "150"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=EXAMPLES <= 1000,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
)
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=30,
)


@st.composite
def deep_nesting(draw: st.DrawFn) -> str:
    """Nesting far past any parser's recursion limit, closed or not."""
    depth = draw(st.integers(min_value=1, max_value=5000))
    opener = draw(st.sampled_from(["[", '{"a":', '{"detail":', '{"recent":[']))
    closed = draw(st.booleans())
    closer = {"[": "]", '{"a":': "}", '{"detail":': "}", '{"recent":[': "]}"}[opener]
    return opener * depth + ("1" + closer * depth if closed else "")


def any_body() -> st.SearchStrategy[str]:
    return st.one_of(
        st.text(max_size=300),
        st.binary(max_size=300).map(lambda raw: raw.decode("utf-8", "replace")),
        json_values.map(lambda value: json.dumps(value)),
        deep_nesting(),
    )


@st.composite
def mutated(draw: st.DrawFn, valid: dict[str, Any]) -> str:
    """`valid` (a JSON object, nested objects included) with one field, at any depth, set to
    any JSON value, or removed."""
    message = json.loads(json.dumps(valid))
    target = message
    while True:
        key = draw(st.sampled_from(sorted(target)))
        if isinstance(target[key], dict) and target[key] and draw(st.booleans()):
            target = target[key]
            continue
        break
    if draw(st.integers(0, 9)) == 0:
        del target[key]
    else:
        target[key] = draw(json_values)
    return json.dumps(message)
