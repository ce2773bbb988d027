"""Text a runner or a learner wrote, made inert: shown, never obeyed.

A runner's output reaches a teacher's terminal, output.txt, a spreadsheet, a platform's page.
A control character there is an instruction (move the cursor up, erase the screen, hide what
follows, draw right to left), so a runner could draw "Every check passed." over its real verdict.
Each such character is shown as its escape instead: `\\x1b`, `\\x0d`, `\\u202e`. Newline and tab
stay, as the messages' own layout uses them.
"""

from typing import Dict

# C0 but tab and newline, DEL, C1; the line and paragraph separators; the bidirectional marks,
# embeddings, overrides and isolates (Unicode's Bidi_Control) that reorder what is shown.
_CONTROLS = [code for code in range(0x20) if chr(code) not in "\t\n"] + list(range(0x7F, 0xA0))
_FORMATTING = [0x061C, 0x200E, 0x200F, 0x2028, 0x2029] + list(range(0x202A, 0x202F)) + list(range(0x2066, 0x206A))
_ESCAPES: Dict[int, str] = {code: "\\x%02x" % code for code in _CONTROLS}
_ESCAPES.update({code: "\\u%04x" % code for code in _FORMATTING})


def inert(text: str) -> str:
    """`text` with every character that a terminal or a page would obey shown as its escape."""
    return text.translate(_ESCAPES)
