"""The redactor hides live secret values, and their encoded forms, in everything that leaves."""

from __future__ import annotations

import base64
import logging
from urllib.parse import quote, quote_plus

from setup_agent.secrets.redact import RedactingFilter, Redactor
from setup_agent.secrets.refs import SecretRefStore


def _redactor_with(value: str) -> tuple[Redactor, str]:
    refs = SecretRefStore()
    redactor = Redactor()
    redactor.add_source(refs.live_values)
    refs.add_listener(redactor.invalidate)
    ref = refs.mint("API_KEY", value)
    return redactor, ref


def test_the_value_and_its_base64_and_url_encoded_forms_become_the_ref(canary: str) -> None:
    value = canary + " /+?&=é"
    redactor, ref = _redactor_with(value)
    forms = [
        value,
        base64.b64encode(value.encode()).decode(),
        base64.urlsafe_b64encode(value.encode()).decode().rstrip("="),
        quote(value, safe=""),
        quote_plus(value),
    ]
    for form in forms:
        out = redactor.redact(f"before {form} after")
        assert form not in out and canary not in out
        assert ref in out


def test_a_value_inside_a_basic_auth_blob_is_hidden(canary: str) -> None:
    redactor, ref = _redactor_with(canary)
    for user in ("u", "us", "use"):
        blob = base64.b64encode(f"{user}:{canary}".encode()).decode()
        out = redactor.redact(f"Authorization: Basic {blob}")
        assert blob not in out and ref in out, out  # replaced by its ref, not dropped with the line


def test_nested_objects_are_redacted_including_keys(canary: str) -> None:
    redactor, ref = _redactor_with(canary)
    obj = {"tools": [{"name": "x", "description": f"key={canary}"}], canary: (canary, 3)}
    out = redactor.redact_obj(obj)
    assert canary not in repr(out)
    assert out["tools"][0]["description"] == f"key={ref}"


def test_new_refs_are_known_at_once_and_consumed_ones_forgotten(canary: str) -> None:
    refs = SecretRefStore()
    redactor = Redactor()
    redactor.add_source(refs.live_values)
    refs.add_listener(redactor.invalidate)
    assert redactor.redact(canary) == canary
    ref = refs.mint("K", canary)
    assert redactor.redact(canary) == ref
    refs.consume({"K": ref})
    assert redactor.redact(canary) == canary


def test_registered_stored_values_use_a_key_placeholder(canary: str) -> None:
    redactor = Redactor()
    redactor.register(canary, "[secret:API_KEY]")
    assert redactor.redact(f"x{canary}y") == "x[secret:API_KEY]y"
    redactor.unregister(canary)
    assert canary in redactor.redact(canary)


def test_the_logging_filter_redacts_messages_arguments_and_tracebacks(canary: str) -> None:
    redactor, _ = _redactor_with(canary)
    records: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(self.format(record))

    handler = Collect()
    handler.addFilter(RedactingFilter(redactor))
    log = logging.getLogger("test.redact")
    log.addHandler(handler)
    log.setLevel(logging.DEBUG)
    try:
        log.info("value %s in args", canary)
        log.info(f"value {canary} in message")
        try:
            raise ValueError(f"boom {canary}")
        except ValueError:
            log.exception("failed")
    finally:
        log.removeHandler(handler)
    assert len(records) == 3
    assert all(canary not in r for r in records)
    assert "boom" in records[2]


# -- short values (issue #10, item 8) --------------------------------------------------------


def test_a_one_character_secret_leaves_ids_and_words_alone() -> None:
    redactor, ref = _redactor_with("1")
    text = "server srv_1a2b3c installed, 1 tool, version 1.0.1"
    assert redactor.redact(text) == text
    assert redactor.redact_obj({"server_id": "srv_1a2b3c"}) == {"server_id": "srv_1a2b3c"}


def test_a_value_shorter_than_eight_is_replaced_only_as_a_whole_token() -> None:
    redactor, ref = _redactor_with("1a2b")
    assert redactor.redact("srv_1a2b3c") == "srv_1a2b3c"
    assert redactor.redact("x1a2b") == "x1a2b"
    assert redactor.redact("pin: 1a2b.") == f"pin: {ref}."
    assert redactor.redact('{"pin":"1a2b"}') == '{"pin":"' + ref + '"}'


def test_a_value_of_eight_or_more_is_replaced_inside_words_too(canary: str) -> None:
    redactor, ref = _redactor_with("Summer24")
    assert redactor.redact("xSummer24y") == f"x{ref}y"


def test_short_values_are_still_found_byte_exactly_and_kept_out_of_logs() -> None:
    short = "Q§7"  # three characters: not replaced in outbound text
    redactor, _ = _redactor_with(short)
    assert redactor.redact(f"got {short} here") == f"got {short} here"
    assert redactor.contains_secret(f"got {short} here", strict=True)
    assert not redactor.contains_secret("gotQ§7x", strict=True)  # not a whole token
    assert not redactor.contains_secret(f"got {short} here")
    records: list[bytes] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(self.format(record).encode())

    handler = Collect()
    handler.addFilter(RedactingFilter(redactor))
    log = logging.getLogger("test.redact.short")
    log.addHandler(handler)
    log.setLevel(logging.DEBUG)
    try:
        log.info("value %s in args", short)
        try:
            raise ValueError(f"boom {short}")
        except ValueError:
            log.exception("failed")
    finally:
        log.removeHandler(handler)
    assert len(records) == 2
    assert all(short.encode() not in r for r in records)
