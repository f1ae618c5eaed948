"""StderrLines: a starting server's stderr as redacted lines for the page (#12 item 4)."""

from __future__ import annotations

import asyncio

from setup_agent.launch.stderr_lines import MAX_LINE_CHARS, StderrLines


def _collect(first: int = 20) -> tuple[StderrLines, list[str], list[float]]:
    sent: list[str] = []
    now = [0.0]

    async def emit(line: str) -> None:
        sent.append(line)

    lines = StderrLines(
        emit, lambda text: text.replace("s3cr3t-value", "[redacted]"), first=first, clock=lambda: now[0]
    )
    return lines, sent, now


def test_a_secret_split_across_chunks_and_past_the_cut_is_redacted_whole() -> None:
    async def main() -> list[str]:
        lines, sent, _ = _collect()
        lines(b"started\nkey=s3cr3t")
        lines(b"-value " + b"x" * MAX_LINE_CHARS + b"\n\n")
        lines(b"no end yet")
        await asyncio.sleep(0)  # let the emit tasks run (no waiting on time)
        lines.close()
        return sent

    sent = asyncio.run(main())
    assert sent[0] == "started"
    assert sent[1].startswith("key=[redacted] x") and len(sent[1]) == MAX_LINE_CHARS
    assert len(sent) == 2 and not any("s3cr3t" in s for s in sent)


def test_after_the_first_lines_only_the_latest_line_is_sent_per_interval() -> None:
    async def main() -> list[str]:
        lines, sent, now = _collect(first=2)
        lines(b"one\ntwo\nthree\nfour\n")  # three and four wait: only four (the latest) may go
        now[0] = 5.0
        lines(b"five\n")
        await asyncio.sleep(0)
        lines.close()
        return sent

    assert asyncio.run(main()) == ["one", "two", "five"]
