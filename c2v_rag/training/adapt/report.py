"""What ``adapt`` did, as JSON (``adapt_report.json`` in its output folder) and as a printed table."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from c2v_rag.training.adapt.decision import NO_EVIDENCE


class AdaptReport(BaseModel):
    start: str
    output: str
    kept: bool
    """Whether the adapted variant passed the gate and is the result (else: use ``start``)."""
    reasons: list[str] = Field(default_factory=list)
    evidence: dict[str, Any] = Field(default_factory=dict)
    """What decided: ``signal`` (held-out generated questions and headings, or your questions), ``metric``,
    ``items``, ``difference`` (the paired difference: mean, interval, p, items better and worse), ``rule``, and
    ``real_questions_measured``."""
    per_query: list[dict[str, Any]] = Field(default_factory=list)
    """Each held-out query's id, source and nDCG@10 before and after: the gate can be replayed from the report."""
    per_question: list[dict[str, Any]] = Field(default_factory=list)
    """With your questions: each one's id (``question-N``: the file's N-th question, from 0), text, and MRR@10 before
    and after, searched among ``evidence['chunks']`` chunks."""
    pairs: dict[str, Any] = Field(default_factory=dict)
    """Chunks, held-out chunks, and pairs made, kept and dropped (with reasons) by source; of those kept, the
    training pairs and held-out queries (``train_pairs``, ``heldout_pairs``, each ``..._by_source``) and those
    neither uses: ``heldout_unused`` (a held-out chunk's pairs past its one gate query), ``over_max_pairs``."""
    before: dict[str, float] = Field(default_factory=dict)
    after: dict[str, float] = Field(default_factory=dict)
    seconds: dict[str, float] = Field(default_factory=dict)
    """Wall time per phase."""
    scored_with: dict[str, str] = Field(default_factory=dict)
    """How the gate embedded both models: ``dtype`` and ``quantization`` (``none``, or the int8 method that an
    ingest into a new collection uses on this CPU: ``gate.quantize``)."""
    reused: list[str] = Field(default_factory=list)
    """The gate's scores taken from an earlier run instead of computed, as ``'<model>: <part>'`` (the start's
    ``STS-B dev``, say): ``gate.reuse_scores``."""
    cpu: dict[str, Any] = Field(default_factory=dict)
    settings: dict[str, Any] = Field(default_factory=dict)

    def table(self) -> str:
        """The report for a terminal: pairs by source, scores before and after, time per phase, the verdict."""
        lines = [
            f"Pairs made from {self.pairs.get('chunks', '?')} chunks ({self.pairs.get('heldout_chunks', 0)} held out)"
        ]
        lines.append(f"  {'source':<10} {'made':>7} {'kept':>7}  dropped")
        for source, counts in sorted(self.pairs.get("by_source", {}).items()):
            dropped = ", ".join(f"{reason} {n}" for reason, n in sorted(counts["dropped"].items(), key=lambda x: -x[1]))
            lines.append(f"  {source:<10} {counts['made']:>7} {counts['kept']:>7}  {dropped or '-'}")
        train, heldout = self.pairs.get("train_pairs", 0), self.pairs.get("heldout_pairs", 0)
        lines.append(
            f"  training pairs {train}{_by_source(self.pairs.get('train_by_source'))}, "
            f"held-out queries {heldout}{_by_source(self.pairs.get('heldout_by_source'))}"
        )
        if self.pairs.get("generation_stopped"):
            lines.append(f"  {self.pairs['generation_stopped']}")
        unused, capped = self.pairs.get("heldout_unused", 0), self.pairs.get("over_max_pairs", 0)
        if unused or capped:
            kept = sum(counts["kept"] for counts in self.pairs.get("by_source", {}).values())
            parts = [f"{unused} more of the held-out chunks (the gate takes one query a chunk)"] if unused else []
            parts += [f"{capped} past max_pairs"] if capped else []
            lines.append(f"  of the {kept} kept, not used: " + ", ".join(parts))
        if self.before:
            width = max(len(key) for key in self.before)
            lines.append(f"Scores {'':<{width - 5}}({'start':>8} -> {'adapted':>8})")
            for key in self.before:
                after = self.after.get(key)
                shown = f"{after:.4f}" if after is not None else "-"
                delta = f"{after - self.before[key]:+.4f}" if after is not None else ""
                lines.append(f"  {key:<{width}} {self.before[key]:.4f} -> {shown:>8}  {delta}")
        lines.append("Time: " + ", ".join(f"{phase} {secs / 60:.1f} min" for phase, secs in self.seconds.items()))
        if self.reused:
            lines.append("  scores reused from an earlier run, not computed again: " + "; ".join(self.reused))
        if self.cpu:
            flags = " ".join(self.cpu.get("flags", [])) or "no AVX2/AVX-512 flags"
            lines.append(
                f"  on {self.cpu.get('name') or 'a CPU'}, {self.cpu.get('torch_threads')} torch threads; {flags}"
            )
        if self.scored_with:
            quantization = self.scored_with.get("quantization", "none")
            kind = self.scored_with.get("dtype", "float") if quantization == "none" else "int8"
            as_ingest = self.settings.get("gate", {}).get("quantize") is None
            lines.append(f"  the gate embedded in {kind}" + (", as ingest does here" if as_ingest else ""))
        lines.extend(f"  {reason}" for reason in self.reasons)
        lines.append(self._verdict_line())
        lines.extend(self.evidence_lines())
        return "\n".join(lines)

    def _verdict_line(self) -> str:
        if self.kept:
            return f"KEPT: the adapted variant is in {self.output}; use it with --model {self.output}"
        if not self.after:
            return f"NOT KEPT: no variant was trained; keep using {self.start}"
        if self.evidence.get("signal") == NO_EVIDENCE:
            return (
                f"NOT KEPT: no questions of yours to judge the adapted variant on; keep using {self.start} "
                f"(the candidate stays in {self.output}/candidate, to judge or try)"
            )
        return (
            f"NOT KEPT: the adapted variant did not pass the gate; keep using {self.start} "
            f"(the candidate stays in {self.output}/candidate for inspection)"
        )

    def evidence_lines(self) -> list[str]:
        """What the verdict rests on: the signal, its items and the rule (the reasons give its effect and interval);
        and, without the user's questions, that real-question gains were not measured."""
        evidence = self.evidence
        if not evidence:
            return []
        if evidence["signal"] == NO_EVIDENCE:
            return [
                "  To judge it: write questions a user of these documents would ask, each with the documents that "
                "answer it (JSONL: docs/adapt.md, 'Gate on your own questions'), and re-run the same command with "
                "--questions FILE: the pairs and the candidate are reused, and only the gate runs."
            ]
        lines = [
            f"  Evidence: {evidence['signal']}, {evidence['metric']}, {evidence['items']} items; {evidence['rule']}."
        ]
        if not evidence.get("real_questions_measured"):
            lines.append(
                "  Real questions: not measured. The verdict rests on queries made from your documents, whose gains "
                "did not always carry over to real questions in our tests; give the gate questions of your own "
                "(--questions FILE; docs/adapt.md, 'Gate on your own questions')."
            )
        return lines


def _by_source(counts: dict[str, int] | None) -> str:
    """`` (crop 788, generated 138)``, or nothing for a report written before these counts were."""
    return " (" + ", ".join(f"{source} {n}" for source, n in counts.items()) + ")" if counts else ""
