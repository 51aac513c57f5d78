"""Whether ``adapt`` keeps its variant, and the evidence in words and numbers.

A kept variant reads as "better for my folder", so the gate keeps one only on clear evidence:

- the user's questions decide: their MRR@10, searched among every chunk of the documents (up to
  ``questions_corpus_size``), paired question by question;
- without them nothing is kept, unless ``gate.evidence`` names held-out pseudo-query sources (generated questions,
  headings), which then decide by their nDCG@10, paired query by query, over at least ``min_items`` of them. The
  held-out queries come from the documents the variant trained on, and from the same generator: on the man pages,
  variants they showed a clear gain for lost on real questions, one of them clearly. They are reported either
  way. Crops are never evidence: a crop is found by its own words, and on SciFact crops rose most for the variant
  that lost on real claims;
- either way, a clear gain is the bootstrap interval of the difference above ``min_gain`` and more items risen
  than fallen by a one-sided sign test at the interval's level (the bootstrap alone is lenient when only a few
  move). No clear gain, or too few held-out queries to tell, is "not kept";
- in both cases STS-B dev may not lose more than ``sts_tolerance`` (where the run has general data: with
  ``general_data="none"`` it is not checked, and the reasons say so).

The measured runs behind this rule are in bench/results/adapt/README.md ("A gate that predicts real questions", and
"Your own questions: searched among every chunk, judged as the held-out queries").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from c2v_rag.core.wording import in_words
from c2v_rag.evaluation.paired import PairedDifference, paired_bootstrap
from c2v_rag.training.adapt.config import AdaptGate
from c2v_rag.training.adapt.gate import GateScores

_SOURCE_NAMES = {"generated": "generated questions", "heading": "headings", "crop": "crops"}


@dataclass
class Verdict:
    kept: bool
    reasons: list[str]
    """Each check, in words with its numbers."""
    evidence: dict[str, Any] = field(default_factory=dict)
    """What decided: the signal, its metric, items, the paired difference, whether real questions were measured."""


def describe_sources(sources: list[str]) -> str:
    """E.g. ``generated questions and headings``."""
    names = [_SOURCE_NAMES.get(s, s) for s in sources]
    return in_words(names)


def decide(before: GateScores, after: GateScores, gate: AdaptGate, sources: dict[str, str]) -> Verdict:
    """The verdict on ``after`` against its start ``before``; ``sources`` gives each held-out query's source."""
    if before.per_question and after.per_question:
        verdict = _on_questions(before, after, gate)
    else:
        verdict = _on_heldout(before, after, gate, sources)
    if before.sts_spearman is None or after.sts_spearman is None:
        verdict.reasons.append("STS-B dev not checked: the run had no general data (--general-data none)")
        return verdict
    drop = before.sts_spearman - after.sts_spearman
    steady = drop <= gate.sts_tolerance
    verdict.reasons.append(
        f"STS-B dev {before.sts_spearman:.4f} -> {after.sts_spearman:.4f} ({-drop:+.4f}): "
        + (f"within {gate.sts_tolerance}" if steady else f"lost more than {gate.sts_tolerance}")
    )
    verdict.kept = verdict.kept and steady
    return verdict


def _paired(before: dict[str, float], after: dict[str, float], ids: list[str], gate: AdaptGate) -> PairedDifference:
    return paired_bootstrap(
        [before[i] for i in ids], [after[i] for i in ids], confidence=gate.confidence, resamples=gate.resamples
    )


def _clear_gain(difference: PairedDifference, gate: AdaptGate) -> tuple[bool, str]:
    """Whether ``difference`` is a clear gain by ``gate``'s rule, and the verdict in words: the interval (and its
    mean) above ``min_gain``, and more items risen than fallen by a one-sided sign test at the interval's level.
    The sign test is there because most queries are found at rank 1 by both models: when only a few move, a
    bootstrap can clear zero by chance. A negative ``min_gain`` asks only "not clearly worse than that", so the
    sign test is off."""
    level = (1 - gate.confidence) / 2
    above = difference.low > gate.min_gain and difference.mean > gate.min_gain
    moved = difference.sign_p <= level or gate.min_gain < 0
    if not above:
        return False, f"no clear gain (the interval must lie above {gate.min_gain:g})"
    if not moved:
        return False, f"no clear gain (too few rose against those that fell: sign test p above {level:g})"
    return True, "a clear gain"


def _rule(gate: AdaptGate, what: str) -> str:
    sign = f" and a sign test p at most {(1 - gate.confidence) / 2:g}" if gate.min_gain >= 0 else ""
    return f"the {gate.confidence:.0%} interval of {what} gain above {gate.min_gain:g}{sign}"


def _on_questions(before: GateScores, after: GateScores, gate: AdaptGate) -> Verdict:
    ids = sorted(before.per_question)
    difference = _paired(before.per_question, after.per_question, ids, gate)
    # The held-out queries' rule, on what the variant is for (replayed on random halves of three folders'
    # questions, it kept fewest variants that lost on the other half: bench/results/adapt/README.md).
    clear, verdict = _clear_gain(difference, gate)
    chunks = int(after.questions.get("chunks", 0))
    among = f", searched among {chunks:,} chunks," if chunks else ""
    whose = "question's" if len(ids) == 1 else "questions'"
    reason = (
        f"your {len(ids)} {whose} MRR@10{among} {difference.before:.4f} -> {difference.after:.4f} "
        f"({difference.describe()}): {verdict}"
    )
    evidence = {
        "signal": "your questions",
        "metric": "mrr@10",
        "items": len(ids),
        "chunks": chunks,
        "difference": difference.as_dict(),
        "rule": _rule(gate, "your questions' MRR@10"),
        "real_questions_measured": True,
    }
    return Verdict(clear, [reason], evidence)


def _heldout_evidence(gate: AdaptGate, items: int) -> dict[str, Any]:
    """The evidence record of a verdict on the held-out queries of ``gate.evidence``'s sources, ``items`` of them."""
    what = describe_sources(list(gate.evidence))
    scored = f"the held-out {what}' nDCG@10"
    rule = f"{_rule(gate, scored)}, over at least {gate.min_items} of them"
    return {
        "signal": f"held-out {what}",
        "metric": "ndcg@10",
        "items": items,
        "min_items": gate.min_items,
        "rule": rule,
        "real_questions_measured": False,
    }


def too_few_to_judge(
    gate: AdaptGate, heldout_sources: list[str], pairs_report: dict[str, Any] | None = None
) -> Verdict | None:
    """The verdict before any training when the held-out queries (of ``heldout_sources``) hold fewer than
    ``gate.min_items`` of the evidence sources and no questions of the user's decide: the gate could keep no
    variant whatever it scored, so training it would only cost time. None when the gate can judge.

    ``pairs_report`` (the pairs' report: held-out chunks, all long enough to ask about, and how many the generator
    was asked for) narrows the advice to what can help this run: a larger ``--max-generated`` only
    where the budget left held-out chunks unasked, more held-out chunks where there are fewer than the gate needs."""
    if not gate.heldout_decides:  # the user's questions decide, or nothing does (trained for a re-run with them)
        return None
    items = sum(source in gate.evidence for source in heldout_sources)
    if items >= gate.min_items:
        return None
    what = describe_sources(list(gate.evidence))
    report = pairs_report or {}
    held, asked = report.get("heldout_chunks"), report.get("heldout_asked")
    remedies = ["give your own questions (--questions FILE)"]
    if held is not None and held < gate.min_items:
        remedies.append(f"hold out more chunks (only {held} are: pairs.holdout_fraction in a --config file)")
    elif report.get("generator") == "none":
        remedies.append("let a generator write questions (--generator local, or openai)")
    elif held is None or asked is None or asked < held:
        remedies.append(
            "let the generator write for more chunks (--max-generated N: it writes for held-out chunks first, up to "
            "half of N; on list-like documents a small generator asks back more than it asks)"
        )
        remedies.append("use a stronger one (--generator openai)")
    else:
        remedies.append(
            f"use a stronger generator (--generator openai): every held-out chunk long enough to ask about ({asked}) "
            "was given to this one, so a larger --max-generated adds none (on list-like documents a small generator "
            "asks back more than it asks)"
        )
    remedies.append("give more documents")
    reason = (
        f"held-out {what} ({items}): too few to judge (the gate needs {gate.min_items}), whatever a variant would "
        f"score, so none was trained. To judge one: {', '.join(remedies[:-1])}, or {remedies[-1]}"
    )
    return Verdict(False, [reason], _heldout_evidence(gate, items))


NO_EVIDENCE = "none"
"""``Verdict.evidence['signal']`` of a run with neither the user's questions nor held-out sources as evidence."""


_NOTHING_DECIDES = {
    "signal": NO_EVIDENCE,
    "metric": "mrr@10",
    "items": 0,
    "rule": "your questions decide (--questions FILE); held-out pseudo-queries only where gate.evidence names their "
    "sources",
    "real_questions_measured": False,
}


def _on_heldout(before: GateScores, after: GateScores, gate: AdaptGate, sources: dict[str, str]) -> Verdict:
    what = describe_sources(list(gate.evidence))
    ids = sorted(q for q in before.per_query if sources.get(q) in gate.evidence)
    reasons = []
    clear = False
    if not gate.evidence:
        evidence = dict(_NOTHING_DECIDES)
        reasons.append(
            "no questions of yours to judge the variant on, so it is not kept: the held-out queries below come "
            "from your documents and the same generator as its training pairs, and variants they favoured lost on "
            "real questions"
        )
    elif not ids:
        evidence = _heldout_evidence(gate, 0)
        reasons.append(
            f"no held-out {what}: nothing to judge the variant on (crops are not evidence). Let the generator "
            "write questions (--generator, --max-generated), or give your own (--questions FILE)"
        )
    else:
        difference = _paired(before.per_query, after.per_query, ids, gate)
        evidence = {**_heldout_evidence(gate, len(ids)), "difference": difference.as_dict()}
        clear, verdict = _clear_gain(difference, gate)
        if len(ids) < gate.min_items:
            clear, verdict = False, f"too few to judge (the gate needs {gate.min_items})"
        reasons.append(
            f"held-out {what} ({len(ids)}): nDCG@10 {difference.before:.4f} -> {difference.after:.4f} "
            f"({difference.describe()}): {verdict}"
        )
    for source, row in sorted(after.by_source.items()):
        if source not in gate.evidence and source in before.by_source:
            was, now = before.by_source[source]["ndcg@10"], row["ndcg@10"]
            why = " (a crop is found by its own words)" if source == "crop" else ""
            reasons.append(
                f"held-out {_SOURCE_NAMES.get(source, source)} ({int(row['queries'])}): nDCG@10 {was:.4f} -> "
                f"{now:.4f} ({now - was:+.4f}): reported, not evidence{why}"
            )
    return Verdict(clear, reasons, evidence)
