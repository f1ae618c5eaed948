"""JSON with comments (JSONC, as VS Code and Zed write their settings: ``//`` and ``/* */``
comments, trailing commas), read, and edited in place.

:func:`loads` reads it (plain JSON is JSONC too). :func:`set_member` and :func:`remove_member`
change one member of an object by changing only that member's own text: every other byte of the
file (comments, key order, indentation, the other entries, a trailing comma) stays as it was, so
the diff a person reads shows only the entry that changed. A new member takes the indentation of
its neighbours.

Values with no comment inside are read by :mod:`json`'s own scanner; only the objects that hold
comments, trailing commas, or the members being edited are walked here, so a large file (Claude
Code's ``~/.claude.json``) is read at :mod:`json`'s speed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

__all__ = ["JsoncError", "loads", "remove_member", "set_member"]

_DECODER = json.JSONDecoder()
_BLANK = re.compile(r"[ \t]*(//[^\n]*)?")  # what may follow a member on its own line


class JsoncError(ValueError):
    """Not JSONC; ``lineno`` and ``colno`` as :class:`json.JSONDecodeError` gives them."""

    def __init__(self, msg: str, text: str, pos: int) -> None:
        self.msg, self.pos = msg, pos
        self.lineno = text.count("\n", 0, pos) + 1
        self.colno = pos - text.rfind("\n", 0, pos)
        super().__init__(f"{msg}: line {self.lineno} column {self.colno} (char {pos})")


@dataclass(frozen=True)
class _Member:
    key: str
    start: int  # the key's opening quote
    value_start: int
    value_end: int
    comma: int | None  # the comma after the value, if any


@dataclass(frozen=True)
class _Object:
    open: int  # its "{"
    close: int  # its "}"
    members: tuple[_Member, ...]

    def last(self, key: str) -> _Member | None:
        """The member ``key`` (the last one, as a JSON reader takes it)."""
        return next((m for m in reversed(self.members) if m.key == key), None)


class _Reader:
    def __init__(self, text: str) -> None:
        self.text = text

    def fail(self, msg: str, pos: int) -> JsoncError:
        return JsoncError(msg, self.text, pos)

    def skip(self, pos: int) -> int:
        """Past whitespace and comments."""
        text = self.text
        while pos < len(text):
            if text[pos] in " \t\r\n\ufeff":
                pos += 1
            elif text.startswith("//", pos):
                end = text.find("\n", pos)
                pos = len(text) if end < 0 else end + 1
            elif text.startswith("/*", pos):
                end = text.find("*/", pos + 2)
                if end < 0:
                    raise self.fail("Unterminated comment", pos)
                pos = end + 2
            else:
                break
        return pos

    def value(self, pos: int) -> tuple[Any, int]:
        """The value starting at ``pos`` (no whitespace before it) and where it ends."""
        text = self.text
        if pos >= len(text):
            raise self.fail("Expecting value", pos)
        char = text[pos]
        if char in "{[":
            try:  # no comment and no trailing comma inside: json's scanner, at its speed
                return _DECODER.raw_decode(text, pos)
            except json.JSONDecodeError:
                pass
            if char == "{":
                obj = self.object(pos)
                return {m.key: self.value(m.value_start)[0] for m in obj.members}, obj.close + 1
            return self.array(pos)
        try:
            return _DECODER.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise self.fail(exc.msg, exc.pos) from None

    def object(self, pos: int) -> _Object:
        """The object whose "{" is at ``pos``, with where each member is."""
        text, members = self.text, []
        i = self.skip(pos + 1)
        while True:
            if i < len(text) and text[i] == "}":
                return _Object(pos, i, tuple(members))
            if i >= len(text) or text[i] != '"':
                raise self.fail("Expecting property name enclosed in double quotes", i)
            key, after_key = self.value(i)
            colon = self.skip(after_key)
            if colon >= len(text) or text[colon] != ":":
                raise self.fail("Expecting ':' delimiter", colon)
            value_start = self.skip(colon + 1)
            _, value_end = self.value(value_start)
            j = self.skip(value_end)
            comma = j if j < len(text) and text[j] == "," else None
            members.append(_Member(key, i, value_start, value_end, comma))
            if comma is not None:
                i = self.skip(comma + 1)
            elif j < len(text) and text[j] == "}":
                i = j
            else:
                raise self.fail("Expecting ',' delimiter", j)

    def array(self, pos: int) -> tuple[list[Any], int]:
        text, items = self.text, []
        i = self.skip(pos + 1)
        while True:
            if i < len(text) and text[i] == "]":
                return items, i + 1
            item, end = self.value(i)
            items.append(item)
            j = self.skip(end)
            if j < len(text) and text[j] == ",":
                i = self.skip(j + 1)
            elif j < len(text) and text[j] == "]":
                i = j
            else:
                raise self.fail("Expecting ',' delimiter", j)

    def document(self) -> tuple[Any, int]:
        """The top-level value and where it starts."""
        start = self.skip(0)
        value, end = self.value(start)
        rest = self.skip(end)
        if rest < len(self.text):
            raise self.fail("Extra data", rest)
        return value, start

    def object_at(self, path: tuple[str, ...]) -> _Object | None:
        """The object at ``path`` (``()``: the top level); None when a key is missing or not an object."""
        _, start = self.document()
        if self.text[start] != "{":
            return None
        obj = self.object(start)
        for key in path:
            member = obj.last(key)
            if member is None or self.text[member.value_start] != "{":
                return None
            obj = self.object(member.value_start)
        return obj


def loads(text: str) -> Any:
    """The value of a JSONC document; :class:`JsoncError` says where it is not one."""
    return _Reader(text).document()[0]


# --- editing ----------------------------------------------------------------------------------


def _line_start(text: str, pos: int) -> int:
    return text.rfind("\n", 0, pos) + 1


def _indent_of(text: str, pos: int) -> str:
    """The whitespace that opens the line holding ``pos``."""
    start = _line_start(text, pos)
    return re.match(r"[ \t]*", text[start:]).group(0)  # type: ignore[union-attr]


def _own_line(text: str, pos: int) -> bool:
    """Only whitespace before ``pos`` on its line."""
    return not text[_line_start(text, pos) : pos].strip()


def _unit(text: str, reader: _Reader) -> str:
    """One level of the file's indentation (two spaces when it has none to copy)."""
    top = reader.object_at(())
    if top is not None and top.members and _own_line(text, top.members[0].start):
        inner = _indent_of(text, top.members[0].start)[len(_indent_of(text, top.open)) :]
        if inner:
            return inner
    return "  "


def _render(value: Any, indent: str, unit: str, compact: bool) -> str:
    if compact:
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, indent=unit, ensure_ascii=False).replace("\n", "\n" + indent)


def set_member(text: str, path: tuple[str, ...], name: str, value: Any) -> str:
    """``text`` with the object at ``path`` holding ``name: value``; a missing or non-object
    container on the way is made (or replaced) with only that member."""
    reader = _Reader(text)
    obj = reader.object_at(path)
    if obj is None:
        if not path:
            raise JsoncError("The file is not a JSON object", text, reader.document()[1])
        holder = reader.object_at(path[:-1])
        existing = holder.last(path[-1]) if holder is not None else None
        if existing is not None:  # there, but not an object (null, say): it becomes one
            obj = _Object(existing.value_start, existing.value_end - 1, ())
            unit = _unit(text, reader)
            indent = _indent_of(text, existing.start) + unit
            rendered = "{\n" + indent + _member_text(name, value, indent, unit, False) + "\n"
            rendered += _indent_of(text, existing.start) + "}"
            return text[: existing.value_start] + rendered + text[existing.value_end :]
        return set_member(text, path[:-1], path[-1], {name: value})
    unit = _unit(text, reader)
    compact = text.count("\n", obj.open, obj.close) == 0 and bool(obj.members)
    member = obj.last(name)
    if member is not None:
        indent = _indent_of(text, member.start)
        rendered = _render(value, indent, unit, compact)
        return text[: member.value_start] + rendered + text[member.value_end :]
    if not obj.members:
        return _fill_empty(text, obj, name, value, unit)
    return _add(text, obj, name, value, unit, compact)


def _add(text: str, obj: _Object, name: str, value: Any, unit: str, compact: bool) -> str:
    """A new member, placed so that no other line changes: after a last member that has a trailing
    comma, else first (right after the "{" line, above any comment there), with its own comma."""
    first, last = obj.members[0], obj.members[-1]
    indent = _indent_of(text, first.start) if _own_line(text, first.start) else _indent_of(text, obj.open) + unit
    entry = _member_text(name, value, indent, unit, compact)
    after = last.comma + 1 if last.comma is not None else last.value_end
    line_end = text.find("\n", after)
    line_end = len(text) if line_end < 0 else line_end
    if not compact and last.comma is not None and _BLANK.fullmatch(text, after, line_end) and obj.close > line_end:
        return text[:line_end] + "\n" + indent + entry + "," + text[line_end:]
    open_end = text.find("\n", obj.open)
    if not compact and 0 <= open_end < first.start and _BLANK.fullmatch(text, obj.open + 1, open_end):
        return text[: open_end + 1] + indent + entry + ",\n" + text[open_end + 1 :]
    text = text[:after] + " " + entry + ("," if last.comma is not None else "") + text[after:]
    return text if last.comma is not None else text[: last.value_end] + "," + text[last.value_end :]


def _member_text(name: str, value: Any, indent: str, unit: str, compact: bool) -> str:
    return json.dumps(name, ensure_ascii=False) + ": " + _render(value, indent, unit, compact)


def _fill_empty(text: str, obj: _Object, name: str, value: Any, unit: str) -> str:
    outer = _indent_of(text, obj.open)
    indent = outer + unit
    entry = _member_text(name, value, indent, unit, False)
    inner = text[obj.open + 1 : obj.close]
    if not inner.strip():
        return text[: obj.open] + "{\n" + indent + entry + "\n" + outer + "}" + text[obj.close + 1 :]
    return text[: obj.open + 1] + "\n" + indent + entry + text[obj.open + 1 :]  # only comments inside: first


def remove_member(text: str, path: tuple[str, ...], name: str) -> str:
    """``text`` without ``name`` in the object at ``path`` (every member by that name); as it was
    when there is none."""
    while True:
        obj = _Reader(text).object_at(path)
        member = obj.last(name) if obj is not None else None
        if obj is None or member is None:
            return text
        text = _cut(text, obj, member)


def _cut(text: str, obj: _Object, member: _Member) -> str:
    index = obj.members.index(member)
    previous = obj.members[index - 1] if index else None
    end = member.comma + 1 if member.comma is not None else member.value_end
    line_end = text.find("\n", end)
    line_end = len(text) if line_end < 0 else line_end
    if _own_line(text, member.start) and _BLANK.fullmatch(text, end, line_end) and line_end < obj.close:
        start, end = _line_start(text, member.start), line_end + 1  # the whole line, with its own comment
    elif member.comma is None and previous is not None:
        start = previous.value_end  # `, "name": value` out of one line
    else:
        start = member.start
        end = len(text) - len(text[end:].lstrip(" \t")) if member.comma is not None else end
    text = text[:start] + text[end:]
    if member.comma is None and previous is not None and previous.comma is not None and start > previous.comma:
        text = text[: previous.comma] + text[previous.comma + 1 :]  # it was the last: no comma dangles
    reader = _Reader(text)
    emptied = reader.object(obj.open)
    if not emptied.members and not text[emptied.open + 1 : emptied.close].strip():
        text = text[: emptied.open + 1] + text[emptied.close :]
    return text
