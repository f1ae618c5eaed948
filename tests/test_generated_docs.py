"""docs/settings.md and docs/cli.md are generated from the code (scripts/gen_docs.py): they must
say what the code says today, and a setting or a command added without regenerating is caught."""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path
from types import ModuleType

import pytest
from pydantic import Field

REPO = Path(__file__).resolve().parent.parent


def _gen_docs() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_docs", REPO / "scripts" / "gen_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_generated_pages_match_the_code() -> None:
    gen = _gen_docs()
    behind = gen.stale(gen.pages())
    assert not behind, (
        f"{', '.join(str(p.relative_to(REPO)) for p in behind)} differ from the code: "
        f"run `{gen.REGENERATE}` and commit the result"
    )


def test_every_setting_has_a_description_on_its_field() -> None:
    from app.settings import Settings

    missing = [name for name, field in Settings.model_fields.items() if not field.description]
    assert not missing, f"add Field(description=...) in app/settings.py for: {missing}"


def test_a_setting_added_without_regenerating_is_caught(tmp_path: Path) -> None:
    from app.settings import Settings

    gen = _gen_docs()

    class More(Settings):
        brand_new_knob: int = Field(default=7, description="A knob nobody documented yet.")

    page = tmp_path / "settings.md"
    page.write_text(gen.settings_markdown(Settings))
    assert gen.stale({page: gen.settings_markdown(Settings)}) == []
    wanted = gen.settings_markdown(More)
    assert gen.stale({page: wanted}) == [page]
    assert "| `MCP_SETUP_BRAND_NEW_KNOB` | `7` | A knob nobody documented yet. |" in wanted


def test_a_command_or_option_added_without_regenerating_is_caught(tmp_path: Path) -> None:
    from app.cli.main import GROUPS, _parser

    gen = _gen_docs()
    page = tmp_path / "cli.md"
    page.write_text(gen.cli_markdown(_parser(), GROUPS))

    parser = _parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    sub.add_parser("frobnicate", help="a command nobody documented yet").add_argument("--hard", action="store_true")
    wanted = gen.cli_markdown(parser, GROUPS)
    assert gen.stale({page: wanted}) == [page]
    assert "## mcp-setup frobnicate" in wanted and "| `--hard` |" in wanted

    parser = _parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    sub.choices["list"].add_argument("--sideways", action="store_true", help="a new option")
    assert gen.stale({page: gen.cli_markdown(parser, GROUPS)}) == [page]


def test_the_check_mode_says_the_command_that_regenerates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gen = _gen_docs()
    stale_page = tmp_path / "cli.md"
    stale_page.write_text("old text\n")
    gen.REPO = tmp_path  # type: ignore[attr-defined]
    gen.pages = lambda: {stale_page: "new text\n"}  # type: ignore[attr-defined]
    assert gen.main(["--check"]) == 1
    err = capsys.readouterr().err
    assert "cli.md is stale" in err and "scripts/gen_docs.py" in err
    assert stale_page.read_text() == "old text\n"
    assert gen.main([]) == 0 and stale_page.read_text() == "new text\n"


def test_every_command_and_setting_is_on_its_page() -> None:
    from app.cli.main import _parser
    from app.settings import Settings

    cli = (REPO / "docs" / "cli.md").read_text()
    gen = _gen_docs()
    for words, _line, _command in gen._commands(_parser()):
        assert f"## mcp-setup {' '.join(words)}\n" in cli
    settings = (REPO / "docs" / "settings.md").read_text()
    for name in Settings.model_fields:
        assert f"`MCP_SETUP_{name.upper()}`" in settings
