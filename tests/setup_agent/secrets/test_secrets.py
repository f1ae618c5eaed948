"""Secret refs: minted, bound to a key, expiring, consumed; values masked."""

from __future__ import annotations

import pickle
import re
import threading

import pytest

from setup_agent.errors import InvalidInput, SecretExpired, SecretMissing, SecretPending, SecretWrongKey
from setup_agent.secrets.refs import SecretRefStore, SecretValue, is_ref
from tests.helpers.timeouts import scaled


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_minted_ref_is_opaque_with_at_least_128_random_bits(canary: str) -> None:
    refs = SecretRefStore()
    ref = refs.mint("API_KEY", canary)
    assert re.fullmatch(r"secret://[0-9a-f]{32}", ref)
    assert canary not in ref
    assert ref != refs.mint("API_KEY", canary)
    assert is_ref(ref) and not is_ref("secret://xyz") and not is_ref(canary)


def test_a_ref_resolves_to_its_value_for_the_key_it_was_minted_for(canary: str) -> None:
    refs = SecretRefStore()
    ref = refs.mint("API_KEY", canary)
    resolved = refs.resolve({"API_KEY": ref})
    assert resolved["API_KEY"].reveal() == canary


def test_a_ref_used_for_another_key_is_refused_naming_both_keys(canary: str) -> None:
    refs = SecretRefStore()
    ref = refs.mint("GITHUB_TOKEN", canary)
    with pytest.raises(SecretWrongKey) as err:
        refs.resolve({"NOTION_API_KEY": ref})
    assert "GITHUB_TOKEN" in err.value.message and "NOTION_API_KEY" in err.value.message
    assert canary not in str(err.value) and canary not in repr(err.value)


def test_an_expired_ref_is_refused_as_expired_with_an_injected_clock(canary: str) -> None:
    clock = Clock()
    refs = SecretRefStore(ttl_seconds=900, timer=clock)
    ref = refs.mint("API_KEY", canary)
    clock.now += 899
    assert refs.resolve({"API_KEY": ref})["API_KEY"].reveal() == canary
    clock.now += 2
    with pytest.raises(SecretExpired) as err:
        refs.resolve({"API_KEY": ref})
    assert err.value.code == "secret_expired" and "API_KEY" in err.value.message
    assert list(refs.live_values()) == []


def test_an_unknown_ref_or_a_plain_value_is_refused_as_missing(canary: str) -> None:
    refs = SecretRefStore()
    with pytest.raises(SecretMissing):
        refs.resolve({"API_KEY": "secret://" + "0" * 32})
    with pytest.raises(SecretMissing) as err:
        refs.resolve({"API_KEY": canary})
    assert canary not in err.value.message


def test_consumed_refs_are_refused_afterwards(canary: str) -> None:
    refs = SecretRefStore()
    ref = refs.mint("API_KEY", canary)
    refs.consume({"API_KEY": ref})
    with pytest.raises(SecretMissing):
        refs.resolve({"API_KEY": ref})


def test_a_reserved_ref_is_pending_until_the_user_answers(canary: str) -> None:
    refs = SecretRefStore()
    ref = refs.reserve("API_KEY")
    with pytest.raises(SecretPending):
        refs.resolve({"API_KEY": ref})
    assert not refs.is_ready(ref)
    refs.fulfil(ref, canary)
    assert refs.is_ready(ref)
    assert refs.resolve({"API_KEY": ref})["API_KEY"].reveal() == canary


def test_empty_values_and_bad_key_names_are_refused() -> None:
    refs = SecretRefStore()
    with pytest.raises(InvalidInput):
        refs.mint("API_KEY", "")
    with pytest.raises(InvalidInput):
        refs.mint("not a key name!", "value")


def test_secret_value_masks_itself_everywhere_it_could_be_printed(canary: str) -> None:
    value = SecretValue(canary)
    for text in (repr(value), str(value), f"{value}", f"{value!r}", repr([value]), repr({"k": value})):
        assert canary not in text
    with pytest.raises(TypeError):
        pickle.dumps(value)
    assert value == SecretValue(canary) and value.reveal() == canary


def test_the_store_is_safe_under_concurrent_minting(canary: str) -> None:
    refs = SecretRefStore()
    out: list[str] = []

    def work() -> None:
        for _ in range(200):
            out.append(refs.mint("API_KEY", canary))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=scaled(10))
    assert len(set(out)) == 800 == len(refs)
    assert canary not in repr(refs)


def test_unanswered_names_the_keys_whose_prompt_waits_and_leaves_every_other_problem_to_resolve(canary: str) -> None:
    refs = SecretRefStore(ttl_seconds=60)
    waiting = refs.reserve("API_KEY")
    given = refs.mint("OTHER", canary)
    wrong = refs.reserve("THIRD")
    assert refs.unanswered({"API_KEY": waiting, "OTHER": given, "FOURTH": wrong, "BAD": "nope"}) == {"API_KEY"}
    refs.fulfil(waiting, canary)
    assert refs.unanswered({"API_KEY": waiting}) == set()
    assert refs.resolve({"API_KEY": waiting})["API_KEY"].reveal() == canary
