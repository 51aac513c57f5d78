"""The gate's kept scores: found again for the same model and inputs, never for another model, other inputs, or a
model whose base weights have no digest."""

from __future__ import annotations

import json

from c2v_rag.training.adapt.score_cache import ScoreCache, model_key


def test_scores_are_found_by_model_and_inputs_only(tiny_model_factory, tmp_path):
    model = tiny_model_factory("llama", representation="concat", encoder_share=0.5)
    model.bases_digests = {"decoder": "d" * 16, "encoder": "e" * 16}  # as a model loaded from local bases has
    cache = ScoreCache(tmp_path)
    calls = []

    def compute(value: float):
        def run():
            calls.append(value)
            return {"spearman": value}

        return run

    assert cache.scores(model, "the start", "STS-B dev", {"limit": 10}, compute(0.5)) == {"spearman": 0.5}
    assert cache.scores(model, "the start", "STS-B dev", {"limit": 10}, compute(0.9)) == {"spearman": 0.5}
    assert cache.reused == ["the start: STS-B dev"] and calls == [0.5]
    (kept,) = tmp_path.glob("sts-b-dev-*.json")
    assert json.loads(kept.read_text()) == {"spearman": 0.5}
    # Other inputs, another part: scored.
    assert cache.scores(model, "the start", "STS-B dev", {"limit": 20}, compute(0.6))["spearman"] == 0.6
    assert cache.scores(model, "the start", "held-out queries", {"limit": 10}, compute(0.7))["spearman"] == 0.7
    # The same weights weighted otherwise in the vector, or other base weights: another model.
    before = model_key(model)
    model.config.encoder_share = 0.8
    assert model_key(model) != before
    model.config.encoder_share = 0.5
    assert model_key(model) == before
    model.bases_digests = {"decoder": "f" * 16, "encoder": "e" * 16}
    assert cache.scores(model, "the start", "STS-B dev", {"limit": 10}, compute(0.8))["spearman"] == 0.8
    # Hub bases have no digest of their weights: always scored, nothing kept.
    model.bases_digests = None
    assert model_key(model) is None
    files = sorted(tmp_path.iterdir())
    assert cache.scores(model, "the start", "STS-B dev", {"limit": 10}, compute(0.1))["spearman"] == 0.1
    assert cache.scores(model, "the start", "STS-B dev", {"limit": 10}, compute(0.2))["spearman"] == 0.2
    assert sorted(tmp_path.iterdir()) == files and calls == [0.5, 0.6, 0.7, 0.8, 0.1, 0.2]


def test_off_and_elsewhere_by_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("C2V_RAG_GATE_CACHE", "0")
    assert ScoreCache.from_environment() is None
    monkeypatch.setenv("C2V_RAG_GATE_CACHE", str(tmp_path / "gate"))
    assert ScoreCache.from_environment().root == tmp_path / "gate"
    monkeypatch.delenv("C2V_RAG_GATE_CACHE")
    monkeypatch.setenv("C2V_RAG_CACHE", str(tmp_path / "cache"))
    assert ScoreCache.from_environment().root == tmp_path / "cache" / "adapt-gate"


def test_a_cache_it_cannot_write_costs_a_warning_not_the_scores(tiny_model_factory, tmp_path, caplog):
    model = tiny_model_factory("llama", representation="concat", encoder_share=0.5)
    model.bases_digests = {"decoder": "d" * 16, "encoder": "e" * 16}
    blocked = tmp_path / "cache"
    blocked.write_text("a file where the folder should be")
    cache = ScoreCache(blocked)
    with caplog.at_level("WARNING", logger="c2v_rag.training.adapt.score_cache"):
        assert cache.scores(model, "the start", "STS-B dev", {}, lambda: {"spearman": 0.5}) == {"spearman": 0.5}
    (record,) = caplog.records
    assert "could not keep the gate's scores" in record.getMessage() and str(blocked) in record.getMessage()
    assert cache.scores(model, "the start", "STS-B dev", {}, lambda: {"spearman": 0.6}) == {"spearman": 0.6}


def test_edited_code_is_another_key(tiny_model_factory, tmp_path, monkeypatch):
    from c2v_rag.training.adapt import score_cache

    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "sub" / "gate.py").write_text("THRESHOLD = 0.01\n")
    (package / "notes.txt").write_text("not code")
    before = score_cache.source_digest(package)
    (package / "notes.txt").write_text("other notes")
    assert score_cache.source_digest.__wrapped__(package) == before
    (package / "sub" / "gate.py").write_text("THRESHOLD = 0.02\n")
    edited = score_cache.source_digest.__wrapped__(package)
    assert edited != before
    # and the key of a model follows the digest of the code that scores it
    model = tiny_model_factory("llama", representation="concat", encoder_share=0.5)
    model.bases_digests = {"decoder": "d" * 16, "encoder": "e" * 16}
    key = model_key(model)
    monkeypatch.setattr(score_cache, "source_digest", lambda: edited)
    assert model_key(model) != key
