"""Item 11 (#24 item 4): the redactor on a 1 MiB tool result with 20 stored secrets.

``Redactor.redact_obj`` on a proxied result shaped like an installed server's (one 1 MiB text
block of words, numbers and JSON punctuation, plus a small structured part and ``_meta``),
with 20 stored secrets of 8–40 characters registered (every form of each in the automaton),
against ``json.dumps`` of the same result (what every answer costs anyway), interleaved.
Also timed: the same text with one secret planted in it (spaced out, so the located
replacement runs), and the first call after the secrets changed (the automaton rebuilt).
"""

from __future__ import annotations

import argparse
import json
import random
import secrets
import time
from typing import Any

from bench.common import emit, median
from setup_agent.secrets.redact import Redactor

WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "tool",
    "result",
    "the",
    "value",
    "of",
    "some",
    "json",
    '{"a": 1}',
    "\n",
    "2024-05-01",
    "12.5",
    "https://example.org/x",
    "é",
    "你好",
]


def result_of(text: str) -> dict[str, Any]:
    return {
        "content": [{"type": "text", "text": text}],
        "structuredContent": {"rows": [{"id": i, "name": f"row {i}"} for i in range(50)]},
        "_meta": {"took_ms": 12},
        "isError": False,
    }


def main_run(rounds: int) -> dict[str, Any]:
    rng = random.Random(24)
    redactor = Redactor()
    values = [secrets.token_urlsafe(rng.randint(6, 30)) for _ in range(20)]
    for i, value in enumerate(values):
        redactor.register(value, f"[secret:KEY_{i}]")
    text = ""
    parts: list[str] = []
    size = 0
    while size < 1 << 20:
        word = rng.choice(WORDS)
        parts.append(word)
        size += len(word) + 1
    text = " ".join(parts)[: 1 << 20]
    clean = result_of(text)
    planted = result_of(text[: len(text) // 2] + " " + " ".join(values[3]) + " " + text[len(text) // 2 :])
    t0 = time.perf_counter()
    redactor.redact_obj({"warm": "up"})
    build = time.perf_counter() - t0
    times: dict[str, list[float]] = {"redact": [], "json": [], "planted": []}
    for r in range(rounds):
        order = ["redact", "json", "planted"]
        order = order[r % 3 :] + order[: r % 3]
        for what in order:
            t = time.perf_counter()
            if what == "redact":
                out = redactor.redact_obj(clean)
            elif what == "json":
                json.dumps(clean, ensure_ascii=False)
            else:
                out = redactor.redact_obj(planted)
                assert "[secret:KEY_3]" in out["content"][0]["text"]
            times[what].append(time.perf_counter() - t)
    return {
        "section": "redact",
        "secrets": len(values),
        "text_chars": len(text),
        "rounds": rounds,
        "build_s": build,
        "times": {k: {"median": median(v), "min": min(v), "max": max(v), "n": len(v)} for k, v in times.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    emit(main_run(args.rounds))


if __name__ == "__main__":
    main()
