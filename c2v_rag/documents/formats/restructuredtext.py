"""reStructuredText (Sphinx's and docutils' source format) as Markdown: the text as its rendered page shows it.

docutils, the reference parser, reads the file; its document tree is written out as Markdown (headings by section
depth, lists, fenced code, tables a row a line), so a chunk holds what a reader of the built page sees and
``chunk_context="headings"`` finds the sections. Read as plain text, a page kept its markup: roles
(``:prop_tgt:`OUTPUT_NAME```), directive lines (``.. versionadded:: 3.1``), label targets, comments, and whole
``toctree`` lists of file names, tokens the decoder spent its reading on and words BM25 matched.

Sphinx's own markup is not docutils': a directive or role docutils does not know (Sphinx's, its domains', any
extension's) is read by a fallback instead of being dropped with an error message:

- a role shows its text (``:ref:`the guide <guide>``` as ``the guide``, ``:py:meth:`~a.B.c``` as ``c``), as code
  where it is one word (a command, a variable, a function);
- a directive shows its argument and its content: an object's signature as code (``.. py:function:: connect(host,
  port)``, any directive of a domain, ``name:kind``, or named as Sphinx's object directives are), another argument
  as a line of text (an extension's title: ``.. tab:: Windows``); ``only`` shows its content, not its condition;
- the version notes read as Sphinx renders them ("Added in version 3.1: ..."), ``seealso`` as "See also:";
- what holds no text of the page (``toctree``, ``index``, ``highlight``, ``literalinclude`` and the other
  directives of :data:`_DROPPED_DIRECTIVES`) is left out.

Nothing outside the file is read: ``include``, ``raw`` and file options are refused (docutils'
``file_insertion_enabled`` and ``raw_enabled`` off), so a page cannot pull another file's text into the index. A
file docutils fails on is read as the plain text it is, with a warning.
"""

from __future__ import annotations

import copy
import functools
import logging
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from c2v_rag.documents.formats.base import FileFormat, file_document, read_text, titled_document
from c2v_rag.documents.reading import ReadLog, ReadOptions
from c2v_rag.documents.source_document import SourceDocument

logger = logging.getLogger(__name__)

# docutils' settings for a file read as a document: no messages anywhere (they are no text of the page), nothing
# read from outside the file, no configuration files of the user's, and an error raised to the reader (docutils'
# default reports it on stderr and exits the process).
_SETTINGS = {
    "traceback": True,
    "report_level": 5,
    "halt_level": 5,
    "warning_stream": False,
    "file_insertion_enabled": False,
    "raw_enabled": False,
    "input_encoding": "unicode",
    "syntax_highlight": "none",
    "_disable_config": True,
}
# Sphinx directives that hold no text of the page: the table of contents, index entries, settings for the build.
_DROPPED_DIRECTIVES = frozenset(
    {"toctree", "index", "highlight", "tabularcolumns", "currentmodule", "literalinclude", "default-domain",
     "autosummary", "sectionauthor", "moduleauthor", "codeauthor", "todolist", "acks", "module", "program"}
)  # fmt: skip
# Sphinx's object directives written without their domain (``.. function::`` in the default domain): their argument
# is a signature. Autodoc's (``autoclass``...) name an object too.
_OBJECT_DIRECTIVES = frozenset(
    {"function", "class", "method", "attribute", "data", "exception", "decorator", "property", "staticmethod",
     "classmethod", "describe", "object", "option", "cmdoption", "envvar", "confval", "type", "macro", "member",
     "var", "struct", "union", "enum", "enumerator", "concept"}
)  # fmt: skip
# Sphinx's version notes, as its HTML shows them (Sphinx 7.3 and later).
_VERSION_NOTES = {
    "versionadded": "Added in version",
    "versionchanged": "Changed in version",
    "deprecated": "Deprecated since version",
    "versionremoved": "Removed in version",
}
# Fields that are Sphinx's settings for the page, not its text. Where they open the file, they are taken off before
# the parse: docutils takes a title for the document's only where nothing comes before it.
_SETTING_FIELDS = frozenset({"orphan", "tocdepth", "nocomments", "nosearch"})
_OPENING_SETTINGS = re.compile(r"\A(?:[ \t]*\n|:(?:" + "|".join(sorted(_SETTING_FIELDS)) + r"):.*\n)+")
# Where a directive or a role is named: ``.. name::`` and ``:name:`text```.
_DIRECTIVE_NAME = re.compile(r"^[ \t]*\.\.[ \t]+([\w][\w:.+-]*)[ \t]*::", re.MULTILINE)
_ROLE_NAME = re.compile(r"(?<![\w`\\]):([\w][\w:.+-]*):`")
# A directive's argument that names a file or a URL (an extension's ``.. plot:: examples/tides.py``), which is no text
# of the page; a signature (``predict(place, when)``) or a name (``tides.Model``) is.
_PATH = re.compile(r"^[^\s(]*[/\\][^\s(]*$")
# Sphinx's explicit title, "the guide <target>".
_EXPLICIT_TITLE = re.compile(r"^(.+?)\s+<([^<>]+)>$", re.DOTALL)
_BLANK_RUNS = re.compile(r"\n{3,}")
# docutils' registries are module-wide: the fallbacks are added for one parse and taken out again (as Sphinx's
# docutils_namespace does), one parse at a time.
_REGISTRY_LOCK = threading.Lock()


class ReStructuredText(FileFormat):
    name = "reStructuredText"
    suffixes = (".rst", ".rest")
    page_rank = 0

    def read(self, file: Path, root: str, options: ReadOptions, log: ReadLog) -> Iterator[SourceDocument]:
        text = read_text(file, options, log)
        if text is None:
            return
        try:
            title, body = rst_to_markdown(text)
        except Exception as err:  # noqa: BLE001 - a parser bug on one odd page must not cost the page: it is text
            logger.warning("%s: docutils could not parse it (%s: %s); read as plain text", log.shown(file),
                           type(err).__name__, err)  # fmt: skip
            yield file_document(file, root, text)
            return
        yield titled_document(file, root, title, body)  # one with no text is counted as empty, as a text file is


def rst_to_markdown(text: str) -> tuple[str | None, str]:
    """reStructuredText ``text``'s title (its document title, where it has one) and its content as Markdown
    (the module's docstring)."""
    from docutils.core import publish_doctree

    text = _OPENING_SETTINGS.sub("", text.lstrip("\ufeff"))
    settings = copy.copy(_settings())
    with _fallbacks_for(text, settings):
        document = publish_doctree(text, settings=settings)
    title = next((child for child in document.children if child.tagname == "title"), None)
    body = _MarkdownWriter().blocks(document, depth=1)
    return (_inline(title).strip() or None) if title is not None else None, _BLANK_RUNS.sub("\n\n", body).strip()


@functools.cache
def _settings() -> Any:
    """docutils' runtime settings for a read (:data:`_SETTINGS`), made once: making them took a third of the time
    of reading a short page."""
    from docutils.frontend import get_default_settings
    from docutils.parsers.rst import Parser
    from docutils.readers.standalone import Reader

    settings = get_default_settings(Reader, Parser)
    for name, value in _SETTINGS.items():
        setattr(settings, name, value)
    return settings


@contextmanager
def _fallbacks_for(text: str, settings: Any) -> Iterator[None]:
    """docutils' registries, during the block, with a fallback for each directive and role ``text`` names that
    docutils does not know."""
    from docutils import utils
    from docutils.parsers.rst import directives, languages, roles

    with _REGISTRY_LOCK:
        saved_directives, saved_roles = dict(directives._directives), dict(roles._roles)
        try:
            document = utils.new_document("", settings)
            english = languages.get_language("en")
            # docutils looks names up in lower case
            for name in {found.lower() for found in _DIRECTIVE_NAME.findall(text)}:
                if directives.directive(name, english, document)[0] is None:
                    directives.register_directive(name, _fallback_directive(name))
            for name in {found.lower() for found in _ROLE_NAME.findall(text)}:
                if roles.role(name, english, 0, document.reporter)[0] is None:
                    roles.register_local_role(name, _fallback_role)
            yield
        finally:
            directives._directives.clear()
            directives._directives.update(saved_directives)
            roles._roles.clear()
            roles._roles.update(saved_roles)


class _AnyOption(dict[str, Callable[[str], Any]]):
    """An option spec that takes every option, as it is: a fallback directive knows none of them."""

    def __missing__(self, key: str) -> Callable[[str], Any]:
        from docutils.parsers.rst import directives

        return directives.unchanged

    def __bool__(self) -> bool:
        return True  # docutils parses options only where the spec is truthy


def _fallback_directive(name: str) -> type:
    """A directive class for ``name``, one docutils does not know (the module's docstring)."""
    from docutils import nodes
    from docutils.parsers.rst import Directive

    kind = name.rsplit(":", 1)[-1]

    class Fallback(Directive):
        optional_arguments = 1
        final_argument_whitespace = True
        option_spec = _AnyOption()
        has_content = True

        def run(self) -> list[Any]:
            if kind in _DROPPED_DIRECTIVES:
                return []
            container = nodes.container()
            argument = self.arguments[0] if self.arguments else ""
            if kind in _VERSION_NOTES:
                version, *note = argument.split(maxsplit=1) or [""]  # the note may follow on the next lines
                text_nodes, _ = self.state.inline_text(" ".join(note), self.lineno)
                said = ":" if text_nodes or self.content else "."  # "Added in version 3.12." where nothing follows
                label = f"{_VERSION_NOTES[kind]} {version}".rstrip() + said
                container += nodes.paragraph("", label, *_spaced(text_nodes))
            elif kind == "seealso":
                container += nodes.paragraph("", "See also:")
                if argument:
                    text_nodes, _ = self.state.inline_text(argument, self.lineno)
                    container += nodes.paragraph("", "", *text_nodes)
            elif argument and kind != "only" and not _PATH.match(argument):  # only's: the builds it is for
                if ":" in name or kind in _OBJECT_DIRECTIVES or kind.startswith("auto"):
                    container += nodes.literal_block(argument, argument, classes=["signature"])
                else:
                    text_nodes, _ = self.state.inline_text(argument, self.lineno)
                    container += nodes.paragraph("", "", *text_nodes)
            if self.content:
                self.state.nested_parse(self.content, self.content_offset, container)
            return [container]

    Fallback.__name__ = f"Fallback_{kind}"
    return Fallback


def _spaced(text_nodes: list[Any]) -> list[Any]:
    from docutils import nodes

    return [nodes.Text(" "), *text_nodes] if text_nodes else []


def _fallback_role(
    name: str, rawtext: str, text: str, lineno: int, inliner: Any, options: Any = None, content: Any = None
) -> tuple[list[Any], list[Any]]:
    """A role docutils does not know: its explicit title as text (the author's words: ``:manual:`generators
    <cmake-generators(7)>``` reads ``generators``), else its target (``~`` shortening a dotted name to its last
    part), as code where it is one word."""
    from docutils import nodes
    from docutils.utils import unescape

    shown = unescape(text)
    explicit = _EXPLICIT_TITLE.match(shown)
    if explicit:
        return [nodes.Text(explicit.group(1))], []
    shown = shown.lstrip("!")
    if shown.startswith("~"):
        shown = shown[1:].rsplit(".", 1)[-1]
    if shown and not any(c.isspace() for c in shown):
        return [nodes.literal(rawtext, shown)], []
    return [nodes.Text(shown)], []


def _inline(node: Any) -> str:
    """A text element's inline content as Markdown text: code in backticks, emphasis and strong as marked,
    references as their text."""
    parts: list[str] = []
    for child in node.children:
        tag = child.tagname
        if tag == "#text":
            parts.append(child.astext())
        elif tag == "literal":
            parts.append(_code_span(child.astext()))
        elif tag == "emphasis":
            parts.append(f"*{_inline(child)}*")
        elif tag == "strong":
            parts.append(f"**{_inline(child)}**")
        elif tag in ("footnote_reference", "citation_reference"):
            parts.append(f"[{child.astext()}]")
        elif tag == "math":
            parts.append(f"${child.astext()}$")
        elif tag == "image":
            parts.append(child.get("alt", ""))
        elif tag in ("system_message", "raw", "comment", "substitution_definition"):
            continue
        else:  # reference, title_reference, inline, abbreviation, target...: their text
            parts.append(_inline(child) if child.children else child.astext())
    return "".join(parts)


def _code_span(text: str) -> str:
    ticks = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def _fence(code: str, language: str = "") -> str:
    ticks = "`" * max(3, max((len(run) for run in re.findall(r"^[ \t]*(`{3,})", code, re.MULTILINE)), default=0) + 1)
    return f"{ticks}{language}\n{code.rstrip()}\n{ticks}"


def _indented(text: str, prefix: str) -> str:
    """``text`` with every line after its first indented by ``len(prefix)`` spaces, its first led by ``prefix``."""
    pad = " " * len(prefix)
    lines = text.split("\n")
    return "\n".join([prefix + lines[0], *((pad + line) if line else "" for line in lines[1:])])


class _MarkdownWriter:
    """A docutils document tree as Markdown blocks: each body element as the built page shows it."""

    # Elements that hold nothing a reader of the page sees.
    _SKIPPED = frozenset(
        {"title", "system_message", "comment", "target", "substitution_definition", "raw", "pending",
         "meta", "decoration", "transition", "problematic"}
    )  # fmt: skip

    def blocks(self, node: Any, depth: int) -> str:
        """``node``'s body elements as Markdown blocks; ``depth`` is the heading level its sections get."""
        out = []
        for child in node.children:
            block = self.block(child, depth)
            if block.strip():
                out.append(block)
        return "\n\n".join(out)

    def block(self, node: Any, depth: int) -> str:
        """One body element as Markdown (its kind's writer in :data:`_WRITERS`); another that holds elements
        (a block quote, a container, a figure, a glossary) as its blocks in order."""
        tag = node.tagname
        if tag in self._SKIPPED:
            return ""
        write = _WRITERS.get(tag) or (_MarkdownWriter._admonition if isinstance(node, _admonition_class()) else None)
        if write is not None:
            return write(self, node, depth)
        if node.children:
            return self.blocks(node, depth)
        return node.astext() if tag == "#text" else ""

    def _section(self, node: Any, depth: int) -> str:
        title = next((c for c in node.children if c.tagname == "title"), None)
        heading = "#" * min(depth + 1, 6) + " " + " ".join(_inline(title).split()) if title is not None else ""
        return "\n\n".join(filter(None, [heading, self.blocks(node, depth + 1)]))

    def _text(self, node: Any, depth: int) -> str:
        return _inline(node)

    def _code(self, node: Any, depth: int) -> str:
        classes = node.get("classes", [])
        return _fence(node.astext(), classes[1] if len(classes) > 1 and classes[0] == "code" else "")

    def _math(self, node: Any, depth: int) -> str:
        return f"$$\n{node.astext()}\n$$"

    def _definitions(self, node: Any, depth: int) -> str:
        return "\n\n".join(self._definition(item, depth) for item in node.children)

    def _fields(self, node: Any, depth: int) -> str:
        return "\n".join(filter(None, (self._field(field, depth) for field in node.children)))

    def _options(self, node: Any, depth: int) -> str:
        return "\n".join(self._option(item, depth) for item in node.children)

    def _lines(self, node: Any, depth: int) -> str:
        lines = node.children
        return "\n".join(_inline(line) if line.tagname == "line" else self.block(line, depth) for line in lines)

    def _note(self, node: Any, depth: int) -> str:
        """A footnote or a citation, after its label."""
        label = next((c.astext() for c in node.children if c.tagname == "label"), "")
        body = "\n\n".join(self.block(c, depth) for c in node.children if c.tagname != "label")
        return f"[{label}] {body}" if label else body

    def _topic(self, node: Any, depth: int) -> str:
        if "contents" in node.get("classes", []):
            return ""  # the table of contents docutils generated
        return self._admonition(node, depth)

    def _rubric(self, node: Any, depth: int) -> str:
        return f"**{_inline(node)}**"

    def _attribution(self, node: Any, depth: int) -> str:
        return "— " + _inline(node)

    def _image(self, node: Any, depth: int) -> str:
        return str(node.get("alt", ""))

    def _nothing(self, node: Any, depth: int) -> str:
        return ""  # a part its parent's writer reads (a field's name, a footnote's label)

    def _list(self, node: Any, depth: int) -> str:
        items = [c for c in node.children if c.tagname == "list_item"]
        if node.tagname == "bullet_list":
            marks = ["- "] * len(items)
        else:
            start = node.get("start", 1)
            marks = [f"{start + i}. " for i in range(len(items))]
        tight = all(len(item.children) <= 1 for item in items)
        rendered = [_indented(self.blocks(item, depth) or "", mark) for mark, item in zip(marks, items, strict=True)]
        return ("\n" if tight else "\n\n").join(rendered)

    def _definition(self, item: Any, depth: int) -> str:
        term = " ".join(_inline(c) for c in item.children if c.tagname in ("term", "classifier"))
        definition = next((c for c in item.children if c.tagname == "definition"), None)
        body = self.blocks(definition, depth) if definition is not None else ""
        return term + ("\n" + _indented(body, ":   ") if body else "")

    def _field(self, field: Any, depth: int) -> str:
        if field.tagname != "field":  # a docinfo element: author, version, date...
            return f"{field.tagname.capitalize()}: {field.astext()}"
        name = next((c for c in field.children if c.tagname == "field_name"), None)
        body = next((c for c in field.children if c.tagname == "field_body"), None)
        shown_name = _inline(name) if name is not None else ""
        if shown_name.strip().lower() in _SETTING_FIELDS:
            return ""
        text = self.blocks(body, depth) if body is not None else ""
        return f"{shown_name}: {text}".rstrip()

    def _option(self, item: Any, depth: int) -> str:
        group = next((c for c in item.children if c.tagname == "option_group"), None)
        description = next((c for c in item.children if c.tagname == "description"), None)
        options = ", ".join(o.astext() for o in group.children) if group is not None else ""
        text = self.blocks(description, depth) if description is not None else ""
        return f"{_code_span(options)}: {text}" if options else text

    def _table(self, node: Any, depth: int) -> str:
        rows: list[list[str]] = []
        header_rows = 0
        for group in node.findall(lambda n: n.tagname in ("thead", "tbody")):
            for row in group.children:
                cells = [" ".join(self.blocks(entry, 1).split()) for entry in row.children if entry.tagname == "entry"]
                rows.append([cell.replace("|", "\\|") for cell in cells])
            if group.tagname == "thead":
                header_rows = len(rows)
        if not rows:
            return ""
        width = max(len(row) for row in rows)
        lines = ["| " + " | ".join(row + [""] * (width - len(row))) + " |" for row in rows]
        separator = "| " + " | ".join(["---"] * width) + " |"
        lines.insert(max(header_rows, 1), separator)
        if not header_rows:
            lines.insert(0, "| " + " | ".join([""] * width) + " |")  # a pipe table needs a header row
        title = next((c for c in node.children if c.tagname == "title"), None)
        return "\n".join([_inline(title), *lines] if title is not None else lines)

    def _admonition(self, node: Any, depth: int) -> str:
        title = next((c for c in node.children if c.tagname == "title"), None)
        label = _inline(title) if title is not None else node.tagname.capitalize()
        body = self.blocks(node, depth)
        if node.tagname in ("topic", "sidebar"):
            return f"**{label}**\n\n{body}" if body else ""
        return f"{label}: {body}" if body else ""


# Each kind of body element's writer, by its docutils tag name.
_WRITERS: dict[str, Callable[[_MarkdownWriter, Any, int], str]] = {
    "section": _MarkdownWriter._section,
    "paragraph": _MarkdownWriter._text,
    "subtitle": _MarkdownWriter._text,
    "caption": _MarkdownWriter._text,
    "literal_block": _MarkdownWriter._code,
    "doctest_block": _MarkdownWriter._code,
    "math_block": _MarkdownWriter._math,
    "bullet_list": _MarkdownWriter._list,
    "enumerated_list": _MarkdownWriter._list,
    "definition_list": _MarkdownWriter._definitions,
    "field_list": _MarkdownWriter._fields,
    "docinfo": _MarkdownWriter._fields,
    "option_list": _MarkdownWriter._options,
    "line_block": _MarkdownWriter._lines,
    "table": _MarkdownWriter._table,
    "footnote": _MarkdownWriter._note,
    "citation": _MarkdownWriter._note,
    "topic": _MarkdownWriter._topic,
    "sidebar": _MarkdownWriter._admonition,
    "admonition": _MarkdownWriter._admonition,
    "rubric": _MarkdownWriter._rubric,
    "attribution": _MarkdownWriter._attribution,
    "image": _MarkdownWriter._image,
    "field_name": _MarkdownWriter._nothing,
    "field_body": _MarkdownWriter._nothing,
    "label": _MarkdownWriter._nothing,
}


def _admonition_class() -> type:
    from docutils import nodes

    return nodes.Admonition
