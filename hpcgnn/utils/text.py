r"""Text read from files, made safe to print: control characters escaped.

A graph file's ``name`` or ``source`` is data, not trusted text: an ESC sequence in it
would reach the terminal, and a newline would let it print a forged ``hpcgnn: error:``
line. :func:`printable` keeps every printable character (any script) and writes the
others as Python escapes (``\n``, ``\x1b``).
"""

from __future__ import annotations


def printable(text: str) -> str:
    """``text`` with every non-printable character written as its Python escape."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)
