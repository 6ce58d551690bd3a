"""Hostile files written at test time: DOCX zip parts by hand, so a million paragraphs take a second."""
from __future__ import annotations

import zipfile
from collections.abc import Iterable
from pathlib import Path

_CT = ('<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
       '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
       '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
       '<Default Extension="xml" ContentType="application/xml"/>'
       '<Override PartName="/word/document.xml" '
       'ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>')
_RELS = ('<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
         '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
         '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/'
         'officeDocument" Target="word/document.xml"/></Relationships>')
_HEAD = ('<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document '
         'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>')


def write_raw_docx(path: Path, body: Iterable[bytes]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("[Content_Types].xml", _CT)
        z.writestr("_rels/.rels", _RELS)
        with z.open("word/document.xml", "w", force_zip64=True) as f:
            f.write(_HEAD.encode())
            for part in body:
                f.write(part)
            f.write(b"</w:body></w:document>")
    return path


def many_paragraphs_docx(path: Path, n: int) -> Path:
    """~100 KB on disk, `n` one-letter paragraphs inside."""
    return write_raw_docx(path, (b"<w:p><w:r><w:t>x</w:t></w:r></w:p>" * 1000 for _ in range(n // 1000)))


def whitespace_bomb_docx(path: Path, mb: int) -> Path:
    """`mb` MB of whitespace XML in ~1 KB per MB on disk."""
    return write_raw_docx(path, (b" " * (1 << 20) for _ in range(mb)))


def law_text(n_articles: int = 12) -> str:
    arts = [f"第{i}条 用人单位应当依法建立和完善规章制度，保障劳动者享有劳动权利、履行劳动义务。试用期最长不得超过六个月。"
            for i in range(1, n_articles + 1)]
    return "# 测试劳动法\n\n第一章 总则\n\n" + "\n\n".join(arts) + "\n"
