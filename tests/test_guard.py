"""The guessing guard refuses calls carrying a protected value, counts them, and locks a session."""

from __future__ import annotations

import base64
import threading
from urllib.parse import quote

import pytest

from setup_agent.errors import ArgumentsRefused, SessionLocked
from setup_agent.secrets.guard import GuessGuard
from setup_agent.secrets.redact import Redactor
from setup_agent.secrets.refs import SecretRefStore
from tests.timeouts import scaled


def _setup(value: str | None = None, **kwargs: object) -> tuple[GuessGuard, SecretRefStore, list[str]]:
    refs = SecretRefStore()
    redactor = Redactor()
    redactor.add_source(refs.live_values)
    refs.add_listener(redactor.invalidate)
    if value is not None:
        refs.mint("API_KEY", value)
    lockouts: list[str] = []
    guard = GuessGuard(redactor, on_lockout=lockouts.append, **kwargs)  # type: ignore[arg-type]
    return guard, refs, lockouts


def test_arguments_without_a_secret_pass(canary: str) -> None:
    guard, _, _ = _setup(canary)
    guard.check("s1", {"query": "weather in Paris", "n": 3, "deep": [{"x": ["canary-"]}]})
    assert guard.refusals("s1") == 0


@pytest.mark.parametrize(
    "shape",
    [
        lambda v: {"q": v},
        lambda v: {"q": f"is it {v}?"},
        lambda v: {"nested": [{"deeper": ("x", {"y": v})}]},
        lambda v: {v: "as a key"},
        lambda v: {"q": base64.b64encode(v.encode()).decode()},
        lambda v: {"q": quote(v, safe="")},
    ],
    ids=["plain", "inside", "nested", "key", "base64", "urlencoded"],
)
def test_a_secret_anywhere_in_the_arguments_is_refused_without_echo(canary: str, shape) -> None:
    guard, _, _ = _setup(canary)
    with pytest.raises(ArgumentsRefused) as info:
        guard.check("s1", shape(canary))
    err = info.value.to_dict()
    assert err["code"] == "arguments_refused"
    assert canary not in repr(err) and "secret://" not in repr(err)
    assert guard.refusals("s1") == 1


def test_a_stored_value_in_use_is_refused_too(canary: str) -> None:
    guard, _, _ = _setup()
    guard.redactor.register(canary, "[secret:TOKEN]")
    with pytest.raises(ArgumentsRefused):
        guard.check("s1", {"q": canary})
    guard.redactor.unregister(canary)
    guard.check("s1", {"q": canary})


def test_a_pin_sent_as_a_number_is_refused() -> None:
    guard, _, _ = _setup("4821")
    with pytest.raises(ArgumentsRefused):
        guard.check("s1", {"pin": 4821})
    guard.check("s1", {"pin": 48210, "big": 10**5000, "flag": True, "none": None})


def test_short_values_follow_the_redactors_rules() -> None:
    guard, refs, _ = _setup("7")  # under 4 characters: never replaced, so never an oracle
    guard.check("s1", {"q": "7 of 7"})
    refs.mint("PIN", "1a2b")  # under 8 characters: whole tokens only
    guard.check("s1", {"q": "srv_1a2b3c"})
    with pytest.raises(ArgumentsRefused):
        guard.check("s1", {"q": "is it 1a2b?"})
    strict, _, _ = _setup("7", strict=True)
    with pytest.raises(ArgumentsRefused):
        strict.check("s1", {"q": "7 of 7"})


def test_the_third_refusal_locks_the_session_and_tells_the_user_once(canary: str) -> None:
    guard, _, lockouts = _setup(canary)
    for _ in range(3):
        with pytest.raises(ArgumentsRefused):
            guard.check("s1", {"q": canary})
    assert lockouts == ["s1"]
    assert guard.is_locked("s1")
    for args in ({"q": "harmless"}, {"q": canary}, {}):
        with pytest.raises(SessionLocked) as info:
            guard.check("s1", args)
        assert info.value.code == "session_locked"
    assert lockouts == ["s1"]
    guard.check("s2", {"q": "another session is not locked"})


def test_refusals_are_counted_per_session(canary: str) -> None:
    guard, _, lockouts = _setup(canary)
    for sid in ("a", "b", "a", "b", None):
        with pytest.raises(ArgumentsRefused):
            guard.check(sid, {"q": canary})
    assert (guard.refusals("a"), guard.refusals("b"), guard.refusals(None)) == (2, 2, 1)
    assert lockouts == []
    guard.forget("a")
    assert guard.refusals("a") == 0


def test_the_limit_can_be_set_and_must_be_positive(canary: str) -> None:
    guard, _, lockouts = _setup(canary, limit=1)
    with pytest.raises(ArgumentsRefused):
        guard.check("s", {"q": canary})
    assert lockouts == ["s"]
    with pytest.raises(ValueError):
        GuessGuard(Redactor(), limit=0)


def test_a_failing_lockout_listener_does_not_turn_the_refusal_into_a_crash(canary: str) -> None:
    refs = SecretRefStore()
    redactor = Redactor()
    redactor.add_source(refs.live_values)
    refs.mint("K", canary)

    def boom(session_id: str) -> None:
        raise RuntimeError("listener broke")

    guard = GuessGuard(redactor, limit=1, on_lockout=boom)
    with pytest.raises(ArgumentsRefused):
        guard.check("s", {"q": canary})
    with pytest.raises(SessionLocked):
        guard.check("s", {})


def test_deeply_nested_arguments_do_not_overflow_the_stack(canary: str) -> None:
    guard, _, _ = _setup(canary)
    deep: object = canary
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(ArgumentsRefused):
        guard.check("s", {"q": deep})


def test_concurrent_refusals_lock_once(canary: str) -> None:
    guard, _, lockouts = _setup(canary)
    start = threading.Barrier(8)
    outcomes: list[str] = []

    def attempt() -> None:
        start.wait(timeout=scaled(10))
        try:
            guard.check("s", {"q": canary})
        except (ArgumentsRefused, SessionLocked) as exc:
            outcomes.append(exc.code)

    threads = [threading.Thread(target=attempt) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=scaled(10))
    assert lockouts == ["s"]
    assert outcomes.count("arguments_refused") == 3
    assert outcomes.count("session_locked") == 5
