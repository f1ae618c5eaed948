"""The consent's choices: a line the person answers by picking one of a few options, each with
a default, described as data so that every face draws them alike (the page's dialog, the
one-time consent page, ``mcp-setup approve`` and the terminal agent).

One today, shown in an install's consent: "May ask your AI to write text" (no / yes, without
tools / yes, with tools; setup_agent/store/sampling.py), stored with the installed server and
changeable later. A choice is the person's answer, not part of what is approved: it is not in
the consent's fingerprint, and an answer without it takes the default.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from setup_agent.errors import InvalidInput
from setup_agent.store import SAMPLING, SAMPLING_DEFAULT, SAMPLING_LABEL, SAMPLING_WORDS

if TYPE_CHECKING:
    from .consent_request import ConsentRequest

__all__ = ["SAMPLING_CHOICE", "choices_for", "choice_words", "validated_choices"]

#: ``{name, label, options: [{value, label}], default}``: what a face draws for one choice.
SAMPLING_CHOICE: dict[str, Any] = {
    "name": "sampling",
    "label": SAMPLING_LABEL,
    "options": [{"value": value, "label": SAMPLING_WORDS[value]} for value in SAMPLING],
    "default": SAMPLING_DEFAULT,
}


def choices_for(action: str) -> list[dict[str, Any]]:
    """The choices a consent for ``action`` asks (an install's: what the server may ask your AI)."""
    return [SAMPLING_CHOICE] if action == "install" else []


def validated_choices(request: ConsentRequest, raw: Any) -> dict[str, str]:
    """The person's answer to each choice ``request`` showed (the default where none was given);
    anything else is refused, in words that name the choice and its options."""
    if raw is not None and not isinstance(raw, Mapping):
        raise InvalidInput("choices must be an object of choice names to one of their options.")
    given = dict(raw or {})
    shown = {c["name"]: c for c in request.choices}
    unknown = [k for k in given if k not in shown]
    if unknown:
        raise InvalidInput("Only the choices shown in this consent can be answered.")
    out = {}
    for name, choice in shown.items():
        options = [o["value"] for o in choice["options"]]
        value = given.get(name, choice["default"])
        if value not in options:
            raise InvalidInput(f'"{choice["label"]}" is one of: {", ".join(options)}.')
        out[name] = value
    return out


def choice_words(request: ConsentRequest, chosen: Mapping[str, str]) -> list[str]:
    """Each choice and its answer in a person's words: ``May ask your AI to write text: Yes, without tools``."""
    words = []
    for choice in request.choices:
        labels = {o["value"]: o["label"] for o in choice["options"]}
        value = chosen.get(choice["name"], choice["default"])
        words.append(f"{choice['label']}: {labels.get(value, value)}")
    return words
