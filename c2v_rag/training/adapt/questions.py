"""Your own questions for adapt's gate: a JSONL file of questions, each naming the documents that answer it.

Pseudo-queries are made from the documents' own words (a cropped sentence shares most of its words with its
chunk), so a variant can get better at them and not at what users ask. A few dozen real questions with their
answers make the gate judge what matters::

    {"query": "How do I keep a daemon running after I log out?", "doc_ids": ["man2/setsid.2.md"]}

A document is named by its id as ``c2v-rag search`` shows it (a file's path, a JSONL record's ``id``), or by
the end of its path (``man2/setsid.2.md`` names ``/home/me/docs/man2/setsid.2.md``) when only one document's
path ends that way. The questions are never trained on.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from c2v_rag.core.jsonl import iter_jsonl


@dataclass(frozen=True)
class Question:
    query: str
    doc_ids: tuple[str, ...]


def read_questions(path: str | Path) -> list[Question]:
    """The questions of ``path``; a clear error naming the line for anything malformed."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"the gate's questions file {path} does not exist (gate.questions, --questions)")
    questions = []
    for number, row in iter_jsonl(path):
        where = f"{path}:{number}"
        query, doc_ids = row.get("query"), row.get("doc_ids")
        if isinstance(doc_ids, str):
            doc_ids = [doc_ids]
        if not isinstance(query, str) or not query.strip():
            raise ValueError(f"{where}: 'query' must be a non-empty string (got {query!r})")
        if not isinstance(doc_ids, list) or not doc_ids or not all(isinstance(d, str) and d for d in doc_ids):
            raise ValueError(f"{where}: 'doc_ids' must be a non-empty list of document ids (got {doc_ids!r})")
        questions.append(Question(query.strip(), tuple(doc_ids)))
    if not questions:
        raise ValueError(f"the gate's questions file {path} holds no question")
    return questions


def resolve_doc_ids(questions: list[Question], known: Iterable[str]) -> list[Question]:
    """The questions with every document named by its full id; an error listing any name that matches no
    document, or more than one."""
    known = list(dict.fromkeys(known))
    exact = set(known)
    resolved, problems = [], []
    for question in questions:
        ids = []
        for name in question.doc_ids:
            if name in exact:
                ids.append(name)
                continue
            suffix = "/" + name.lstrip("/")
            matches = [k for k in known if k.endswith(suffix)]
            if len(matches) == 1:
                ids.append(matches[0])
            else:
                problems.append(f"{name!r} ({'no document' if not matches else f'{len(matches)} documents'})")
        resolved.append(Question(question.query, tuple(dict.fromkeys(ids))))
    if problems:
        shown = ", ".join(problems[:5]) + (f" and {len(problems) - 5} more" if len(problems) > 5 else "")
        examples = ", ".join(repr(k) for k in known[:3])
        raise ValueError(
            f"the gate's questions name documents that match no single document: {shown}. Name a document by its "
            f"id or by the end of its path, as c2v-rag search shows it (for example {examples})"
        )
    return resolved
