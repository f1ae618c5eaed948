"""The secret page's HTML: its stylesheet, the password form and the message pages.

Every text is escaped; the value typed is never echoed or pre-filled. The routes and guards are
in :mod:`app.pages.secret`.
"""

from __future__ import annotations

import html
from typing import Any

from starlette.responses import HTMLResponse

from setup_agent.errors import PromptAlreadyAnswered, PromptCancelled
from setup_agent.secrets import PendingPrompt

__all__ = [
    "PAGE_CSS",
    "document",
    "esc",
    "form_page",
    "message_page",
    "not_found_page",
    "prompt_error_page",
    "refused_page",
]

PAGE_CSS = """\
:root { --bg: #f4f5f7; --card: #ffffff; --text: #1b1f24; --muted: #5a6270; --line: #d5d9e0; --accent: #1f5fbf;
  --bad: #b3261e; --warn: #8a5a00; --warn-soft: #fff4dc; --focus: #2a6fdb; --radius: 10px; color-scheme: light;
  font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", sans-serif; font-size: 16px; line-height: 1.5; }
* { box-sizing: border-box; }
body { margin: 0; padding: 0; background: var(--bg); color: var(--text); }
.top { background: #14213d; color: #fff; padding: .8rem 1.25rem; font-weight: 700; }
main { max-width: 38rem; margin: 1.25rem auto; padding: 1rem 1.25rem 1.5rem; background: var(--card);
  border: 1px solid var(--line); border-radius: var(--radius); }
h1 { font-size: 1.35rem; line-height: 1.3; margin: .25rem 0 .75rem; }
h2 { font-size: 1.1rem; margin: 1.25rem 0 .4rem; }
code { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; font-size: .95em; overflow-wrap: anywhere; }
blockquote { margin: 1rem 0; padding: .5rem 1rem; border-left: .25rem solid var(--line); white-space: pre-wrap;
  overflow-wrap: anywhere; }
dl { display: grid; grid-template-columns: minmax(7rem, max-content) 1fr; gap: .35rem 1rem; margin: 1rem 0; }
dt { font-weight: 600; color: var(--muted); }
dd { margin: 0; min-width: 0; }
dd code { white-space: pre-line; }
dd.whole { grid-column: 1 / -1; } /* a sentence with no label spans the row */
details { margin: 1rem 0; } summary { cursor: pointer; font-weight: 600; }
label { display: block; font-weight: 600; margin: 1rem 0 .35rem; }
input[type=password], input[type=text] { width: 100%; font: inherit; font-size: 1.05rem; padding: .55rem .7rem;
  border: 1px solid #a9b0bc; border-radius: 8px; background: #fff; color: var(--text); }
.buttons { display: flex; gap: .75rem; margin-top: 1.25rem; flex-wrap: wrap; }
button { font: inherit; font-weight: 600; padding: .55rem 1.1rem; min-height: 2.5rem; border-radius: 8px; cursor: pointer;
  border: 1px solid var(--line); background: #fff; color: var(--text); }
button.primary { background: var(--accent); border-color: var(--accent); color: #fff; }
button.approve { color: var(--accent); border-color: var(--accent); }
:focus-visible { outline: 3px solid var(--focus); outline-offset: 2px; }
.error { color: var(--bad); font-weight: 600; }
.note { font-size: .95rem; color: var(--muted); }
.tools { list-style: none; padding: 0; margin: .5rem 0; border: 1px solid var(--line); border-radius: 8px; }
.tools li { padding: .5rem .75rem; border-top: 1px solid var(--line); }
.tools li:first-child { border-top: 0; }
.tools label { display: flex; flex-wrap: wrap; align-items: baseline; gap: .1rem .5rem; margin: 0; font-weight: 600; }
.tools label .note { font-weight: 400; }
.tools input[type=checkbox] { width: 1.15rem; height: 1.15rem; margin: 0; align-self: center; }
.tools p.note { margin: .2rem 0 0 1.65rem; overflow-wrap: anywhere; }
#warnings { background: var(--warn-soft); color: var(--warn); border-radius: 8px; padding: .6rem 1rem .6rem 2rem; }
@media (max-width: 32rem) {
  main { margin: 0; border-radius: 0; border-left: 0; border-right: 0; }
  dl { grid-template-columns: 1fr; gap: .1rem; }
  dd { margin-bottom: .5rem; }
  .buttons button { flex: 1 1 100%; }
}
"""


def esc(text: Any) -> str:
    return html.escape(str(text), quote=True)


def document(title: str, body: str) -> str:
    return (
        '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{esc(title)}</title>\n"
        '<link rel="stylesheet" href="/secrets/static/page.css">\n'
        f'</head>\n<body>\n<header class="top">mcp-setup</header>\n<main>\n{body}\n</main>\n</body>\n</html>\n'
    )


#: Said on every form, before the value is typed.
_WEAK_NOTE = (
    "Note: a value under 8 characters, or a word, a date or a simple pattern (such as Summer2024!), "
    "cannot be protected against a determined agent: it could find it by guessing."
)


def message_page(status: int, title: str, text: str, *, warning: str | None = None) -> HTMLResponse:
    body = f"<h1>{esc(title)}</h1>\n<p>{esc(text)}</p>"
    if warning:
        body += f'\n<p class="error" role="alert" id="weak-warning">{esc(warning)}</p>'
    return HTMLResponse(document(f"{title} — mcp-setup", body), status_code=status)


def form_page(prompt: PendingPrompt, token: str, *, error: str | None = None, status: int = 200) -> HTMLResponse:
    key = esc(prompt.key_name)
    who = f" for <strong>{esc(prompt.server)}</strong>" if prompt.server else ""
    title = f"Enter your {prompt.key_name}" + (f" for {prompt.server}" if prompt.server else "") + " — mcp-setup"
    alert = f'<p class="error" role="alert" id="error">{esc(error)}</p>\n' if error else ""
    described = "privacy error" if error else "privacy"
    body = (
        f"<h1>mcp-setup needs your <code>{key}</code>{who}</h1>\n"
        '<p id="privacy">It is stored on this computer and never shown to the AI assistant.</p>\n'
        "<p>Your assistant asked:</p>\n"
        f"<blockquote>{esc(prompt.prompt)}</blockquote>\n"
        f"{alert}"
        f'<form method="post" action="/secrets/{esc(prompt.prompt_id)}" autocomplete="off">\n'
        f'<input type="hidden" name="t" value="{esc(token)}">\n'
        f'<label for="value">Your {key}</label>\n'
        '<input type="password" id="value" name="value" autocomplete="off" required autofocus '
        f'spellcheck="false" autocapitalize="off" aria-describedby="{described}">\n'
        '<div class="buttons">\n'
        '<button type="submit" name="action" value="submit" class="primary">Submit</button>\n'
        '<button type="submit" name="action" value="cancel" formnovalidate>Cancel</button>\n'
        "</div>\n</form>\n"
        f'<p class="note" id="weak-note">{esc(_WEAK_NOTE)}</p>\n'
        '<p class="note">If you did not expect this request, press Cancel.</p>'
    )
    return HTMLResponse(document(title, body), status_code=status)


def not_found_page() -> HTMLResponse:
    return message_page(
        404,
        "This request is no longer open",
        "It has expired or was never made. Go back to your assistant and ask it to request the secret again.",
    )


def refused_page() -> HTMLResponse:
    return message_page(403, "This link cannot be used", "Open the link exactly as your assistant gave it.")


def prompt_error_page(exc: Exception) -> HTMLResponse:
    if isinstance(exc, PromptAlreadyAnswered):
        return message_page(
            409,
            "Already answered",
            "This secret was already saved. You can close this tab and return to your assistant.",
        )
    if isinstance(exc, PromptCancelled):
        return message_page(
            410,
            "Request cancelled",
            "This request was cancelled. Ask your assistant again if you still want to add it.",
        )
    return not_found_page()
