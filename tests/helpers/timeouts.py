"""One scale factor for every hang guard in the tests (issue #27).

A wait in a test that only guards against a hang (a subprocess that should exit, a page that
should show a line, a probe deadline handed to the product) takes its bound from
:func:`scaled`, so a busy machine can raise them all at once::

    MCP_SETUP_TEST_TIMEOUT_SCALE=3 ./scripts/test.sh      # every bound three times as long

``scripts/test.sh --under-load`` raises it unless it is set. pytest-timeout's per-test bound
(``timeout`` in pyproject.toml) is scaled by the same factor (tests/conftest.py). Deliberately
short timeouts that a test *wants* to fire (``timeout=0.2`` to see a cut-off happen) are not
hang guards and stay as they are. Nothing in the tests asserts on wall time.

The factor is read once, at import: the isolation fixture clears every ``MCP_SETUP_*``
variable before each test.
"""

from __future__ import annotations

import os

__all__ = ["SCALE", "scaled"]

ENV = "MCP_SETUP_TEST_TIMEOUT_SCALE"


def _scale() -> float:
    raw = os.environ.get(ENV, "").strip()
    if not raw:
        return 1.0
    try:
        value = float(raw)
    except ValueError:
        raise SystemExit(f"{ENV}={raw!r} is not a number (e.g. 1, 2.5, 3)") from None
    if not value >= 1.0:  # also refuses NaN
        raise SystemExit(f"{ENV}={raw!r}: the factor only raises the bounds (1 or more)")
    return value


#: How much longer than on an idle machine every hang guard waits (1: as written).
SCALE = _scale()


def scaled(seconds: float) -> float:
    """``seconds`` times the scale factor: the bound of a wait that guards against a hang."""
    return seconds * SCALE
