"""bench/code_search.py's corpus: functions without their docstrings, each question with its one answer."""

from __future__ import annotations

from pathlib import Path

from script_loading import load_script

BENCH = Path(__file__).resolve().parents[1] / "bench"


def code_search():
    return load_script(BENCH / "code_search.py", "code_search_bench")


SOURCE = '''"""A module."""


@staticmethod
def scale(x, factor=2):
    """Multiply a number by a factor and return it.

    More words.
    """
    y = x * factor
    return y


def tiny():
    """Return nothing at all, quickly, every time."""
    pass


class Tide:
    def height(self, hour):
        """Return the height of the tide at an hour."""
        base = 2.0
        return base + hour / 12
'''


def test_functions_keep_their_code_without_the_docstring(tmp_path):
    module = code_search()
    (tmp_path / "tides.py").write_text(SOURCE, encoding="utf-8")
    found = module.functions(tmp_path / "tides.py", tmp_path)
    assert found == [
        (
            "tides:5:scale",
            "Multiply a number by a factor and return it.",
            "@staticmethod\ndef scale(x, factor=2):\n    y = x * factor\n    return y",
        ),
        (
            "tides:20:height",
            "Return the height of the tide at an hour.",
            "    def height(self, hour):\n        base = 2.0\n        return base + hour / 12",
        ),
    ]  # tiny() is a signature and a pass: nothing to find it by but its name


def test_the_corpus_is_the_same_each_time_and_every_question_has_one_answer():
    module = code_search()
    corpus = module.build_corpus(40, seed=0)
    again = module.build_corpus(40, seed=0)
    assert corpus.digest == again.digest and corpus.bench.queries == again.bench.queries
    assert len(corpus.bench.queries) == 40 and len(corpus.docs) > 500
    for qid, question in corpus.bench.queries.items():
        (answer,) = corpus.bench.qrels[qid]
        assert len(question.split()) >= module.MIN_QUERY_WORDS
        assert question not in " ".join(corpus.docs[answer].split())  # the docstring is not in the document
