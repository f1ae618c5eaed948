"""PromptBroker: open → answer/cancel/expire, waiting across threads, value-free events."""

from __future__ import annotations

import asyncio
import logging
import re
import threading

import anyio
import pytest

from setup_agent.errors import InvalidInput, PromptAlreadyAnswered, PromptCancelled, PromptNotFound
from setup_agent.secrets.prompts import PendingPrompt, PromptBroker
from setup_agent.secrets.refs import SecretRefStore
from tests.helpers.timeouts import scaled

CANARY = "canary-Zq81-never-leak-7f3e"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def refs() -> SecretRefStore:
    return SecretRefStore()


@pytest.fixture
def broker(refs: SecretRefStore) -> PromptBroker:
    return PromptBroker(refs)


def test_answered_prompt_ref_resolves_to_the_value(broker: PromptBroker, refs: SecretRefStore) -> None:
    prompt = broker.open("API_KEY", "Paste your API key", server="github")
    ref = broker.answer(prompt.prompt_id, CANARY)
    assert ref == prompt.ref
    assert refs.resolve({"API_KEY": ref})["API_KEY"].reveal() == CANARY


def test_open_reserves_a_pending_ref_bound_to_the_key(broker: PromptBroker, refs: SecretRefStore) -> None:
    prompt = broker.open("API_KEY", "Paste your API key")
    assert isinstance(prompt, PendingPrompt)
    assert refs.key_of(prompt.ref) == "API_KEY"
    assert not refs.is_ready(prompt.ref)
    assert prompt.server is None
    assert broker.get(prompt.prompt_id) == prompt
    assert broker.pending() == [prompt]


def test_prompt_id_has_at_least_128_urlsafe_random_bits(broker: PromptBroker) -> None:
    ids = {broker.open("K", "p").prompt_id for _ in range(20)}
    assert len(ids) == 20
    for prompt_id in ids:
        assert re.fullmatch(r"[A-Za-z0-9_-]{22,}", prompt_id)


@pytest.mark.parametrize("text", ["", "   ", "x" * 2001, None])
def test_open_refuses_empty_or_overlong_prompt_text(broker: PromptBroker, text: object) -> None:
    with pytest.raises(InvalidInput):
        broker.open("API_KEY", text)  # type: ignore[arg-type]
    assert broker.pending() == []


def test_open_refuses_a_key_name_that_is_not_a_variable_name(broker: PromptBroker) -> None:
    with pytest.raises(InvalidInput):
        broker.open("not a key!", "Paste it")


def test_answering_twice_is_refused(broker: PromptBroker, refs: SecretRefStore) -> None:
    prompt = broker.open("API_KEY", "Paste it")
    broker.answer(prompt.prompt_id, "first")
    with pytest.raises(PromptAlreadyAnswered):
        broker.answer(prompt.prompt_id, "second")
    assert refs.resolve({"API_KEY": prompt.ref})["API_KEY"].reveal() == "first"
    assert broker.pending() == []


def test_empty_answer_is_refused_and_the_prompt_stays_open(broker: PromptBroker) -> None:
    prompt = broker.open("API_KEY", "Paste it")
    for empty in ("", "  \n"):
        with pytest.raises(InvalidInput):
            broker.answer(prompt.prompt_id, empty)
    assert broker.pending() == [prompt]


def test_unknown_prompt_is_not_found(broker: PromptBroker) -> None:
    with pytest.raises(PromptNotFound):
        broker.answer("nope" * 8, "value")
    with pytest.raises(PromptNotFound):
        broker.get("nope" * 8)
    with pytest.raises(PromptNotFound):
        broker.cancel("nope" * 8)


@pytest.mark.anyio
async def test_cancel_discards_the_ref_and_wait_raises_cancelled(broker: PromptBroker, refs: SecretRefStore) -> None:
    prompt = broker.open("API_KEY", "Paste it")
    broker.cancel(prompt.prompt_id)
    with pytest.raises(PromptCancelled):
        await broker.wait(prompt.prompt_id, timeout=scaled(5))
    assert len(refs) == 0
    with pytest.raises(PromptCancelled):
        broker.answer(prompt.prompt_id, "late")
    broker.cancel(prompt.prompt_id)  # cancelling again is harmless
    assert broker.pending() == []


@pytest.mark.anyio
async def test_cancel_wakes_a_waiting_caller(broker: PromptBroker) -> None:
    prompt = broker.open("API_KEY", "Paste it")
    with anyio.fail_after(scaled(5)):
        async with anyio.create_task_group() as tg:
            outcome: list[BaseException] = []

            async def waiter() -> None:
                try:
                    await broker.wait(prompt.prompt_id, timeout=scaled(5))
                except PromptCancelled as exc:
                    outcome.append(exc)

            tg.start_soon(waiter)
            await anyio.wait_all_tasks_blocked()
            broker.cancel(prompt.prompt_id, "the user changed their mind")
    assert len(outcome) == 1 and "changed their mind" in str(outcome[0])


def test_cancelling_an_answered_prompt_is_refused(broker: PromptBroker, refs: SecretRefStore) -> None:
    prompt = broker.open("API_KEY", "Paste it")
    broker.answer(prompt.prompt_id, "v")
    with pytest.raises(PromptAlreadyAnswered):
        broker.cancel(prompt.prompt_id)
    assert refs.is_ready(prompt.ref)


@pytest.mark.anyio
async def test_wait_times_out_and_leaves_the_prompt_open(broker: PromptBroker) -> None:
    prompt = broker.open("API_KEY", "Paste it")
    with pytest.raises(TimeoutError):
        await broker.wait(prompt.prompt_id, timeout=0.01)
    assert broker.pending() == [prompt]
    broker.answer(prompt.prompt_id, "v")
    assert await broker.wait(prompt.prompt_id, timeout=scaled(5)) == prompt.ref


@pytest.mark.anyio
async def test_answer_from_another_thread_wakes_wait(broker: PromptBroker, refs: SecretRefStore) -> None:
    prompt = broker.open("API_KEY", "Paste it")
    result: list[str] = []
    with anyio.fail_after(scaled(5)):
        async with anyio.create_task_group() as tg:

            async def waiter() -> None:
                result.append(await broker.wait(prompt.prompt_id, timeout=scaled(5)))

            tg.start_soon(waiter)
            await anyio.wait_all_tasks_blocked()
            answering = threading.Thread(target=broker.answer, args=(prompt.prompt_id, "from-a-thread"))
            answering.start()
    answering.join(scaled(5))
    assert result == [prompt.ref]
    assert refs.resolve({"API_KEY": prompt.ref})["API_KEY"].reveal() == "from-a-thread"


def test_wait_on_a_loop_in_another_thread_is_woken_by_answer(broker: PromptBroker) -> None:
    prompt = broker.open("API_KEY", "Paste it")
    registered = threading.Event()
    result: list[object] = []

    async def waiter() -> None:
        task = asyncio.ensure_future(broker.wait(prompt.prompt_id, timeout=scaled(5)))
        await asyncio.sleep(0)  # let wait() register itself
        registered.set()
        result.append(await task)

    thread = threading.Thread(target=lambda: asyncio.run(waiter()))
    thread.start()
    assert registered.wait(scaled(5))
    broker.answer(prompt.prompt_id, "v")
    thread.join(scaled(5))
    assert not thread.is_alive()
    assert result == [prompt.ref]


@pytest.mark.anyio
async def test_wait_returns_at_once_when_already_answered(broker: PromptBroker) -> None:
    prompt = broker.open("API_KEY", "Paste it")
    broker.answer(prompt.prompt_id, "v")
    with anyio.fail_after(scaled(5)):
        assert await broker.wait(prompt.prompt_id, timeout=scaled(5)) == prompt.ref


def test_events_announce_request_and_done_and_never_hold_the_value(broker: PromptBroker) -> None:
    events: list[dict] = []
    broker.subscribe(events.append)
    first = broker.open("API_KEY", "Paste your key", server="github")
    broker.answer(first.prompt_id, CANARY)
    second = broker.open("TOKEN", "Paste your token")
    broker.cancel(second.prompt_id)
    assert events == [
        {
            "type": "secret_request",
            "prompt_id": first.prompt_id,
            "key_name": "API_KEY",
            "prompt": "Paste your key",
            "server": "github",
        },
        {"type": "secret_done", "prompt_id": first.prompt_id, "key_name": "API_KEY", "status": "answered"},
        {
            "type": "secret_request",
            "prompt_id": second.prompt_id,
            "key_name": "TOKEN",
            "prompt": "Paste your token",
            "server": None,
        },
        {"type": "secret_done", "prompt_id": second.prompt_id, "key_name": "TOKEN", "status": "cancelled"},
    ]
    assert CANARY not in repr(events)
    assert first.ref not in repr(events)


def test_a_failing_subscriber_is_logged_and_does_not_break_the_broker(
    broker: PromptBroker, refs: SecretRefStore, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[dict] = []

    def broken(event: dict) -> None:
        raise RuntimeError("subscriber bug")

    broker.subscribe(broken)
    broker.subscribe(seen.append)
    with caplog.at_level(logging.DEBUG):
        prompt = broker.open("API_KEY", "Paste it")
        ref = broker.answer(prompt.prompt_id, CANARY)
    assert [e["type"] for e in seen] == ["secret_request", "secret_done"]
    assert refs.is_ready(ref)
    assert any("subscriber failed" in r.getMessage() for r in caplog.records)
    assert all(CANARY not in r.getMessage() and CANARY not in (r.exc_text or "") for r in caplog.records)


def test_unsubscribe_stops_events(broker: PromptBroker) -> None:
    seen: list[dict] = []
    unsubscribe = broker.subscribe(seen.append)
    broker.open("API_KEY", "Paste it")
    unsubscribe()
    broker.open("API_KEY", "Paste it")
    assert len(seen) == 1


@pytest.mark.anyio
async def test_a_subscriber_bound_to_a_loop_gets_events_there_even_from_another_thread(broker: PromptBroker) -> None:
    loop = asyncio.get_running_loop()
    got: asyncio.Queue[tuple[dict, bool]] = asyncio.Queue()

    async def on_event(event: dict) -> None:
        got.put_nowait((event, asyncio.get_running_loop() is loop))

    broker.subscribe(on_event, loop=loop)
    opening = threading.Thread(target=broker.open, args=("API_KEY", "Paste it"))
    opening.start()
    with anyio.fail_after(scaled(5)):
        event, on_loop = await got.get()
    opening.join(scaled(5))
    assert event["type"] == "secret_request" and on_loop


def test_expired_prompt_cannot_be_answered_and_says_ask_again() -> None:
    clock = FakeClock()
    refs = SecretRefStore(ttl_seconds=60, timer=clock)
    broker = PromptBroker(refs, timer=clock)
    events: list[dict] = []
    broker.subscribe(events.append)
    prompt = broker.open("API_KEY", "Paste it")
    clock.now += 59
    assert broker.pending() == [prompt]
    clock.now += 2
    with pytest.raises(PromptNotFound) as err:
        broker.answer(prompt.prompt_id, CANARY)
    assert "expired" in err.value.message and "again" in err.value.message
    assert broker.pending() == []
    assert len(refs) == 0
    assert events[-1] == {
        "type": "secret_done",
        "prompt_id": prompt.prompt_id,
        "key_name": "API_KEY",
        "status": "expired",
    }


def test_broker_ttl_can_be_shorter_than_the_store_ttl() -> None:
    clock = FakeClock()
    refs = SecretRefStore(ttl_seconds=900, timer=clock)
    broker = PromptBroker(refs, timer=clock, ttl_seconds=30)
    prompt = broker.open("API_KEY", "Paste it")
    clock.now += 31
    with pytest.raises(PromptNotFound, match="expired"):
        broker.get(prompt.prompt_id)
    assert len(refs) == 0  # the reserved ref went with the prompt


def test_expiry_in_the_store_first_still_reads_as_expired() -> None:
    clock = FakeClock()
    refs = SecretRefStore(ttl_seconds=10, timer=clock)
    broker = PromptBroker(refs, timer=clock, ttl_seconds=100)
    prompt = broker.open("API_KEY", "Paste it")
    clock.now += 11
    with pytest.raises(PromptNotFound, match="expired"):
        broker.answer(prompt.prompt_id, "v")


@pytest.mark.anyio
async def test_a_waiter_is_told_when_its_prompt_expires() -> None:
    clock = FakeClock()
    broker = PromptBroker(SecretRefStore(ttl_seconds=60, timer=clock), timer=clock)
    prompt = broker.open("API_KEY", "Paste it")
    outcome: list[BaseException] = []
    with anyio.fail_after(scaled(5)):
        async with anyio.create_task_group() as tg:

            async def waiter() -> None:
                try:
                    await broker.wait(prompt.prompt_id, timeout=scaled(5))
                except PromptNotFound as exc:
                    outcome.append(exc)

            tg.start_soon(waiter)
            await anyio.wait_all_tasks_blocked()
            clock.now += 61
            assert broker.pending() == []  # any call sweeps expired prompts
    assert len(outcome) == 1 and "expired" in str(outcome[0])
    with pytest.raises(PromptNotFound, match="expired"):
        await broker.wait(prompt.prompt_id, timeout=scaled(5))
