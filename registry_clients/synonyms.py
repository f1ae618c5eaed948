"""The words people use for a service or a task, and the words the registries use for it.

Two small tables, read by the ranker (:mod:`registry_clients.ranking`: a word also matches
a field holding one of its alternatives, at a lower weight than the word itself) and by the
official registry's widened search (:mod:`registry_clients.official`: each alternative of
three letters or more is one more name to ask for).

- :data:`SAME`: spellings and nicknames of one thing. Each word of a group stands for every
  other: ``k8s`` finds ``mcp-server-kubernetes`` and ``kubernetes`` finds ``mcp-k8s-go``.
- :data:`KINDS`: a task or kind of service → the services that do it, one way: ``email``
  finds the Gmail and Outlook servers, but ``gmail`` does not find Outlook.

Words are looked up by their stem (:func:`registry_clients.words.stem`), so ``emails``
and ``databases`` find the rows of ``email`` and ``database``; two words that are one when
written together find that one's row (``hacker news``: ``hackernews``, so ``hn``). Keep the rows to what a
person would agree with at once: an alternative that is only *related* (``chat`` →
``zoom``) pulls unrelated servers up.
"""

from __future__ import annotations

from .words import stem

__all__ = ["KINDS", "SAME", "alternatives", "alternatives_of"]

#: Groups of words that name the same thing.
SAME: tuple[tuple[str, ...], ...] = (
    ("kubernetes", "k8s", "kube"),
    ("postgres", "postgresql", "pg", "psql"),
    ("github", "gh"),
    ("gitlab", "gl"),
    ("javascript", "js"),
    ("typescript", "ts"),
    ("mongodb", "mongo"),
    ("database", "db"),
    ("mssql", "sqlserver"),
    ("elasticsearch", "elastic"),
    ("youtube", "yt"),
    ("hackernews", "hn"),
    ("homeassistant", "hass"),
    ("huggingface", "hf"),
    ("twitter", "tweet"),
    ("bitcoin", "btc"),
    ("ethereum", "eth"),
    ("cryptocurrency", "crypto"),
    ("aws", "amazon"),
    ("gcp", "googlecloud"),
    ("email", "mail"),
    ("calendar", "gcal"),
    ("spreadsheet", "sheet"),
    ("repository", "repo"),
    ("documentation", "docs"),
    ("scrape", "crawl"),
    ("message", "msg"),
    ("translate", "i18n"),
    ("vulnerability", "vuln"),
    ("notify", "ntfy"),
)

#: A task or kind of service → services that do it (one way).
KINDS: dict[str, tuple[str, ...]] = {
    "email": ("gmail", "outlook", "inbox"),
    "chat": ("slack", "discord", "teams", "telegram", "whatsapp"),
    "message": ("slack", "discord", "telegram", "whatsapp", "sms"),
    "browser": ("playwright", "puppeteer", "selenium", "chrome"),
    "database": ("sql", "postgres", "mysql", "mongodb", "sqlite", "redis"),
    "sql": ("postgres", "mysql", "mssql", "sqlite"),
    "payment": ("stripe", "paypal", "checkout"),
    "spreadsheet": ("excel", "sheets"),
    "note": ("obsidian", "notion", "memos"),
    "todo": ("todoist", "ticktick", "task"),
    "task": ("todoist", "ticktick", "clickup"),
    "wiki": ("confluence", "wikipedia", "wikidata"),
    "jira": ("atlassian",),
    "confluence": ("atlassian",),
    "crm": ("hubspot", "salesforce"),
    "video": ("youtube",),
    "music": ("spotify",),
    "monitoring": ("datadog", "grafana", "prometheus", "sentry", "observability"),
    "observability": ("datadog", "grafana", "prometheus", "monitoring"),
    "cloud": ("aws", "gcp", "azure"),
    "sms": ("twilio",),
    "phone": ("dialer", "twilio"),
    "notification": ("ntfy", "pushover"),
    "bookmark": ("raindrop", "pinboard"),
    "diagram": ("excalidraw", "mermaid", "drawio"),
    "academic": ("scholar", "arxiv", "pubmed"),
    "meeting": ("zoom", "teams"),
    "deploy": ("vercel", "netlify", "heroku", "cloudflare"),
}


def _index() -> dict[str, tuple[str, ...]]:
    index: dict[str, list[str]] = {}
    for group in SAME:
        for word in group:
            index.setdefault(stem(word), []).extend(w for w in group if w != word)
    for word, services in KINDS.items():
        index.setdefault(stem(word), []).extend(services)
    return {key: tuple(dict.fromkeys(words)) for key, words in index.items()}


_INDEX = _index()


def alternatives(word: str) -> tuple[str, ...]:
    """Other words that find what ``word`` is about, none when the tables have no row for it."""
    return tuple(w for w in _INDEX.get(stem(word), ()) if w != word)


def alternatives_of(words: list[str]) -> list[tuple[str, ...]]:
    """The alternatives of each of ``words``, in order. Two neighbours that are one word when
    written together (``hacker news``, ``home assistant``) also get that word and its row:
    each of the two then finds ``hn-mcp-server`` or ``hass-mcp``."""
    out = [list(alternatives(w)) for w in words]
    for i in range(len(words) - 1):
        joined = words[i] + words[i + 1]
        row = alternatives(joined)
        if row:
            out[i] += [joined, *row]
            out[i + 1] += [joined, *row]
    return [tuple(dict.fromkeys(a for a in alts if a != w)) for w, alts in zip(words, out)]
