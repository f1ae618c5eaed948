"""A relayed request's origin carries its server's icon only when the server's own answer holds
it inline as an image: a page shows it beside the server's name and fetches nothing from an
address the server chose."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from setup_agent.gateway.relay_rules import ORIGIN_KEY, Origin

PNG = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


def _info(*sources: str) -> SimpleNamespace:
    return SimpleNamespace(icons=[SimpleNamespace(src=src) for src in sources])


def test_an_inline_image_icon_is_said_in_the_origins_meta() -> None:
    origin = Origin("asking", "Asking", "io.test/asking").with_icon(_info("https://tracker.example/i.png", PNG))
    assert origin.meta()[ORIGIN_KEY] == {"slug": "asking", "title": "Asking", "server": "io.test/asking", "icon": PNG}


@pytest.mark.parametrize(
    "src",
    [
        "https://tracker.example/icon.png",
        "data:image/svg+xml;base64,PHN2Zz48L3N2Zz4=",
        'data:image/png;base64,AAAA"><script>',
        "data:image/png;base64," + "A" * 70_000,
    ],
    ids=["an-address", "svg", "not-base64", "too-large"],
)
def test_any_other_icon_is_left_out(src: str) -> None:
    origin = Origin("asking", "Asking").with_icon(_info(src))
    assert origin.icon is None and "icon" not in origin.meta()[ORIGIN_KEY]


def test_a_server_without_icons_keeps_its_origin() -> None:
    origin = Origin("asking", "Asking")
    assert origin.with_icon(None) is origin and origin.with_icon(SimpleNamespace(icons=None)) is origin
