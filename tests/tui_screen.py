"""What a terminal shows after a program's output: a small VT100 screen for the TUI tests.

Claude Code's terminal UI redraws by moving the cursor and rewriting only the cells
that changed (``ESC[9G`` jumps over letters already on screen), so its raw output,
escapes stripped, drops letters.  :class:`Screen` replays the output onto a grid:
printable text, CR/LF/BS/TAB, the cursor moves (``A B C D G H f d``), erasing (``K``,
``J``), save/restore (``ESC 7/8``); colours, modes and window titles are read and
ignored.  A line feed past the bottom scrolls (the grid keeps every line, so the
whole session's text can be read, as a terminal's scrollback does).
"""

from __future__ import annotations

import re

_CSI = re.compile(r"\x1b\[([0-9;?<=>!]*)([ -/]*)([@-~])")
_OSC = re.compile(r"\x1b\][^\x07\x1b]*(\x07|\x1b\\)")
_ESC2 = re.compile(r"\x1b[()*+#][0-9A-Za-z]|\x1b[=>78cDEM]")


class Screen:
    """A grid of ``rows`` x ``columns`` cells over an unbounded scrollback."""

    def __init__(self, rows: int, columns: int) -> None:
        self.rows, self.columns = rows, columns
        self.lines: list[list[str]] = [[] for _ in range(rows)]
        self.top = 0  #: the scrollback index of the screen's first row
        self.row = self.col = 0  #: the cursor, relative to the screen
        self._saved = (0, 0)

    def _line(self) -> list[str]:
        while self.top + self.row >= len(self.lines):
            self.lines.append([])
        return self.lines[self.top + self.row]

    def _put(self, char: str) -> None:
        if self.col >= self.columns:
            self.col = 0
            self._down()
        line = self._line()
        while len(line) <= self.col:
            line.append(" ")
        line[self.col] = char
        self.col += 1

    def _down(self) -> None:
        if self.row == self.rows - 1:
            self.top += 1
        else:
            self.row += 1

    def feed(self, text: str) -> None:
        index = 0
        while index < len(text):
            char = text[index]
            if char == "\x1b":
                for pattern in (_OSC, _CSI, _ESC2):
                    match = pattern.match(text, index)
                    if match:
                        if pattern is _CSI:
                            self._csi(match.group(1), match.group(3))
                        elif pattern is _ESC2:
                            self._esc(match.group(0)[1])
                        index = match.end()
                        break
                else:
                    index += 1
                continue
            if char == "\r":
                self.col = 0
            elif char == "\n":
                self._down()
            elif char == "\b":
                self.col = max(0, self.col - 1)
            elif char == "\t":
                self.col = min(self.columns - 1, (self.col // 8 + 1) * 8)
            elif char >= " ":
                self._put(char)
            index += 1

    def _esc(self, final: str) -> None:
        if final == "7":
            self._saved = (self.row, self.col)
        elif final == "8":
            self.row, self.col = self._saved

    def _csi(self, params: str, final: str) -> None:
        if params.startswith(("?", "<", "=", ">", "!")):
            return  # modes
        numbers = [int(p) if p.isdigit() else 0 for p in params.split(";")] if params else []
        first = numbers[0] if numbers else 0
        count = max(first, 1)
        if final == "A":
            self.row = max(0, self.row - count)
        elif final == "B":
            self.row = min(self.rows - 1, self.row + count)
        elif final == "C":
            self.col = min(self.columns - 1, self.col + count)
        elif final == "D":
            self.col = max(0, self.col - count)
        elif final == "G":
            self.col = min(self.columns - 1, count - 1)
        elif final == "d":
            self.row = min(self.rows - 1, count - 1)
        elif final in "Hf":
            self.row = min(self.rows - 1, max(first, 1) - 1)
            second = numbers[1] if len(numbers) > 1 else 1
            self.col = min(self.columns - 1, max(second, 1) - 1)
        elif final == "K":
            line = self._line()
            if first == 0:
                del line[self.col :]
            elif first == 1:
                line[: self.col] = [" "] * min(self.col, len(line))
            else:
                line.clear()
        elif final == "J":
            if first == 0:
                del self._line()[self.col :]
                del self.lines[self.top + self.row + 1 :]
            elif first in (2, 3):
                for line in self.lines[self.top :]:
                    line.clear()

    def text(self) -> str:
        """Every line, scrollback first, trailing blanks cut."""
        return "\n".join("".join(line).rstrip() for line in self.lines)
