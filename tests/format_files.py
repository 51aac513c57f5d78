"""Real PDF, Word and HTML files for the reading tests, written with the libraries that read them (pypdf's writer,
python-docx) or by hand (HTML), so the readers meet what those tools produce."""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path


def write_pdf(
    path: Path,
    pages: Sequence[Sequence[str]],
    *,
    title: str | None = None,
    labels: Sequence[tuple[int, int, str, int]] = (),
    password: str | None = None,
) -> Path:
    """A PDF whose page ``n`` shows the lines ``pages[n]`` in Helvetica (a text layer pypdf extracts); ``labels``
    are ``(first page, last page, style, start)`` page-label ranges (style ``/r`` roman, ``/D`` decimal)."""
    from pypdf import PdfWriter
    from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

    def escaped(line: str) -> str:
        return line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")

    writer = PdfWriter()
    font = writer._add_object(
        DictionaryObject(
            {
                NameObject("/Type"): NameObject("/Font"),
                NameObject("/Subtype"): NameObject("/Type1"),
                NameObject("/BaseFont"): NameObject("/Helvetica"),
                NameObject("/Encoding"): NameObject("/WinAnsiEncoding"),
            }
        )
    )
    for lines in pages:
        page = writer.add_blank_page(612, 792)
        page[NameObject("/Resources")] = DictionaryObject(
            {NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})}
        )
        stream = DecodedStreamObject()
        shown = " ".join(f"({escaped(line)}) Tj T*" for line in lines)
        stream.set_data(f"BT /F1 11 Tf 13 TL 72 720 Td {shown} ET".encode("latin-1"))
        page[NameObject("/Contents")] = writer._add_object(stream)
    for first, last, style, start in labels:
        writer.set_page_label(first, last, style=style, start=start)
    if title is not None:
        writer.add_metadata({"/Title": title})
    if password is not None:
        writer.encrypt(password, algorithm="RC4-128")
    buffer = io.BytesIO()
    writer.write(buffer)
    path.write_bytes(buffer.getvalue())
    return path


def write_docx(path: Path, *, title: str | None = None) -> Path:
    """A Word document: a Title paragraph, two heading levels, body text, a bulleted list and a table."""
    import docx

    document = docx.Document()
    if title is not None:
        document.core_properties.title = title
    document.add_paragraph("Release handbook", style="Title")
    document.add_heading("Before a release", level=1)
    document.add_paragraph("Every release starts from a green main branch.")
    document.add_paragraph("Tag the commit", style="List Bullet")
    document.add_paragraph("Build the wheels", style="List Bullet")
    document.add_heading("Support windows", level=2)
    table = document.add_table(rows=2, cols=2)
    for row, cells in zip(table.rows, [("version", "supported until"), ("2.1", "2027-06")]):
        for cell, text in zip(row.cells, cells):
            cell.text = text
    document.add_paragraph("")  # empty paragraphs are layout, not text
    document.add_paragraph("Security fixes reach the last two versions.")
    document.save(str(path))
    return path


HTML_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="iso-8859-1"><title>Tides | Ocean handbook</title>
<style>body { color: red }</style><script>var tracking = "should not be read";</script></head>
<body>
<nav><a href="/">Home</a> &gt; <a href="/ocean">Ocean</a></nav>
<div class="sphinxsidebar">Sidebar search box</div>
<main>
<h1>Tides</h1>
<p>Spring tides happen when the Sun and the Moon align. See <a href="https://example.org/x">the chart</a>.</p>
<h2>Neap tides</h2>
<p>Neap tides come when they stand at right angles, caf\xe9 owners say.</p>
<ul><li>high water</li><li>low water</li></ul>
<table><tr><th>tide</th><th>range</th></tr><tr><td>spring</td><td>large</td></tr></table>
<img src="wave.png" alt="a wave">
</main>
<footer>Copyright the ocean people</footer>
</body></html>
"""


def write_html(path: Path, page: str = HTML_PAGE) -> Path:
    """An HTML page in Latin-1 (its <meta charset> says so), with navigation, a script and a footer around its
    <main>."""
    path.write_bytes(page.encode("latin-1"))
    return path
