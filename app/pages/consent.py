"""The one-time consent page: the user approves (or denies) what will run, out of band.

``GET /secrets/consents/{consent_id}?t=KEY`` shows the :class:`~setup_agent.setup.consent.
ConsentRequest` as its document (``consent_document``, which the page's modal and the terminals
draw too): who asked, the person's settings first (where each secret goes, the destination
settings as editable fields: the agent's value is only a suggestion), what runs, one sandbox
block, the network, the tools a test listed, the package's internals folded under "Technical
details", and warnings with a checkbox the user must tick. ``POST /secrets/consents/{consent_id}`` (form fields ``t``, ``action=approve|deny``,
``setting.<NAME>``, ``accept_warnings``, ``tool.<N>=keep`` for each tool box left ticked: the
tools a test listed) hands the answer to the :class:`~setup_agent.setup.consent.ConsentBroker`.

The routes live in the secret page app (:func:`app.pages.secret.create_secret_app`), behind its
guards (Host allowlist, Origin rule, CSP with no script at all), so the stdio face's page
server and the web face's ``/secrets/…`` both serve them. ``t`` is the consent's own capability
(action ``consent``, see :class:`~setup_agent.secrets.Capabilities`): it opens this one consent,
is spent by the answer, and is handed only to the user's channels (URL-mode elicitation, a page
mcp-setup opens in the user's browser), never to an agent. A secret-entry link's key opens no
consent.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from setup_agent.errors import ConsentDenied, ConsentNotFound, InvalidInput
from setup_agent.secrets import Capabilities
from setup_agent.setup import ConsentBroker, ConsentRequest, budget_line, consent_document

from .html import document, esc, message_page

__all__ = ["ONLY_THESE", "add_consent_routes", "consent_lines", "consent_path", "tools_note"]

log = logging.getLogger(__name__)

_CONSENT_ID = re.compile(r"[A-Za-z0-9_-]{16,128}")
_MAX_FIELDS = 64 + 512  # the fields, and one box per tool


def consent_path(consent_id: str, key: str) -> str:
    """The page's path and query for ``consent_id`` with its capability ``key``."""
    return f"/secrets/consents/{quote(consent_id, safe='')}?t={quote(key, safe='')}"


def consent_lines(request: ConsentRequest, *, tools: bool = True) -> list[str]:
    """The consent's document (:func:`~setup_agent.setup.consent_document`) as a terminal prints
    it: who asked, what approving means, then each section's title and its lines, indented; the
    technical details last, as in the page. ``tools=False`` leaves out the tools (a terminal that
    numbers them to untick prints them itself)."""
    doc = consent_document(request)
    out = [doc.asked, doc.intro]
    for section in doc.sections:
        if section.key == "tools" and not tools:
            continue
        out.append(f"{section.title}:")
        for line in section.lines:
            first, *more = line.text.split("\n")
            lead = f"  {line.label}: " if line.label else "  - "
            out.append(lead + first)
            out += [" " * len(lead) + rest for rest in more]
    return out


#: The choice offered after a test through the proxy (the page, the terminals).
ONLY_THESE = "Let it connect only to these from now on ({})"


def _enable(request: ConsentRequest) -> str:
    """The command that turns a left-out tool back on, for this server (a qualified name resolves)."""
    return f"mcp-setup enable {request.server} --tool TOOL"


def tools_note(request: ConsentRequest) -> str:
    """What the tool boxes mean, in a person's words (the page, the modal's twin, the terminal),
    and where they leave the context budget."""
    total = sum(int(t.get("estimated_tokens") or 0) for t in request.tools)
    budget = budget_line(request, lead=False)
    return (
        f"Its {len(request.tools)} tools add about {total} tokens to every conversation with your assistant. "
        "Untick the ones you do not want: your assistant will not see or use them. You can turn one back on "
        f"later with {_enable(request)}. If you untick them all, it is installed with no tools."
        + (f" {budget}" if budget else "")
    )


def _page(title: str, body: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(document(f"{title} — mcp-setup", body), status_code=status)


def _rows(section: Any) -> str:
    items = "".join(
        (  # a setting's value or a command in code; a sentence (no label) as words
            f"<dt>{esc(line.label)}</dt><dd><code>{esc(line.text)}</code></dd>\n"
            if line.label
            else f'<dd class="whole">{esc(line.text)}</dd>\n'
        )
        for line in section.lines
    )
    return f'<dl class="{esc(section.key)}">\n{items}</dl>\n'


def _form(
    consent_id: str,
    request: ConsentRequest,
    token: str,
    *,
    error: str | None = None,
    status: int = 200,
    hidden: frozenset[str] = frozenset(),  # re-shown after an error: the boxes the person unticked stay so
) -> HTMLResponse:
    doc = consent_document(request)
    fields = ""
    for d in request.destinations:
        fields += (
            f'<label for="setting-{esc(d.name)}">Where it connects: {esc(d.name)}</label>\n'
            + (f'<p class="note">{esc(d.description)}</p>\n' if d.description else "")
            + f'<p class="note">The assistant suggested <code>{esc(d.suggested)}</code>. Change it if that is not '
            "where you want your secrets sent; the value here is the one used.</p>\n"
            f'<input type="text" id="setting-{esc(d.name)}" name="setting.{esc(d.name)}" value="{esc(d.suggested)}" '
            'required spellcheck="false" autocapitalize="off" autocomplete="off">\n'
        )
    warnings = ""
    if request.warnings:
        items = "".join(f"<li><strong>{esc(w.code)}</strong>: {esc(w.message)}</li>" for w in request.warnings)
        warnings = (
            f'<h2>Warnings</h2>\n<ul id="warnings">{items}</ul>\n'
            '<label><input type="checkbox" name="accept_warnings" value="yes"> I understand these warnings and '
            "accept them</label>\n"
        )
    widen = ""
    if request.widenable:  # the user's widening of the sandbox: never the agent's
        widen = (
            '<label for="sandbox-extra">Another folder it may read and write (optional)</label>\n'
            '<p class="note">A full path such as /home/you/notes. Leave it empty to give it only its own folder.</p>\n'
            '<input type="text" id="sandbox-extra" name="sandbox.extra_path" spellcheck="false" autocapitalize="off" '
            'autocomplete="off">\n'
            '<label><input type="checkbox" name="sandbox.no_network" value="yes"> Run it with no network</label>\n'
        )
        if request.home_files:  # files of the home its command line names: kept from it unless ticked
            files = "".join(
                f'<li><label><input type="checkbox" name="sandbox.read.{i}" value="yes"> Let it read '
                f"<code>{esc(path)}</code></label></li>"
                for i, path in enumerate(request.home_files)
            )
            widen += (
                '<p class="note">Its command line names these files in your home folder. It cannot read them '
                f"unless you tick them:</p>\n<ul>{files}</ul>\n"
            )
    only = ""
    if request.only_these:  # the person may narrow it to what its test reached
        only = (
            '<label><input type="checkbox" name="sandbox.only_these" value="yes"> '
            f"{esc(ONLY_THESE.format(', '.join(request.only_these)))}</label>\n"
        )
    alert = f'<p class="error" role="alert">{esc(error)}</p>\n' if error else ""
    boxes = "".join(
        f'<li><label><input type="checkbox" name="tool.{i}" value="keep"{"" if t["name"] in hidden else " checked"}> '
        f"<code>{esc(t['name'])}</code>"
        + (f" {esc(t['title'])}" if t.get("title") else "")
        + f' <span class="note">(about {esc(t.get("estimated_tokens", 0))} tokens)</span></label>'
        + (f'<p class="note">{esc(t["description"])}</p>' if t.get("description") else "")
        + "</li>\n"
        for i, t in enumerate(request.tools)
    )
    enable = esc(_enable(request))
    note = esc(tools_note(request)).replace(enable, f"<code>{enable}</code>")
    # Each section of the document, and under it what the person may change there.
    controls = {"settings": fields, "sandbox": widen, "network": only}
    parts = ""
    for section in doc.sections:
        if section.key == "tools":
            parts += f'<h2>{esc(section.title)}</h2>\n<p>{note}</p>\n<ul id="tools" class="tools">\n{boxes}</ul>\n'
        elif section.folded:
            parts += f"<details><summary>{esc(section.title)}</summary>\n{_rows(section)}</details>\n"
        else:
            parts += f"<h2>{esc(section.title)}</h2>\n{_rows(section)}"
        parts += controls.pop(section.key, "")
    parts += "".join(controls.values())  # a control whose section has no line to show
    body = (
        f"<h1>{esc(doc.title)}</h1>\n"
        f'<p id="asked"><strong>{esc(doc.asked)}</strong></p>\n<p>{esc(doc.intro)}</p>\n'
        f"{alert}"
        f'<form method="post" action="/secrets/consents/{esc(consent_id)}" autocomplete="off">\n'
        f'<input type="hidden" name="t" value="{esc(token)}">\n'
        f'<div id="launch">\n{parts}</div>\n'
        + _choices(request)
        + warnings
        # Deny is the safe default: first (Enter in a field submits it), focused, and drawn as the main button.
        + '<div class="buttons">\n'
        '<button type="submit" name="action" value="deny" class="primary" formnovalidate autofocus>Deny</button>\n'
        '<button type="submit" name="action" value="approve" class="approve">Approve</button>\n'
        "</div>\n</form>"
    )
    return _page(f"Allow {request.server}?", body, status)


def _choices(request: ConsentRequest) -> str:
    """Each of the consent's choices (setup_agent/setup/consent_choices.py) as a group of radio
    buttons, its default picked; sent as ``choice.<name>``."""
    out = ""
    for choice in request.choices:
        radios = "".join(
            f'<label><input type="radio" name="choice.{esc(choice["name"])}" value="{esc(o["value"])}"'
            f"{' checked' if o['value'] == choice['default'] else ''}> {esc(o['label'])}</label>\n"
            for o in choice["options"]
        )
        out += f'<fieldset class="choice"><legend>{esc(choice["label"])}</legend>\n{radios}</fieldset>\n'
    return out


def add_consent_routes(
    app: FastAPI,
    consents: Callable[[], ConsentBroker | None],
    *,
    capabilities: Capabilities,
    origin_ok: Callable[[Request], bool],
    read_form: Callable[..., Any],
    refused: Callable[[], Response],
) -> None:
    """Add the consent page to the secret page ``app`` (its guards are passed in)."""

    def _opens(key: str | None, consent_id: str) -> bool:
        """This consent's key, live or spent (a spent one only learns that it was answered)."""
        return capabilities.allows(key, consent_id, "consent") or capabilities.spent(key, consent_id, "consent")

    def lookup(consent_id: str) -> tuple[ConsentBroker, Any] | Response:
        broker = consents()
        if broker is None or not _CONSENT_ID.fullmatch(consent_id):
            return message_page(404, "This request is no longer open", "Ask your assistant again.")
        try:
            return broker, broker.get(consent_id)
        except ConsentDenied:
            return message_page(
                410, "Denied", "You denied this request. Ask your assistant again if you changed your mind."
            )
        except ConsentNotFound as exc:
            return message_page(404, "This request is no longer open", exc.message)

    @app.get("/secrets/consents/{consent_id}")
    async def show(request: Request, consent_id: str) -> Response:
        key = request.query_params.get("t")
        if not _opens(key, consent_id):
            log.warning("Consent page: refused a GET without this consent's key")
            return refused()
        found = lookup(consent_id)
        if isinstance(found, Response):
            return found
        if not capabilities.allows(key, consent_id, "consent"):  # spent, yet still open: refused
            return refused()
        return _form(consent_id, found[1].request, key or "")

    @app.post("/secrets/consents/{consent_id}")
    async def answer(request: Request, consent_id: str) -> Response:
        if not origin_ok(request):
            log.warning("Consent page: refused a POST from a foreign origin")
            return refused()
        form = await read_form(request, max_fields=_MAX_FIELDS)
        if form is None:
            return message_page(400, "Could not read the form", "Go back, reload the page and try again.")
        key = form.get("t")
        if not _opens(key, consent_id):
            log.warning("Consent page: refused a POST without this consent's key")
            return refused()
        found = lookup(consent_id)
        if isinstance(found, Response):
            return found
        if not capabilities.allows(key, consent_id, "consent"):
            return refused()
        broker, pending = found
        action = form.get("action")
        hidden: list[str] = []
        try:
            if action == "deny":
                broker.deny(consent_id, "denied on the consent page", by="user:consent-page")
                capabilities.consume(key, consent_id, "consent")
                return message_page(200, "Denied", "Nothing runs. You can close this tab and return to your assistant.")
            if action != "approve":
                return message_page(400, "Unknown action", "Use the Approve or Deny button.")
            settings = {k.removeprefix("setting."): v for k, v in form.items() if k.startswith("setting.")}
            extra = (form.get("sandbox.extra_path") or "").strip()
            reads = [p for i, p in enumerate(pending.request.home_files) if form.get(f"sandbox.read.{i}") == "yes"]
            sandbox: dict[str, Any] = {
                "extra_paths": [extra] if extra else [],
                "network": form.get("sandbox.no_network") != "yes",
                "reads": reads,
            }
            if form.get("sandbox.only_these") == "yes":
                sandbox["only_these"] = True
            kept = {k.removeprefix("tool.") for k in form if k.startswith("tool.")}  # ticked boxes only
            hidden = [t["name"] for i, t in enumerate(pending.request.tools) if str(i) not in kept]
            broker.approve(
                consent_id,
                settings,
                accept_warnings=form.get("accept_warnings") == "yes",
                by="user:consent-page",
                sandbox=sandbox,
                hidden_tools=hidden,
                choices={k.removeprefix("choice."): v for k, v in form.items() if k.startswith("choice.")},
            )
            capabilities.consume(key, consent_id, "consent")
        except InvalidInput as exc:
            return _form(
                consent_id, pending.request, key or "", error=exc.message, status=400, hidden=frozenset(hidden)
            )
        except (ConsentNotFound, ConsentDenied) as exc:
            return message_page(409, "Already answered", exc.message)
        return message_page(
            200,
            "Approved",
            f"{pending.request.server} may run now. You can close this tab and return to your assistant.",
        )
