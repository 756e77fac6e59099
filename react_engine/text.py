"""Text made safe to send and to write: lone surrogates replaced, line separators escaped.

Lossless for valid text; at the bottom of the layers (imports nothing of the package).
"""

from __future__ import annotations

import re

__all__ = ["escape_separators", "valid_unicode"]

_SURROGATE = re.compile("[\ud800-\udfff]")


def valid_unicode(text: str) -> str:
    """``text`` with lone surrogates (``surrogateescape``, a JSON ``\\ud83d``) replaced by
    U+FFFD, so that it encodes as UTF-8."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


def escape_separators(line: str) -> str:
    """A JSON line with U+2028, U+2029 and U+0085 escaped (some readers split on them)."""
    if "\u2028" in line or "\u2029" in line or "\x85" in line:
        line = line.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
        line = line.replace("\x85", "\\u0085")
    return line
