"""Terminal output saved as a text file, read as the text a reader saw on the screen.

Logs, CI output, ``script`` captures and pages rendered by ``nroff`` (``man ls > ls.txt``, the ``.txt`` manuals
Debian ships) hold the terminal's control sequences besides their text: ECMA-48 escapes for colour, bold and cursor
moves (``ESC [ 1 ; 31 m``), operating-system commands for window titles and hyperlinks (``ESC ] 8 ; ; URL ESC \\``),
and overstrikes, nroff's bold (``X BS X``) and underline (``_ BS X``). Kept, they split every styled word in two
(``\\x1b[1mman-db\\x1b[0m`` is ``[1m`` / ``man-db`` / ``[0m`` to a tokenizer), take a chunk's tokens, and make the
chunks of styled files look alike; a search for a bold word does not find it. The screen's text is kept, and line
breaks, tabs and carriage returns stay as they are.
"""

from __future__ import annotations

import re

_ESC = "\x1b"
_BACKSPACE = "\x08"
# ECMA-48, after ESC: a control sequence (CSI: "[", parameter bytes 0x30-0x3F, intermediate bytes 0x20-0x2F, a
# final byte 0x40-0x7E), an operating-system command or another string (OSC "]", DCS "P", SOS "X", PM "^", APC
# "_", up to BEL or the string terminator ESC \), a character-set designation (ESC ( B), or a two-byte escape
# (ESC 7, ESC =, ESC M). The string controls come first: "P", "X", "^", "]" and "_" are also final bytes of a
# two-byte escape.
_CONTROL_SEQUENCE = re.compile(
    r"\x1b(?:"
    r"\[[0-?]*[ -/]*[@-~]"  # CSI
    r"|[\]PX^_][^\x07\x1b\n]*(?:\x07|\x1b\\)?"  # OSC and the other control strings, to BEL, ST or the line's end
    r"|[ -/]+[0-~]"  # character sets and other escapes with intermediate bytes
    r"|[0-~]"  # two-byte escapes
    r")"
)
# An overstrike: a character, then a backspace; what the screen shows is the character struck over it.
_OVERSTRUCK = re.compile(r"[^\x08\n]\x08")


def screen_text(text: str) -> str:
    """``text`` without terminal control sequences and overstrikes: what a terminal showed of it. Text that holds
    no ESC or backspace character comes back as it is (the usual case, at the cost of two scans)."""
    if _ESC in text:
        text = _CONTROL_SEQUENCE.sub("", text).replace(_ESC, "")  # then an ESC that begins no sequence
    if _BACKSPACE in text:
        text = _OVERSTRUCK.sub("", text).replace(_BACKSPACE, "")  # then a backspace at a line's start
    return text
