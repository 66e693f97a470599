"""Go's `%q` for strings (`strconv.Quote`), for messages that must match Go byte for byte."""

from __future__ import annotations

from typing import Final

_ESCAPES: Final = {
    '"': '\\"',
    "\\": "\\\\",
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
}

_SURROGATES: Final = range(0xD800, 0xE000)
_ESCAPED_BYTES: Final = range(0xDC80, 0xDD00)  # what `surrogateescape` makes of a bad byte


def _escape(char: str) -> str:
    code = ord(char)
    if code in _SURROGATES:
        # Not a valid rune: Go sees the bytes and escapes each of them.
        handler = "surrogateescape" if code in _ESCAPED_BYTES else "surrogatepass"
        return "".join(f"\\x{byte:02x}" for byte in char.encode("utf-8", handler))
    if code < 0x20 or code == 0x7F:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def go_quote(text: str) -> str:
    """`text` double-quoted and escaped exactly as Go's `fmt.Sprintf("%q", text)`.

    Printable runes (Go's `unicode.IsPrint`: letters, marks, numbers, punctuation,
    symbols and the ASCII space, which is what `str.isprintable` accepts) are kept.
    """
    out = ['"']
    for char in text:
        escaped = _ESCAPES.get(char)
        if escaped is not None:
            out.append(escaped)
        elif char.isprintable():
            out.append(char)
        else:
            out.append(_escape(char))
    out.append('"')
    return "".join(out)


__all__ = ["go_quote"]
