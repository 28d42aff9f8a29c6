"""Go's text/tabwriter (flags 0, padding character ' '), for text upstream prints through it.

Cells end at a tab; a column block is a run of lines that have a cell in
that column; each column of a block is as wide as its widest cell plus the
padding, and never narrower than the minimum width.  A line without a tab
ends every block.  The text after a line's last tab is not aligned.
"""
from __future__ import annotations


def align(text: str, minwidth: int = 8, padding: int = 1) -> str:
    out: list[str] = []
    segment: list[list[str]] = []
    lines = text.split("\n")
    for i, line in enumerate(lines):
        cells = line.split("\t")
        segment.append(cells)
        if len(cells) == 1 and i < len(lines) - 1:  # a tab-less line: flush
            out.append(_format(segment, minwidth, padding))
            segment = []
    out.append(_format(segment, minwidth, padding, last=True))
    return "".join(out)


def _format(lines: list[list[str]], minwidth: int, padding: int, last: bool = False) -> str:
    out: list[str] = []
    widths: list[int] = []

    def write_lines(line0: int, line1: int) -> None:
        for i in range(line0, line1):
            cells = lines[i]
            for j, cell in enumerate(cells):
                out.append(cell)
                if j < len(widths):
                    out.append(" " * (widths[j] - len(cell)))
            if not (last and i == len(lines) - 1):
                out.append("\n")

    def format_block(line0: int, line1: int) -> None:
        column = len(widths)
        this = line0
        while this < line1:
            if column >= len(lines[this]) - 1:
                this += 1
                continue
            write_lines(line0, this)
            line0 = this
            width = minwidth
            while this < line1 and column < len(lines[this]) - 1:
                width = max(width, len(lines[this][column]) + padding)
                this += 1
            widths.append(width)
            format_block(line0, this)
            widths.pop()
            line0 = this
        write_lines(line0, line1)

    format_block(0, len(lines))
    return "".join(out)
