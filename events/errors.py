"""The events package's error type, and how values are shown in messages (STYLE R8).

``EventError`` is raised by the public helpers that can fail (``parse_time_ms``, ``format_time``,
``to_json``, ``Origin`` factories) and internally by the field checks; ``parse_record`` catches it
and returns a :class:`~events.dead_letter.DeadLetter` instead, so nothing raises out of parsing.
"""

from __future__ import annotations

import json

from events.dead_letter import Reason

_SHOW_CHARS = 80


class EventError(ValueError):
    """A record, field or value that the contract does not allow.

    Attributes:
        reason: the dead-letter code this failure maps to.
        detail: the message: field, what was expected, what arrived.
    """

    def __init__(self, reason: Reason, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


def describe(value: object) -> str:
    """Show a received value the way a JSON author wrote it, shortened for a message.

    Strings are quoted, ``None`` is ``null``, booleans are ``true``/``false``; lists and objects are
    summarised by their size, so a huge value never ends up in a message whole.
    """
    if isinstance(value, (list, tuple)):
        return f"a list of {len(value)} item{'s' if len(value) != 1 else ''}"
    if isinstance(value, dict):
        return f"an object with {len(value)} key{'s' if len(value) != 1 else ''}"
    if isinstance(value, str) and len(value) > _SHOW_CHARS:
        value, suffix = value[:_SHOW_CHARS], f"... ({len(value)} characters)"
    else:
        suffix = ""
    try:
        text = json.dumps(value, ensure_ascii=False)
        text.encode("utf-8")
    except (TypeError, ValueError):
        # Not a JSON value (a mapping input may hold anything), or an unpaired surrogate: escape it.
        try:
            text = json.dumps(value)
        except (TypeError, ValueError):
            text = f"a value of Python type {type(value).__name__}"
    if len(text) > _SHOW_CHARS + 2:
        text, suffix = text[:_SHOW_CHARS], "..."
    return text + suffix


__all__ = ["EventError", "describe"]
