"""Real law text written into PDF and DOCX files at test time (reportlab, python-docx)."""
from __future__ import annotations

from pathlib import Path


def law_paragraphs(md_path: Path, n_articles: int) -> tuple[str, list[str]]:
    """(title, paragraphs) of the first n articles of a corpus law, headings included."""
    lines = md_path.read_text(encoding="utf-8").split("<!-- INFO END -->")[1].splitlines()
    title = md_path.read_text(encoding="utf-8").splitlines()[0].lstrip("# ").strip()
    out, articles = [], 0
    for line in lines:
        line = line.strip()
        if not line:
            continue
        if line.startswith("第") and "条" in line[:12]:
            articles += 1
            if articles > n_articles:
                break
        out.append(line.lstrip("# ").strip())
    return title, out


def write_pdf(path: Path, title: str, paragraphs: list[str], per_page: int = 8) -> None:
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.styles import ParagraphStyle
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.cidfonts import UnicodeCIDFont
    from reportlab.platypus import PageBreak, Paragraph, SimpleDocTemplate

    pdfmetrics.registerFont(UnicodeCIDFont("STSong-Light"))
    style = ParagraphStyle("zh", fontName="STSong-Light", fontSize=11, leading=16, wordWrap="CJK")
    story = [Paragraph(title, ParagraphStyle("t", parent=style, fontSize=16, leading=22))]
    for i, p in enumerate(paragraphs, 1):
        story.append(Paragraph(p, style))
        if i % per_page == 0:
            story.append(PageBreak())
    SimpleDocTemplate(str(path), pagesize=A4).build(story)


def write_docx(path: Path, title: str, paragraphs: list[str], table: list[list[str]] | None = None) -> None:
    import docx

    d = docx.Document()
    d.add_heading(title, level=0)
    for p in paragraphs:
        d.add_paragraph(p)
    if table:
        t = d.add_table(rows=len(table), cols=len(table[0]))
        for r, row in enumerate(table):
            for c, cell in enumerate(row):
                t.cell(r, c).text = cell
    d.save(str(path))
