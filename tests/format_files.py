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
    are ``(first page, last page, style, start)`` page-label ranges (style ``/r`` roman, ``/D`` decimal). The
    ligatures ``ﬁ`` and ``ﬂ`` in a line are drawn as those glyphs (``/fi``, ``/fl``), as typeset PDFs draw them."""
    from pypdf import PdfWriter
    from pypdf.generic import ArrayObject, DecodedStreamObject, DictionaryObject, NameObject, NumberObject

    def escaped(line: str) -> str:
        return line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")

    writer = PdfWriter()
    font = writer._add_object(
        DictionaryObject(
            {
                NameObject("/Type"): NameObject("/Font"),
                NameObject("/Subtype"): NameObject("/Type1"),
                NameObject("/BaseFont"): NameObject("/Helvetica"),
                NameObject("/Encoding"): DictionaryObject(
                    {
                        NameObject("/Type"): NameObject("/Encoding"),
                        NameObject("/BaseEncoding"): NameObject("/WinAnsiEncoding"),
                        NameObject("/Differences"): ArrayObject(
                            [NumberObject(1), NameObject("/fi"), NameObject("/fl")]
                        ),
                    }
                ),
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
        glyphs = shown.replace("ﬁ", "\x01").replace("ﬂ", "\x02")
        stream.set_data(f"BT /F1 11 Tf 13 TL 72 720 Td {glyphs} ET".encode("latin-1"))
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


def write_pptx(path: Path, *, title: str | None = None) -> Path:
    """A deck of three slides as PowerPoint's default template lays them out: a title slide; a title and content
    slide with two list levels, a text box and speaker notes; a slide with a table, its shapes added bottom first."""
    import pptx
    from pptx.util import Inches

    deck = pptx.Presentation()
    if title is not None:
        deck.core_properties.title = title
    first = deck.slides.add_slide(deck.slide_layouts[0])
    first.shapes.title.text = "Quarterly review"
    first.placeholders[1].text = "Platform team"
    second = deck.slides.add_slide(deck.slide_layouts[1])
    second.shapes.title.text = "Incidents"
    body = second.placeholders[1].text_frame
    body.text = "Two outages in March"
    detail = body.add_paragraph()
    detail.text, detail.level = "Both from an expired certificate", 1
    box = second.shapes.add_textbox(Inches(1), Inches(6.5), Inches(6), Inches(0.5))
    box.text_frame.text = "Source: the on-call log"
    second.notes_slide.notes_text_frame.text = "Renewals are automated since April."
    third = deck.slides.add_slide(deck.slide_layouts[5])  # title only
    note = third.shapes.add_textbox(Inches(1), Inches(6), Inches(6), Inches(0.5))
    note.text_frame.text = "Budgets in thousands"
    table = third.shapes.add_table(2, 2, Inches(1), Inches(2), Inches(6), Inches(1)).table
    for row, cells in zip(table.rows, [("team", "budget"), ("platform", "120")]):
        for cell, text in zip(row.cells, cells):
            cell.text = text
    third.shapes.title.text = "Budget"
    deck.save(str(path))
    return path


def write_xlsx(path: Path) -> Path:
    """A workbook of two sheets: an FAQ under a header below a blank row, with numbers and a date in its cells;
    and a sheet of records with a text column."""
    import datetime

    import openpyxl

    book = openpyxl.Workbook()
    faq = book.active
    faq.title = "FAQ"
    faq.append([])
    faq.append(["question", "answer", "since", "cost"])
    faq.append(["How do I get a badge?", "Ask the front desk.", datetime.datetime(2024, 5, 1), 0.0])
    faq.append(["Is parking paid?", "Yes, per day.", None, 4.5])
    docs = book.create_sheet("Docs")
    docs.append(["id", "title", "text"])
    docs.append(["kb-1", "Wi-Fi", "The guest network needs no password."])
    book.save(str(path))
    return path


def write_xls(path: Path) -> Path:
    """The workbook of :func:`write_xlsx` as Excel 97-2003 (.xls) with xlwt, a date cell formatted as one, and a
    boolean and an error value beside it."""
    import datetime

    import xlwt

    book = xlwt.Workbook()
    faq = book.add_sheet("FAQ")
    date = xlwt.easyxf(num_format_str="YYYY-MM-DD")
    for column, name in enumerate(["question", "answer", "since", "cost", "open"]):
        faq.write(1, column, name)  # row 0 left blank
    faq.write(2, 0, "How do I get a badge?")
    faq.write(2, 1, "Ask the front desk.")
    faq.write(2, 2, datetime.datetime(2024, 5, 1), date)
    faq.write(2, 3, 0.0)
    faq.write(2, 4, True)
    faq.write(3, 0, "Is parking paid?")
    faq.write(3, 1, "Yes, per day.")
    faq.write(3, 3, 4.5)
    faq.row(3).set_cell_error(4, "#DIV/0!")
    docs = book.add_sheet("Docs")
    for row, values in enumerate([["id", "title", "text"], ["kb-1", "Wi-Fi", "The guest network needs no password."]]):
        for column, text in enumerate(values):
            docs.write(row, column, text)
    book.add_sheet("Empty")
    book.save(str(path))
    return path


HTML_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="iso-8859-1"><title>Tides | Ocean handbook</title>
<style>body { color: red }</style><script>var tracking = "should not be read";</script></head>
<body>
<nav><a href="/">Home</a> &gt; <a href="/ocean">Ocean</a></nav>
<div class="sphinxsidebar">Sidebar search box</div>
<main>
<!-- generated by a tool -->
<h1>Tides</h1>
<p>Spring tides happen when the Sun and the Moon align. See <a href="https://example.org/x">the chart</a>.</p>
<h2>Neap tides<a class="mark" href="#neap">#</a></h2>
<p>Neap tides come when they stand at right angles, caf\xe9 owners say.</p>
<ul><li>high water</li><li>low water</li></ul>
<table><tr><th>tide</th><th>range</th></tr><tr><td>spring</td><td>large</td></tr></table>
<img src="wave.png" alt="a wave">
<table><tr><td><img src="prev.png"></td><td></td><td><p>Tables that lay a page out read as text.</p></td></tr></table>
</main>
<footer>Copyright the ocean people</footer>
</body></html>
"""


def write_html(path: Path, page: str = HTML_PAGE) -> Path:
    """An HTML page in Latin-1 (its <meta charset> says so), with navigation, a script and a footer around its
    <main>."""
    path.write_bytes(page.encode("latin-1"))
    return path


def write_epub(path: Path, *, title: str = "Tides and Moons", encrypt: str | None = None) -> Path:
    """An EPUB 3 book as e-book tools lay it out: the stored mimetype first, container.xml naming the package,
    a manifest listing the second chapter before the first (the spine gives the reading order), a navigation page
    and a stylesheet outside the spine; ``encrypt`` names a member that encryption.xml lists as encrypted."""
    import zipfile

    chapter = (
        '<?xml version="1.0" encoding="utf-8"?>\n<html xmlns="http://www.w3.org/1999/xhtml"><head><title>{0}</title>'
        "</head><body><h2>{0}</h2><p>{1}</p></body></html>"
    )
    package = f"""<?xml version="1.0" encoding="utf-8"?>
<package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="id">
  <metadata xmlns:dc="http://purl.org/dc/elements/1.1/">
    <dc:title>{title}</dc:title><dc:identifier id="id">x</dc:identifier>
  </metadata>
  <manifest>
    <item id="c2" href="text/ch2.xhtml" media-type="application/xhtml+xml"/>
    <item id="c1" href="text/ch1.xhtml" media-type="application/xhtml+xml"/>
    <item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>
    <item id="css" href="style.css" media-type="text/css"/>
  </manifest>
  <spine><itemref idref="c1"/><itemref idref="c2"/></spine>
</package>"""
    with zipfile.ZipFile(path, "w") as book:
        book.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip")
        book.writestr(
            "META-INF/container.xml",
            '<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">'
            '<rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>'
            "</rootfiles></container>",
            compress_type=zipfile.ZIP_DEFLATED,
        )
        book.writestr("OEBPS/content.opf", package, compress_type=zipfile.ZIP_DEFLATED)
        book.writestr("OEBPS/text/ch1.xhtml", chapter.format("Spring tides", "The Sun and the Moon align."))
        book.writestr("OEBPS/text/ch2.xhtml", chapter.format("Neap tides", "They stand at right angles."))
        book.writestr("OEBPS/nav.xhtml", chapter.format("Contents", "Spring tides, Neap tides"))
        book.writestr("OEBPS/style.css", "body { margin: 0 }")
        if encrypt is not None:
            book.writestr(
                "META-INF/encryption.xml",
                '<encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container" '
                'xmlns:enc="http://www.w3.org/2001/04/xmlenc#"><enc:EncryptedData><enc:CipherData>'
                f'<enc:CipherReference URI="{encrypt}"/></enc:CipherData></enc:EncryptedData></encryption>',
            )
    return path


ODT_NAMESPACES = (
    'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
    'xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" '
    'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
    'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
    'xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" '
    'xmlns:dc="http://purl.org/dc/elements/1.1/" '
    'xmlns:meta="urn:oasis:names:tc:opendocument:xmlns:meta:1.0" '
    'xmlns:presentation="urn:oasis:names:tc:opendocument:xmlns:presentation:1.0"'
)
# A body as LibreOffice Writer lays one out: an automatic style over Title, a table of contents, headings by outline
# level, a footnote and a comment inside paragraphs, a nested list, a table, a text box anchored in a paragraph, and
# a section.
ODT_BODY = """
<text:sequence-decls><text:sequence-decl text:display-outline-level="0" text:name="Table"/></text:sequence-decls>
<text:p text:style-name="P1">Tide Tables</text:p>
<text:table-of-content text:name="Contents"><text:index-body>
  <text:p>Why tides happen 1</text:p></text:index-body></text:table-of-content>
<text:h text:outline-level="1">Why tides happen</text:h>
<text:p>The Moon<text:s text:c="3"/>pulls the sea.<text:note text:note-class="footnote">
  <text:note-citation>1</text:note-citation><text:note-body><text:p>A footnote.</text:p></text:note-body>
  </text:note><office:annotation><dc:creator>R</dc:creator>
  <text:p>Check this.</text:p></office:annotation> Twice a <text:span>day</text:span>.</text:p>
<text:h text:outline-level="2">Kinds</text:h>
<text:list><text:list-item><text:p>Spring tides</text:p>
  <text:list><text:list-item><text:p>at new and full moon</text:p></text:list-item></text:list></text:list-item>
  <text:list-item><text:p>Neap tides</text:p></text:list-item></text:list>
<table:table table:name="Heights"><table:table-column/>
  <table:table-row><table:table-cell><text:p>Port</text:p></table:table-cell>
    <table:table-cell><text:p>Range</text:p></table:table-cell></table:table-row>
  <table:table-row><table:table-cell><text:p>Brest</text:p></table:table-cell>
    <table:table-cell><text:p>7 m</text:p></table:table-cell></table:table-row></table:table>
<text:p>See the box.<draw:frame draw:name="Box"><draw:text-box>
  <text:p>Boxed note.</text:p></draw:text-box></draw:frame></text:p>
<text:section text:name="Appendix"><text:p>Appendix text.</text:p></text:section>
"""


def write_odt(path: Path, body: str = ODT_BODY, *, title: str | None = None) -> Path:
    """An OpenDocument text file as LibreOffice writes one: a zip of its mimetype (first, stored), content.xml, with
    P1 an automatic style over Title, and meta.xml recording ``title`` (when given)."""
    return _write_opendocument(path, "text", body, title)


# Slides as LibreOffice Impress lays them out: a title frame and an outline frame with a list; a title, a table, a
# page-number placeholder and speaker notes; a slide holding a picture alone.
ODP_BODY = """
<draw:page draw:name="page1">
  <draw:frame presentation:class="title"><draw:text-box><text:p>Tides in one hour</text:p></draw:text-box></draw:frame>
  <draw:frame presentation:class="outline"><draw:text-box><text:list>
    <text:list-item><text:p>The Moon pulls</text:p>
      <text:list><text:list-item><text:p>and the Sun</text:p></text:list-item></text:list></text:list-item>
  </text:list></draw:text-box></draw:frame>
</draw:page>
<draw:page draw:name="page2">
  <draw:frame presentation:class="title"><draw:text-box><text:p>Ranges</text:p></draw:text-box></draw:frame>
  <draw:frame><table:table><table:table-row><table:table-cell><text:p>Brest</text:p></table:table-cell>
    <table:table-cell><text:p>7 m</text:p></table:table-cell></table:table-row></table:table></draw:frame>
  <draw:frame presentation:class="page-number"><draw:text-box><text:p>2</text:p></draw:text-box></draw:frame>
  <presentation:notes><draw:page-thumbnail/><draw:frame presentation:class="notes"><draw:text-box>
    <text:p>Mention the equinox.</text:p></draw:text-box></draw:frame></presentation:notes>
</draw:page>
<draw:page draw:name="page3"><draw:frame><draw:image/></draw:frame></draw:page>
"""


def write_odp(path: Path, body: str = ODP_BODY, *, title: str | None = None) -> Path:
    """An OpenDocument presentation as LibreOffice Impress writes one (see :func:`write_odt`)."""
    return _write_opendocument(path, "presentation", body, title)


def _write_opendocument(path: Path, kind: str, body: str, title: str | None) -> Path:
    import zipfile

    content = (
        f'<?xml version="1.0" encoding="UTF-8"?><office:document-content {ODT_NAMESPACES} office:version="1.3">'
        '<office:automatic-styles><style:style style:name="P1" style:family="paragraph" '
        'style:parent-style-name="Title"/></office:automatic-styles>'
        f"<office:body><office:{kind}>{body}</office:{kind}></office:body></office:document-content>"
    )
    recorded = f"<dc:title>{title}</dc:title>" if title else ""
    meta = (
        f'<?xml version="1.0" encoding="UTF-8"?><office:document-meta {ODT_NAMESPACES} office:version="1.3">'
        f"<office:meta><meta:generator>LibreOffice/7.4</meta:generator>{recorded}</office:meta></office:document-meta>"
    )
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("mimetype", f"application/vnd.oasis.opendocument.{kind}", compress_type=zipfile.ZIP_STORED)
        archive.writestr("content.xml", content, compress_type=zipfile.ZIP_DEFLATED)
        archive.writestr("meta.xml", meta, compress_type=zipfile.ZIP_DEFLATED)
    return path


# Two sheets as LibreOffice Calc saves them: a header row, a date, a merged (covered) cell, two blank rows written
# as one repeated row, a run of repeated cells, and the empty rows and columns Calc repeats to the sheet's edge.
ODS_BODY = """
<table:table table:name="FAQ">
  <table:table-column table:number-columns-repeated="1024"/>
  <table:table-row><table:table-cell office:value-type="string"><text:p>question</text:p></table:table-cell>
    <table:table-cell office:value-type="string"><text:p>answer</text:p></table:table-cell>
    <table:table-cell office:value-type="string"><text:p>updated</text:p></table:table-cell>
    <table:table-cell table:number-columns-repeated="1021"/></table:table-row>
  <table:table-row><table:table-cell office:value-type="string"><text:p>When is the tide high?</text:p>
    </table:table-cell>
    <table:table-cell office:value-type="string"><text:p>Twice a day.</text:p></table:table-cell>
    <table:table-cell office:value-type="date" office:date-value="2024-05-01"><text:p>05/01/24</text:p>
    </table:table-cell><table:table-cell table:number-columns-repeated="1021"/></table:table-row>
  <table:table-row table:number-rows-repeated="2"><table:table-cell table:number-columns-repeated="1024"/>
  </table:table-row>
  <table:table-row><table:table-cell table:number-columns-spanned="2" office:value-type="string">
    <text:p>Ask the harbour master.</text:p></table:table-cell><table:covered-table-cell/>
    <table:table-cell office:value-type="float" office:value="3"><text:p>3</text:p></table:table-cell>
  </table:table-row>
  <table:table-row table:number-rows-repeated="1048571"><table:table-cell table:number-columns-repeated="1024"/>
  </table:table-row>
</table:table>
<table:table table:name="Notes">
  <table:table-row><table:table-cell><text:p>id</text:p></table:table-cell>
    <table:table-cell><text:p>text</text:p></table:table-cell></table:table-row>
  <table:table-row><table:table-cell><text:p>n1</text:p></table:table-cell>
    <table:table-cell><text:p>Neap tides are small.</text:p></table:table-cell></table:table-row>
</table:table>
"""


def write_ods(path: Path, body: str = ODS_BODY) -> Path:
    """An OpenDocument spreadsheet as LibreOffice Calc writes one (see :func:`write_odt`)."""
    return _write_opendocument(path, "spreadsheet", body, None)


_OOXML = "application/vnd.openxmlformats-officedocument."
_VBA = "application/vnd.ms-office.vbaProject"
# Each Office Open XML variant's main part and its content type, as Office writes them; True: macro-enabled (Office
# keeps the VBA project in a part beside the main one).
OFFICE_VARIANTS = {
    ".docm": ("word/document.xml", "application/vnd.ms-word.document.macroEnabled.main+xml", True),
    ".dotx": ("word/document.xml", _OOXML + "wordprocessingml.template.main+xml", False),
    ".dotm": ("word/document.xml", "application/vnd.ms-word.template.macroEnabledTemplate.main+xml", True),
    ".pptm": ("ppt/presentation.xml", "application/vnd.ms-powerpoint.presentation.macroEnabled.main+xml", True),
    ".ppsx": ("ppt/presentation.xml", _OOXML + "presentationml.slideshow.main+xml", False),
    ".ppsm": ("ppt/presentation.xml", "application/vnd.ms-powerpoint.slideshow.macroEnabled.main+xml", True),
    ".potx": ("ppt/presentation.xml", _OOXML + "presentationml.template.main+xml", False),
    ".potm": ("ppt/presentation.xml", "application/vnd.ms-powerpoint.template.macroEnabled.main+xml", True),
    ".xlsm": ("xl/workbook.xml", "application/vnd.ms-excel.sheet.macroEnabled.main+xml", True),
    ".xltx": ("xl/workbook.xml", _OOXML + "spreadsheetml.template.main+xml", False),
    ".xltm": ("xl/workbook.xml", "application/vnd.ms-excel.template.macroEnabled.main+xml", True),
}


def office_variant(source: Path, target: Path) -> Path:
    """``source`` (a .docx, .pptx or .xlsx) written as the variant ``target``'s suffix names, as Office writes it:
    the main part's content type that variant's, and for a macro-enabled one a VBA project part that the main part's
    relationships name."""
    import re
    import zipfile

    main, content_type, macros = OFFICE_VARIANTS[target.suffix]
    folder, name = main.split("/")
    rels = f"{folder}/_rels/{name}.rels"
    with zipfile.ZipFile(source) as original, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as variant:
        for item in original.infolist():
            data = original.read(item)
            if item.filename == "[Content_Types].xml":
                text = data.decode()
                text, count = re.subn(
                    rf'(<Override PartName="/{re.escape(main)}" ContentType=")[^"]+"', rf'\g<1>{content_type}"', text
                )
                assert count == 1, f"{source} has no override for /{main}"
                if macros:
                    vba = f'<Override PartName="/{folder}/vbaProject.bin" ContentType="{_VBA}"/>'
                    text = text.replace("</Types>", vba + "</Types>")
                data = text.encode()
            elif item.filename == rels and macros:
                vba = (
                    '<Relationship Id="rIdVba" Target="vbaProject.bin" '
                    'Type="http://schemas.microsoft.com/office/2006/relationships/vbaProject"/>'
                )
                data = data.decode().replace("</Relationships>", vba + "</Relationships>").encode()
            variant.writestr(item, data)
        if macros:
            variant.writestr(f"{folder}/vbaProject.bin", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(504))
    return target
