"""An echo of the agent's text is taken out of an error's outside words, never out of mcp-setup's own."""

from __future__ import annotations

from setup_agent.errors import ServerExited
from setup_agent.launch import LaunchSpec, explain_failure
from setup_agent.setup.tool_args import without_echo

_SPEC = LaunchSpec(
    command="uvx",
    args=["mcp-server-time==2025.9.25"],
    package_type="pypi",
    identifier="mcp-server-time",
    version="2025.9.25",
    runner="uvx",
)


def _exited(tail: str) -> ServerExited:
    err = ServerExited("", details={"stderr_tail": tail, "exit_code": 1})
    err.add_words("The server exited with code 1 before listing its tools.", own=True)
    err.add_words(" Last lines of its error output: ", own=True)
    err.add_words(tail, own=False)
    return err


def test_a_package_type_the_agent_passed_stays_in_the_launched_sentence() -> None:
    err = _exited("Traceback: boom")
    explain_failure(err, _SPEC)
    out = without_echo(err, {"qualified_name": "io.github.x/time", "package": "pypi"})
    assert "Launched: pypi package mcp-server-time 2025.9.25 (uvx)." in out["message"]
    assert out["details"]["launched"] == "pypi package mcp-server-time 2025.9.25 (uvx)"
    assert "(the name you gave)" not in out["message"]


def test_a_word_of_our_sentence_the_agent_passed_as_a_name_stays_whole() -> None:
    err = _exited("Traceback: boom")
    explain_failure(err, _SPEC)
    out = without_echo(err, {"qualified_name": "server"})
    assert out["message"].startswith("The server exited with code 1 before listing its tools.")
    assert "The server failed:" in out["message"]


def test_the_agent_text_echoed_by_the_server_output_is_still_taken_out() -> None:
    err = _exited("cannot find io.github.guess/secretish-name in the index")
    explain_failure(err, _SPEC)
    out = without_echo(err, {"qualified_name": "io.github.guess/secretish-name"})
    assert "io.github.guess/secretish-name" not in repr(out)
    assert "cannot find (the name you gave) in the index" in out["message"]
    assert out["details"]["stderr_tail"] == "cannot find (the name you gave) in the index"


def test_an_error_with_no_words_marked_ours_is_scrubbed_whole() -> None:
    err = ServerExited("pypi said no about pypi")
    out = without_echo(err, {"package": "pypi"})
    assert out["message"] == "(the name you gave) said no about (the name you gave)"


def test_words_put_first_keep_the_marks_of_the_words_after_them() -> None:
    err = _exited("pypi: boom")
    err.add_words("Version 2 did not answer, so 1 stays installed. ", own=True, first=True)
    out = without_echo(err, {"package": "pypi"})
    assert out["message"] == (
        "Version 2 did not answer, so 1 stays installed. The server exited with code 1 before listing its "
        "tools. Last lines of its error output: (the name you gave): boom"
    )
