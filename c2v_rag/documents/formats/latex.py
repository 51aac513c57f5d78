"""LaTeX sources (``.tex``) as text: one document per file, its sections as Markdown headings.

pylatexenc parses the source and renders it as text (accents, symbols and math as Unicode approximations: ``$\\alpha
\\leq 2$`` reads ``α≤2``). What is ours is what a search over papers and notes needs of it:

- Only the ``document`` environment's body is read when there is one; the preamble gives the ``\\title`` that leads
  the text (and goes into the metadata with the ``\\author``), and its macro definitions
  (``\\newcommand{\\method}{Causal2Vec}``, ``\\newcommand{\\pair}[2]{#1 and #2}``, an optional first argument,
  ``\\def\\pair#1#2{...}``), which are expanded where the body uses them, their arguments put in.
- ``\\section`` and its kin become Markdown headings (``## Introduction``), so that a chunk's heading tells where it
  is; the abstract gets one too. Figure and table captions, footnotes and link texts stay; table cells are joined by
  `` | ``; verbatim and listing blocks are kept as they are, indentation and all.
- Citations, cross-references, labels, graphics and the bibliography's commands are left out: their keys
  (``sec:method``, ``smith2020``) are noise to an embedder. An unknown macro keeps its arguments' text;
  math alphabets (``\\mathbf{F}``, ``\\mathbb{R}``) read as their letters.
- ``\\input`` and ``\\include`` are not followed: the files they name are documents of their own when the folder is
  ingested, and a chapter would otherwise be embedded twice.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from c2v_rag.core.extras import Requirement
from c2v_rag.documents.formats.base import FileFormat, SkipFile, file_document, led_by_title, parse_or_skip, read_text
from c2v_rag.documents.reading import ReadLog, ReadOptions
from c2v_rag.documents.source_document import SourceDocument

# Sectioning commands and the Markdown heading level each becomes (the title, when there is one, is level 1).
_HEADINGS = {
    "part": 1,
    "chapter": 1,
    "section": 2,
    "subsection": 3,
    "subsubsection": 4,
    "paragraph": 5,
    "subparagraph": 6,
    "frametitle": 3,
}
# Commands whose output is a key, a picture or layout: left out with their arguments.
_DROPPED = (
    "cite", "citet", "citep", "citealp", "citealt", "citeauthor", "citeyear", "nocite", "parencite", "textcite",
    "autocite", "footcite", "ref", "autoref", "cref", "Cref", "eqref", "pageref", "nameref", "label",
    "includegraphics", "bibliography", "bibliographystyle", "addbibresource", "printbibliography", "thanks",
    "maketitle", "input", "include", "tableofcontents", "listoffigures", "listoftables", "newpage", "clearpage",
    "vspace", "hspace", "newcommand", "renewcommand", "providecommand", "DeclareMathOperator", "setlength",
    "setcounter", "addtolength", "date", "today", "fontsize", "pagestyle", "thispagestyle", "newenvironment",
    "renewenvironment", "DeclareRobustCommand", "NewDocumentCommand", "RenewDocumentCommand", "DeclareDocumentCommand",
    "newtheorem", "theoremstyle", "crefname", "Crefname", "def", "gdef", "edef", "xdef",
)  # fmt: skip
# The argument each of those takes, for the parser, where pylatexenc does not know it (else their arguments would be
# read as text).
_ARGUMENTS = {
    "autoref": "*{", "cref": "*{", "Cref": "*{", "eqref": "{", "pageref": "{", "nameref": "{",
    "citet": "*[[{", "citep": "*[[{", "citealp": "*[[{", "citealt": "*[[{", "citeauthor": "*[[{", "citeyear": "*[[{",
    "parencite": "*[[{", "textcite": "*[[{", "autocite": "*[[{", "footcite": "*[[{", "nocite": "{",
    "bibliography": "{", "bibliographystyle": "{", "addbibresource": "[{", "printbibliography": "[",
    "title": "[{", "author": "[{", "date": "{", "thanks": "{", "caption": "*[{",
    "href": "{{", "hyperlink": "{{", "hypertarget": "{{",
    "DeclareMathOperator": "*{{", "setlength": "{{", "setcounter": "{{", "addtolength": "{{",
    "part": "*[{", "chapter": "*[{", "paragraph": "*[{", "subparagraph": "*[{", "frametitle": "*[{",
    "fontsize": "{{", "pagestyle": "{", "thispagestyle": "{", "newenvironment": "*{[[{{", "renewenvironment": "*{[[{{",
    "DeclareRobustCommand": "*{[[{", "NewDocumentCommand": "{{{", "RenewDocumentCommand": "{{{",
    "DeclareDocumentCommand": "{{{", "newtheorem": "*{[{[", "theoremstyle": "{", "crefname": "{{{", "Crefname": "{{{",
}  # fmt: skip
# (``code`` is literate Haskell's and Agda's.)
_VERBATIM = ("verbatim", "verbatim*", "Verbatim", "lstlisting", "minted", "code")
_TABLES = ("tabular", "tabular*", "tabularx", "longtable", "array")
# A verbatim block stands in the rendered text as this mark and its number until the text's spacing is tidied.
_BLOCK = "\ue000{}\ue001"
_BLOCK_MARK = re.compile("\ue000(\\d+)\ue001")
_DEFINITIONS = ("newcommand", "renewcommand", "providecommand")
_MATH_ALPHABETS = (
    "mathbf", "mathit", "mathrm", "mathsf", "mathtt", "mathcal", "mathbb", "mathfrak", "mathscr", "boldsymbol", "bm",
)  # fmt: skip
# TeX's own definitions: \def\name<parameters>{body}.
_TEX_DEFINITIONS = ("def", "gdef", "edef", "xdef")
# Commands that define (what a preamble or a file of macros is made of).
_DEFINING = frozenset(
    (*_DEFINITIONS, *_TEX_DEFINITIONS, "let", "newenvironment", "renewenvironment", "DeclareRobustCommand",
     "NewDocumentCommand", "RenewDocumentCommand", "DeclareDocumentCommand", "DeclareMathOperator", "newtheorem",
     "theoremstyle", "crefname", "Crefname", "newcounter", "usepackage", "RequirePackage", "setlength", "setcounter")
)  # fmt: skip
_DEFINED_NAME = re.compile(r"\s*\\([A-Za-z@]+|.)")
# \def's parameter text when its parameters are plain (#1#2), a parameter in a body, an optional argument.
_PLAIN_PARAMETERS = re.compile(r"(?:#[1-9])+")
_PARAMETER = re.compile(r"#([1-9])")
_BRACKETED = re.compile(r"\[([^\[\]]*)\]", re.DOTALL)


class Latex(FileFormat):
    name = "LaTeX"
    suffixes = (".tex", ".ltx")
    page_rank = 0
    requires = (Requirement("pylatexenc", "pylatexenc", "latex"),)

    def read(self, file: Path, root: str, options: ReadOptions, log: ReadLog) -> Iterator[SourceDocument]:
        source = read_text(file, options, log)
        if source is None:
            return
        converted = parse_or_skip(file, log, "LaTeX", lambda: latex_to_text(source))
        if converted is None:
            return
        title, author, body = converted
        if not body:
            log.skip_file(file, "it holds no text once its commands are left out")
            return
        fields = {key: value for key, value in (("title", title), ("author", author)) if value}
        yield file_document(file, root, led_by_title(title, body), fields or None)


def latex_to_text(source: str) -> tuple[str | None, str | None, str]:
    """A LaTeX source's ``\\title`` and ``\\author`` (None where absent) and its body as text."""
    from pylatexenc import latexwalker

    walker_context, text_context = _contexts()
    nodes, _, _ = latexwalker.LatexWalker(source, latex_context=walker_context, tolerant_parsing=True).get_latex_nodes()
    renderer = _renderer_class()(latex_context=text_context, math_mode="text", strict_latex_spaces=True)
    renderer.walker_context = walker_context
    preamble, body = nodes, nodes
    for n, node in enumerate(nodes):
        if node.isNodeType(latexwalker.LatexEnvironmentNode) and node.environmentname == "document":
            preamble, body = nodes[:n], node.nodelist
            break
    else:
        preamble = []
        if _macro_file(source, nodes):
            raise SkipFile("it defines macros and holds no text of its own (a preamble's part)")
    renderer.define(preamble)
    renderer.define(body)
    renderer.nodelist_to_text(preamble)  # for its \title and \author
    text = _tidy(renderer.nodelist_to_text(body), renderer.blocks)
    return renderer.title, renderer.author, text


def _macro_file(source: str, nodes: list[Any]) -> bool:
    """Whether a file without a ``document`` environment is a preamble's part: no heading, and definitions make up
    most of it. Its text would be the rest of those definitions (a package's settings, a macro's argument markers)."""
    from pylatexenc import latexwalker

    macros = [node for node in nodes if node.isNodeType(latexwalker.LatexMacroNode)]
    if any(node.macroname in _HEADINGS for node in macros):
        return False
    defined = sum(_ink(source[node.pos : node.pos + node.len]) for node in macros if node.macroname in _DEFINING)
    return defined > 0 and defined >= _ink(source) / 2


def _ink(source: str) -> int:
    """How many characters of ``source`` are neither a comment's nor white space."""
    return len(re.sub(r"(?<!\\)%.*|\s+", "", source))


def _tidy(text: str, blocks: list[str]) -> str:
    """The rendered text with the source's indentation and line-end spaces gone, runs of spaces and blank lines made
    one, no space before punctuation (a reference that was left out leaves one), and the verbatim blocks put back."""
    text = re.sub(r"[^\S\n]+", " ", text)
    text = re.sub(r" ([.,;:!?)])", r"\1", text)
    text = "\n".join(line.strip() for line in text.split("\n"))
    text = re.sub(r"\n{3,}", "\n\n", text).strip()
    return _BLOCK_MARK.sub(lambda mark: blocks[int(mark.group(1))], text)


def _words(renderer: Any, nodes: list[Any]) -> str:
    """``nodes`` rendered as one line of text."""
    text = " ".join(renderer.nodelist_to_text([n for n in nodes if n is not None]).split())
    return re.sub(r" ([.,;:!?)])", r"\1", text)


def _inner(node: Any) -> str:
    """A group's LaTeX source without its braces (or brackets); another node's source as it is."""
    source = str(node.latex_verbatim())
    return source[1:-1] if source[:1] in "{[" and source[-1:] in "}]" and len(source) >= 2 else source


def _next_node(nodes: list[Any], at: int) -> int | None:
    """The index of the first node from ``at`` that is not blank text (TeX skips spaces before an argument)."""
    from pylatexenc import latexwalker

    for index in range(at, len(nodes)):
        node = nodes[index]
        if node is None:
            continue
        if node.isNodeType(latexwalker.LatexCharsNode) and not node.chars.strip():
            continue
        return index
    return None


def _arguments(node: Any) -> list[Any]:
    return list(node.nodeargd.argnlist) if node.nodeargd is not None and node.nodeargd.argnlist else []


@functools.cache
def _renderer_class() -> type:
    """pylatexenc's renderer, with the macros a document defines, its title and author and its verbatim blocks kept
    per document (the contexts are shared by every file)."""
    from pylatexenc import latex2text, latexwalker

    class Renderer(latex2text.LatexNodes2Text):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.title: str | None = None
            self.author: str | None = None
            self.blocks: list[str] = []
            self.in_table = 0
            self.defined: dict[str, Any] = {}
            # Macros with arguments: name -> (their number, the first one's default or None, the body's source).
            self.with_arguments: dict[str, tuple[int, str | None, str]] = {}
            self.expanding: set[str] = set()  # a macro defined by itself (\newcommand{\a}{\a}) is expanded once
            self.walker_context: Any = None

        def define(self, nodes: list[Any]) -> None:
            """Record the macros that ``\\newcommand`` and its kin, and ``\\def``, define among ``nodes``."""
            for node in nodes:
                if not node.isNodeType(latexwalker.LatexMacroNode):
                    continue
                if node.macroname in _TEX_DEFINITIONS and node.nodeargd is not None:
                    parameters = node.nodeargd.parameters
                    if not parameters:
                        self.defined[node.nodeargd.name] = node.nodeargd.body
                    elif _PLAIN_PARAMETERS.fullmatch(parameters):  # #1#2: not delimited ones (#1.)
                        body = _inner(node.nodeargd.body)
                        self.with_arguments[node.nodeargd.name] = (parameters.count("#"), None, body)
                if node.macroname not in _DEFINITIONS:
                    continue
                args = _arguments(node)  # *, {\name}, [number of arguments], [default], {body}
                if len(args) < 5 or args[1] is None or args[4] is None:
                    continue
                name = args[1]
                if name.isNodeType(latexwalker.LatexGroupNode) and len(name.nodelist) == 1:
                    name = name.nodelist[0]
                if not name.isNodeType(latexwalker.LatexMacroNode):
                    continue
                if args[2] is None:
                    self.defined[name.macroname] = args[4]
                    continue
                count = _inner(args[2]).strip()
                if count.isdigit() and 0 < int(count) <= 9:
                    default = _inner(args[3]) if args[3] is not None else None
                    self.with_arguments[name.macroname] = (int(count), default, _inner(args[4]))

        def nodelist_to_text(self, nodelist: Any) -> str:
            """As pylatexenc renders a node list, with each macro the document defined with arguments expanded:
            not knowing it takes arguments, pylatexenc parses ``\\pair{Sun}{Moon}`` as ``\\pair`` and two groups."""
            nodes = list(nodelist or [])
            if not self.with_arguments or not any(
                n is not None and n.isNodeType(latexwalker.LatexMacroNode) and n.macroname in self.with_arguments
                for n in nodes
            ):
                return str(super().nodelist_to_text(nodes))
            pieces: list[str] = []
            run: list[Any] = []
            at = 0
            while at < len(nodes):
                node = nodes[at]
                expanded = self._expand(nodes, at) if node is not None else None
                if expanded is None:
                    run.append(node)
                    at += 1
                    continue
                text, at = expanded
                pieces += [str(super().nodelist_to_text(run)), text]
                run = []
            pieces.append(str(super().nodelist_to_text(run)))
            return "".join(pieces)

        def _expand(self, nodes: list[Any], at: int) -> tuple[str, int] | None:
            """The text of the defined macro at ``nodes[at]`` with the arguments after it, and where they end; None
            when it is no such macro, or too few arguments follow it."""
            node = nodes[at]
            if not node.isNodeType(latexwalker.LatexMacroNode) or node.macroname not in self.with_arguments:
                return None
            if node.macroname in self.expanding or self.walker_context is None:
                return None
            count, default, body = self.with_arguments[node.macroname]
            values: list[str] = []
            end = at + 1
            if default is not None:  # an optional first argument, in brackets, else its default
                following = _next_node(nodes, end)
                bracketed = None
                if following is not None and nodes[following].isNodeType(latexwalker.LatexCharsNode):
                    bracketed = _BRACKETED.fullmatch(nodes[following].chars.strip())
                if following is not None and bracketed is not None:
                    values.append(bracketed.group(1))
                    end = following + 1
                else:
                    values.append(default)
            while len(values) < count:
                following = _next_node(nodes, end)
                if following is None or not nodes[following].isNodeType(latexwalker.LatexGroupNode):
                    return None
                values.append(_inner(nodes[following]))
                end = following + 1
            source = _PARAMETER.sub(lambda m: values[int(m.group(1)) - 1] if int(m.group(1)) <= count else "", body)
            walker = latexwalker.LatexWalker(source, latex_context=self.walker_context, tolerant_parsing=True)
            self.expanding.add(node.macroname)
            try:
                return self.nodelist_to_text(walker.get_latex_nodes()[0]), end
            finally:
                self.expanding.discard(node.macroname)

        def macro_node_to_text(self, node: Any) -> str:
            body = self.defined.get(node.macroname)
            if body is None or _arguments(node) or node.macroname in self.expanding:
                return str(super().macro_node_to_text(node))
            self.expanding.add(node.macroname)
            try:
                return str(self.nodelist_to_text([body]))
            finally:
                self.expanding.discard(node.macroname)

    return Renderer


@functools.cache
def _contexts() -> tuple[Any, Any]:
    """pylatexenc's parsing and text contexts with this module's rules put before its defaults."""
    from pylatexenc import latex2text, latexwalker
    from pylatexenc.latex2text import EnvironmentTextSpec, MacroTextSpec, SpecialsTextSpec
    from pylatexenc.macrospec import (
        EnvironmentSpec,
        MacroSpec,
        MacroStandardArgsParser,
        ParsedMacroArgs,
        ParsedVerbatimArgs,
        std_macro,
    )

    class VerbatimBody(MacroStandardArgsParser):
        """An environment's body as it stands, up to its ``\\end``: pylatexenc's own parser for this looks for
        ``\\end{verbatim}`` whatever the environment."""

        def __init__(self, environment: str) -> None:
            super().__init__(argspec="{")
            self.end = f"\\end{{{environment}}}"

        def parse_args(self, w: Any, pos: int, parsing_state: Any = None) -> tuple[Any, int, int]:
            end = w.s.find(self.end, pos)
            if end == -1:
                raise latexwalker.LatexWalkerParseError(s=w.s, pos=pos, msg=f"no {self.end} after the listing")
            chars = w.make_node(
                latexwalker.LatexCharsNode, parsing_state=parsing_state, chars=w.s[pos:end], pos=pos, len=end - pos
            )
            return ParsedVerbatimArgs(verbatim_chars_node=chars), pos, end - pos

    class TexDefinition(MacroStandardArgsParser):
        """``\\def``'s name, parameter text (``#1#2``) and braced body; pylatexenc reads none of them, and the body
        would come out as text."""

        def __init__(self) -> None:
            super().__init__(argspec="")

        def parse_args(self, w: Any, pos: int, parsing_state: Any = None) -> tuple[Any, int, int]:
            name = _DEFINED_NAME.match(w.s, pos)
            brace = w.s.find("{", name.end()) if name is not None else -1
            if name is None or brace == -1:
                raise latexwalker.LatexWalkerParseError(s=w.s, pos=pos, msg="\\def without a name and a body")
            body, body_pos, body_len = w.get_latex_braced_group(brace, parsing_state=parsing_state)
            parsed = ParsedMacroArgs(argnlist=[body], argspec="{")
            parsed.name, parsed.parameters, parsed.body = name.group(1), w.s[name.end() : brace].strip(), body
            return parsed, pos, body_pos + body_len - pos

    walker_context = latexwalker.get_default_latex_context_db()
    walker_context.add_context_category(
        "c2v_rag",
        prepend=True,
        macros=[
            *(std_macro(name, spec) for name, spec in _ARGUMENTS.items()),
            *(MacroSpec(name, args_parser=TexDefinition()) for name in _TEX_DEFINITIONS),
        ],
        environments=[EnvironmentSpec(name, args_parser=VerbatimBody(name)) for name in _VERBATIM],
    )

    def heading(level: int) -> Any:
        def render(node: Any, l2tobj: Any) -> str:
            title = _words(l2tobj, _arguments(node)[-1:])
            return f"\n\n{'#' * level} {title}\n\n" if title else "\n\n"

        return render

    def keep(field: str) -> Any:
        def render(node: Any, l2tobj: Any) -> str:
            setattr(l2tobj, field, _words(l2tobj, _arguments(node)[-1:]) or None)
            return ""

        return render

    def verbatim(node: Any, l2tobj: Any) -> str:
        if node.nodeargd is None:  # no \end: the parse went on as for any environment
            return str(l2tobj.nodelist_to_text(node.nodelist))
        text = node.nodeargd.verbatim_text
        # A listing's options ([language=Python]) and minted's language ({python}) open its text.
        text = re.sub(r"\A(?:\[[^\]\n]*\])?(?:\{[^}\n]*\})?", "", text) if node.environmentname != "verbatim" else text
        l2tobj.blocks.append(text.strip("\n"))
        return "\n\n" + _BLOCK.format(len(l2tobj.blocks) - 1) + "\n\n"

    def table(node: Any, l2tobj: Any) -> str:
        l2tobj.in_table += 1
        try:
            rows = l2tobj.nodelist_to_text(node.nodelist).split("\n")
        finally:
            l2tobj.in_table -= 1
        # Cells come out separated by NUL (what & gives in a table); a row is a line of them, its empty cells dropped.
        lines = [" | ".join(c.strip() for c in row.split("\x00") if c.strip()) for row in rows]
        return "\n\n" + "\n".join(line for line in lines if line) + "\n\n"

    def item(node: Any, l2tobj: Any) -> str:
        label = _words(l2tobj, [node.nodeoptarg]) if node.nodeoptarg is not None else ""
        return f"\n* {label}: " if label else "\n* "

    text_context = latex2text.get_default_latex_context_db()
    text_context.add_context_category(
        "c2v_rag",
        prepend=True,
        macros=[
            *(MacroTextSpec(name, simplify_repl=heading(level)) for name, level in _HEADINGS.items()),
            *(MacroTextSpec(name, simplify_repl="") for name in _DROPPED),
            MacroTextSpec("title", simplify_repl=keep("title")),
            MacroTextSpec("author", simplify_repl=keep("author")),
            MacroTextSpec("and", simplify_repl=", "),
            MacroTextSpec("item", simplify_repl=item),
            *(
                MacroTextSpec(name, simplify_repl=lambda node, l2tobj: _words(l2tobj, _arguments(node)[1:2]))
                for name in ("href", "hyperlink", "hypertarget")
            ),
            MacroTextSpec("url", simplify_repl=lambda node, l2tobj: _words(l2tobj, _arguments(node)[:1])),
            # Math alphabets as their letters: pylatexenc's 𝐅 and ℝ are not the F and R a query is typed with.
            *(
                MacroTextSpec(name, simplify_repl=lambda node, l2tobj: _words(l2tobj, _arguments(node)[-1:]))
                for name in _MATH_ALPHABETS
            ),
            MacroTextSpec("footnote", simplify_repl=lambda node, l2tobj: f" ({_words(l2tobj, _arguments(node)[-1:])})"),
            MacroTextSpec(
                "caption", simplify_repl=lambda node, l2tobj: f"\n\n{_words(l2tobj, _arguments(node)[-1:])}\n\n"
            ),
            MacroTextSpec("\\", simplify_repl="\n"),
            *(MacroTextSpec(name, simplify_repl=name) for name in ("TeX", "LaTeX", "LaTeXe", "BibTeX")),
        ],
        environments=[
            EnvironmentTextSpec(
                "abstract",
                simplify_repl=lambda node, l2tobj: f"\n\n## Abstract\n\n{l2tobj.nodelist_to_text(node.nodelist)}\n\n",
            ),
            *(EnvironmentTextSpec(name, simplify_repl=verbatim) for name in _VERBATIM),
            *(EnvironmentTextSpec(name, simplify_repl=table) for name in _TABLES),
        ],
        specials=[SpecialsTextSpec("&", simplify_repl=lambda node, l2tobj: "\x00" if l2tobj.in_table else " ")],
    )
    # An unknown macro (a package's, or one defined with arguments) keeps its arguments' text; pylatexenc's default
    # drops it, and with it \texttt{...} and the like.
    text_context.set_unknown_macro_spec(MacroTextSpec("", discard=False))
    return walker_context, text_context
