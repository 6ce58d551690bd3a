"""Give PDF text back the line structure the legal chunker keys on.

unstructured's fast PDF strategy (pdfminer) joins a page's lines with spaces, so `第五条` no longer
starts a line and a wrapped line leaves a space inside a Chinese word (`工 种`). We restore a
break before each structural label that follows whitespace (`… 第五条 国家…`, `… 第二章 促进就业`)
and before an item `（一）` that follows a sentence end, then drop wrap spaces between CJK
characters. A mid-sentence reference (`依照本法第十条的规定`) has no surrounding spaces and stays.
"""
from __future__ import annotations

import re

from rag_app.text import CN_NUM

# `(?<![ \t])`: try each run of spaces once; starting inside a long run was quadratic.
_LABEL_BREAK = re.compile(rf"(?<![ \t])[ \t]+(?=第[{CN_NUM}\d]+(?:条(?:之[{CN_NUM}]+)?|章|节|编|分编)[ \t　])")
_ITEM_BREAK = re.compile(rf"(?<=[。；：:;])[ \t]+(?=（[{CN_NUM}\d]+）)")
_LEADING_LABEL = re.compile(rf"^(第[{CN_NUM}\d]+(?:条(?:之[{CN_NUM}]+)?|章|节|编|分编)[ \t　]+)")
_CJK = "\u4e00-\u9fff，。、；：？！（）《》“”"
_WRAP_SPACE = re.compile(rf"(?<=[{_CJK}])[ \t]+(?=[{_CJK}])")


def restore_lines(text: str) -> str:
    text = _ITEM_BREAK.sub("\n", _LABEL_BREAK.sub("\n", text))
    out = []
    for line in text.split("\n"):
        m = _LEADING_LABEL.match(line)
        head, rest = (m.group(1), line[m.end():]) if m else ("", line)
        if head.startswith("第") and head.rstrip()[-1] in "章节编":
            out.append(head + rest)  # `第一章 总则` keeps the space between label and name
        else:
            out.append(head + _WRAP_SPACE.sub("", rest))
    return "\n".join(out)
