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
from tests.helpers.timeouts import scaled


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


def test_the_second_refusal_locks_the_principal_and_tells_the_user_once(canary: str) -> None:
    guard, _, lockouts = _setup(canary)
    for _ in range(2):
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


def test_refusals_are_counted_per_principal(canary: str) -> None:
    guard, _, lockouts = _setup(canary, limit=3)
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
    assert outcomes.count("arguments_refused") == 2
    assert outcomes.count("session_locked") == 6


# -- issue #24: every form of a guess, the incident, the unlock ---------------------------------

PASSWORD = "Summer2024!"
PIN = "4821"


def _every_char_json(v: str) -> str:
    return "".join(f"\\u{ord(c):04x}" for c in v)


#: (name, the secret, the arguments that carry a guess of it); each must be refused.
GUESS_FORMS = [
    ("plain", PASSWORD, lambda v: {"q": v}),
    ("split_across_two_arguments", PASSWORD, lambda v: {"a": v[:5], "b": v[5:]}),
    ("split_across_nested_values", PASSWORD, lambda v: {"x": {"a": v[:3]}, "y": [v[3:7], v[7:]]}),
    ("upper_case", "hunter2hunter", lambda v: {"s": v.upper()}),
    ("mixed_case", PASSWORD, lambda v: {"s": v.swapcase()}),
    ("json_escaped", PASSWORD, lambda v: {"s": _every_char_json(v)}),
    ("json_partly_escaped", PASSWORD, lambda v: {"s": "\\u0053ummer2024\\u0021"}),
    ("url_encoded", PASSWORD, lambda v: {"s": quote(v, safe="")}),
    ("url_every_char_encoded", PASSWORD, lambda v: {"s": "".join(f"%{b:02X}" for b in v.encode())}),
    ("hex", PASSWORD, lambda v: {"s": v.encode().hex()}),
    ("hex_upper", PASSWORD, lambda v: {"s": v.encode().hex().upper()}),
    ("base64", PASSWORD, lambda v: {"s": base64.b64encode(v.encode()).decode()}),
    ("base32", PASSWORD, lambda v: {"s": base64.b32encode(v.encode()).decode()}),
    ("reversed", PASSWORD, lambda v: {"s": v[::-1]}),
    ("spaced_out", PASSWORD, lambda v: {"s": " ".join(v)}),
    ("html_entities", PASSWORD, lambda v: {"s": "".join(f"&#{ord(c)};" for c in v)}),
    ("pin_as_number", PIN, lambda v: {"n": int(v)}),
    ("pin_in_exponent_notation", PIN, lambda v: {"n": 4.821e3}),
    ("pin_as_float", PIN, lambda v: {"n": 4821.0}),
    ("pin_as_exponent_string", PIN, lambda v: {"n": "4.821e3"}),
    ("pin_as_hex_literal", PIN, lambda v: {"n": hex(int(v))}),
    ("pin_in_a_list_of_guesses", PIN, lambda v: {"CFG": " ".join(f"{i:04d}" for i in range(4815, 4825))}),
    ("as_a_key", PASSWORD, lambda v: {v: 1}),
]


@pytest.mark.parametrize("secret,shape", [(s, f) for _, s, f in GUESS_FORMS], ids=[n for n, _, _ in GUESS_FORMS])
def test_each_form_of_a_guess_is_refused(secret: str, shape) -> None:
    guard, _, _ = _setup(secret)
    with pytest.raises(ArgumentsRefused) as info:
        guard.check("agent", shape(secret))
    assert secret not in repr(info.value.to_dict())


@pytest.mark.parametrize(
    "arguments",
    [
        {"q": "Summer 2023 was hot"},
        {"a": "Summe", "b": "r2023!"},
        {"n": 4822, "m": 48.21, "s": "4.822e3"},
        {"s": "4821x"},  # a short value stays a whole token
        {"s": "0x12d6"},
    ],
)
def test_near_misses_pass(arguments: dict) -> None:
    guard, refs, _ = _setup(PASSWORD)
    refs.mint("PIN", PIN)
    guard.check("agent", arguments)
    assert guard.refusals("agent") == 0


def test_the_first_refusal_is_an_incident_the_user_hears_of_at_once(canary: str) -> None:
    now = [1000.0]
    incidents: list[str] = []
    guard, _, lockouts = _setup(canary, on_incident=incidents.append, clock=lambda: now[0])
    with pytest.raises(ArgumentsRefused):
        guard.check("token:ci", {"q": canary}, where="setup")
    assert incidents == ["token:ci"] and lockouts == []
    assert [i.public() for i in guard.incidents()] == [
        {
            "principal": "token:ci",
            "refusals": 1,
            "locked": False,
            "first_at": 1000.0,
            "last_at": 1000.0,
            "last_where": "setup",
        }
    ]
    now[0] = 1005.0
    with pytest.raises(ArgumentsRefused):
        guard.check("token:ci", {"q": canary})
    assert incidents == ["token:ci"] and lockouts == ["token:ci"]
    assert guard.locked() == ["token:ci"]
    (incident,) = guard.incidents()
    assert (incident.refusals, incident.locked, incident.last_at, incident.last_where) == (2, True, 1005.0, "gateway")
    assert canary not in repr(guard.incidents())


def test_a_locked_principal_gets_one_answer_whatever_it_sends_until_unlocked(canary: str) -> None:
    guard, _, _ = _setup(canary)
    for _ in range(2):
        with pytest.raises(ArgumentsRefused):
            guard.check("user:terminal", {"q": canary})
    for args, where in (({"q": canary}, "setup"), ({"q": "wrong guess"}, "setup"), ({}, "gateway")):
        with pytest.raises(SessionLocked):
            guard.check("user:terminal", args, where=where)
    guard.forget("user:terminal")  # an ended session does not unlock a principal
    assert guard.is_locked("user:terminal")
    assert guard.unlock("user:terminal") is True
    assert not guard.is_locked("user:terminal") and guard.incidents() == []
    guard.check("user:terminal", {"q": "fine"})
    assert guard.unlock("user:terminal") is False


def test_a_pin_found_by_trying_every_value_costs_two_refusals_then_nothing_answers() -> None:
    guard, _, lockouts = _setup(PIN)
    answers = []
    for guess in range(4800, 4900):
        try:
            guard.check("agent", {"pin": f"{guess:04d}"})
            answers.append("ok")
        except (ArgumentsRefused, SessionLocked) as exc:
            answers.append(exc.code)
    assert answers.count("arguments_refused") == 1  # only the right guess, once
    assert lockouts == []
    with pytest.raises(ArgumentsRefused):
        guard.check("agent", {"pin": PIN})
    assert lockouts == ["agent"]
    assert all(a == "session_locked" for a in [_outcome(guard, {"pin": str(g)}) for g in range(10)])


def _outcome(guard: GuessGuard, args: dict) -> str:
    try:
        guard.check("agent", args)
    except (ArgumentsRefused, SessionLocked) as exc:
        return exc.code
    return "ok"
