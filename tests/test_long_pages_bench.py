"""bench/long_pages' committed files and its judgement of a hit, without the Debian packages its pages come from
(build.py copies them) or a model."""

from __future__ import annotations

import json
import re
from pathlib import Path

from script_loading import load_script

LONG_PAGES = Path(__file__).resolve().parents[1] / "bench" / "long_pages"


def test_the_questions_name_committed_pages_and_quote_them_plausibly():
    pages = {page["file"]: page for page in json.loads((LONG_PAGES / "pages.json").read_text())}
    assert all(re.fullmatch(r"[0-9a-f]{64}", page["sha256"]) and page["license"] for page in pages.values())
    questions = [json.loads(line) for line in (LONG_PAGES / "questions.jsonl").read_text().splitlines()]
    assert len(questions) == 64 and len({q["id"] for q in questions}) == 64
    for question in questions:
        assert question["page"] in pages, question["id"]
        assert 8 <= len(question["query"].split()) <= 25 and question["query"].endswith("?"), question["id"]
        assert 1 <= len(question["answers"]) <= 3
        assert all(30 <= len(quote) <= 300 for quote in question["answers"]), question["id"]
    assert {q["page"] for q in questions} == set(pages)


def test_a_hit_is_relevant_where_it_holds_half_of_an_answer_quote():
    score = load_script(LONG_PAGES / "score.py", "long_pages_score")
    spans = [("a.md", 100, 200)]  # a quote of 100 characters
    assert score.relevant({"page": "a.md", "start": 150, "end": 400}, spans)  # 50 of them: half
    assert not score.relevant({"page": "a.md", "start": 151, "end": 400}, spans)
    assert score.relevant({"page": "a.md", "start": 0, "end": 150}, spans)
    assert not score.relevant({"page": "b.md", "start": 0, "end": 400}, spans)  # another page
    assert not score.relevant({"page": "a.md", "start": None, "end": None}, spans)
    ranking = [{"page": "b.md", "start": 0, "end": 9}, {"page": "a.md", "start": 90, "end": 300}]
    assert score.question_metrics(ranking, spans) == {"mrr@10": 0.5, "hit@1": 0.0, "hit@3": 1.0, "hit@10": 1.0}
    assert score.paired([0.0, 0.5], [1.0, 0.5])["difference"] == 0.5
