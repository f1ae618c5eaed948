"""Every form the redactor knows (issue #24, item 4): a canary goes in in that form, in a string or
a whole tool result, and comes out as its ref; decoding what comes out finds no canary."""

from __future__ import annotations

import base64
import html
import json
import re
from collections.abc import Callable
from urllib.parse import quote, unquote

import pytest

from setup_agent.secrets.redact import Redactor
from setup_agent.secrets.refs import SecretRefStore

SECRET = "Summer2024!<&>/x"  # has what JSON (Go) and HTML escape


def _go_json(v: str) -> str:
    return json.dumps(v)[1:-1].replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _wrapped(v: str, column: int) -> str:
    blob = base64.b64encode(("prefix:" + v).encode()).decode()
    return "\n".join(blob[i : i + column] for i in range(0, len(blob), column))


FORMS: dict[str, Callable[[str], str]] = {
    "plain": lambda v: v,
    "url_quoted": lambda v: quote(v, safe=""),
    "url_quoted_lower_hex": lambda v: quote(v, safe="").lower(),
    "base64": lambda v: base64.b64encode(v.encode()).decode(),
    "base64_in_a_blob": lambda v: base64.b64encode(b"user:" + v.encode()).decode(),
    "base64_wrapped_at_76": lambda v: _wrapped(v, 76),
    "base64_wrapped_at_5": lambda v: _wrapped(v, 5),
    "base64url": lambda v: base64.urlsafe_b64encode(v.encode()).decode().rstrip("="),
    "base32": lambda v: base64.b32encode(v.encode()).decode(),
    "hex_lower": lambda v: v.encode().hex(),
    "hex_upper": lambda v: v.encode().hex().upper(),
    "hex_spaced": lambda v: " ".join(f"{b:02x}" for b in v.encode()),
    "json_python": lambda v: json.dumps(v)[1:-1],
    "json_go": _go_json,
    "json_slash_escaped": lambda v: _go_json(v).replace("/", "\\/"),
    "json_every_char_escaped": lambda v: "".join(f"\\u{ord(c):04x}" for c in v),
    "json_every_char_escaped_upper": lambda v: "".join(f"\\u{ord(c):04X}" for c in v),
    "json_mixed_escapes": lambda v: "".join(f"\\u{ord(c):04x}" if i % 3 == 0 else c for i, c in enumerate(v)),
    "html_named": lambda v: html.escape(v),
    "html_decimal": lambda v: "".join(f"&#{ord(c)};" for c in v),
    "html_hex": lambda v: "".join(f"&#x{ord(c):X};" for c in v),
    "html_mixed": lambda v: "".join(f"&#{ord(c)};" if i % 2 else c for i, c in enumerate(v)).replace("&", "&amp;", 0),
    "reversed": lambda v: v[::-1],
    "spaced_out": lambda v: " ".join(v),
    "upper": lambda v: v.upper(),
    "lower": lambda v: v.lower(),
    "zero_width_joined": lambda v: "\u200b".join(v),
    "soft_hyphens_and_newlines": lambda v: "\u00ad\n".join(v),
}


def _redactor() -> tuple[Redactor, str]:
    refs = SecretRefStore()
    redactor = Redactor()
    redactor.add_source(refs.live_values)
    refs.add_listener(redactor.invalidate)
    return redactor, refs.mint("API_KEY", SECRET)


def _squeeze(text: str) -> str:
    return re.sub(r"[\s\u200b\u00ad]", "", text).lower()


def _leaks(text: str, encoded: str) -> bool:
    """Whether ``text`` still holds the planted form, or the secret under the simple decodings."""
    views = {text, html.unescape(text), unquote(text), text[::-1]}
    try:
        views.add(json.loads('"' + text.replace('"', '\\"').replace("\n", "\\n") + '"'))
    except ValueError:
        pass
    low = SECRET.lower()
    return _squeeze(encoded) in _squeeze(text) or any(low in _squeeze(v) or low[::-1] in _squeeze(v) for v in views)


@pytest.mark.parametrize("form", list(FORMS), ids=list(FORMS))
def test_each_form_of_a_secret_is_hidden_in_text(form: str) -> None:
    redactor, ref = _redactor()
    encoded = FORMS[form](SECRET)
    assert redactor.contains_secret(f"before {encoded} after")
    out = redactor.redact(f"before {encoded} after")
    assert not _leaks(out, encoded), out
    assert ref in out


@pytest.mark.parametrize("form", list(FORMS), ids=list(FORMS))
def test_each_form_is_hidden_in_every_field_of_a_tool_result(form: str) -> None:
    redactor, ref = _redactor()
    encoded = FORMS[form](SECRET)
    result = {
        "content": [{"type": "text", "text": "ok"}],
        "structuredContent": {"deep": [{"value": encoded}]},
        "_meta": {"note": f"m:{encoded}"},
        "error": {"code": -32000, "message": f"failed: {encoded}", "data": {"x": encoded}},
    }
    out = redactor.redact_obj(result)
    assert not _leaks(json.dumps(out, ensure_ascii=False), encoded), out
    assert ref in out["_meta"]["note"]


@pytest.mark.parametrize("cut", [3, 8, 11])
def test_a_secret_split_across_two_content_blocks_is_cut_from_both(cut: int) -> None:
    redactor, ref = _redactor()
    result = {
        "content": [
            {"type": "text", "text": "the key is " + SECRET[:cut]},
            {"type": "text", "text": SECRET[cut:] + " and that is all"},
        ]
    }
    out = redactor.redact_obj(result)
    joined = "".join(block["text"] for block in out["content"])
    assert SECRET not in joined and SECRET[:cut] not in out["content"][0]["text"][-cut - 2 :]
    assert out["content"][0]["text"] == "the key is " + ref
    assert out["content"][1]["text"] == " and that is all"


def test_a_secret_split_over_three_fields_and_a_long_block_is_cut() -> None:
    redactor, ref = _redactor()
    long_text = "x" * 100_000 + SECRET[:4]
    out = redactor.redact_obj(
        {
            "content": [{"type": "text", "text": long_text}],
            "structuredContent": {"a": SECRET[4:9], "b": SECRET[9:] + "!"},
        }
    )
    flat = out["content"][0]["text"] + out["structuredContent"]["a"] + out["structuredContent"]["b"]
    assert SECRET not in flat and flat.endswith(ref + "!")


def test_text_without_a_secret_is_left_exactly_as_it_was() -> None:
    redactor, _ = _redactor()
    texts = ["Summer 2023 was hot", "a\u200bb", "&amp; &#60; \\u0026 %41", "4142434445464748", " ".join("summer")]
    for text in texts:
        assert redactor.redact(text) == text
    obj = {"content": [{"type": "text", "text": "Summer20"}, {"type": "text", "text": "23!"}]}
    assert redactor.redact_obj(obj) == obj


def test_a_spaced_out_value_keeps_the_text_around_it() -> None:
    redactor, ref = _redactor()
    assert redactor.redact("key: " + " ".join(SECRET) + " (done)") == f"key: {ref} (done)"
    assert redactor.redact("x" + SECRET.upper() + "y") == f"x{ref}y"
