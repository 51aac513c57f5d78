"""The cache folders' environment rules and the atomic file writers, on real files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from c2v_rag.core.cache import cache_dir, cache_folder, keep_text, switched_off
from c2v_rag.core.files import replacing, write_atomically, write_text_atomically


def test_cache_dir_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("C2V_RAG_CACHE", str(tmp_path / "c"))
    assert cache_dir() == tmp_path / "c"
    monkeypatch.delenv("C2V_RAG_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    if os.name == "posix" and os.uname().sysname == "Linux":
        assert cache_dir() == tmp_path / "xdg" / "c2v_rag"


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, "default"), ("", "default"), ("0", None), ("OFF", None), (" false ", None), ("no", None), ("mine", "own")],
)
def test_cache_folder_rule(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, value: str | None, expected: str) -> None:
    monkeypatch.setenv("C2V_RAG_CACHE", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    if value is None:
        monkeypatch.delenv("C2V_RAG_TEST_SWITCH", raising=False)
    else:
        monkeypatch.setenv("C2V_RAG_TEST_SWITCH", value)
    got = cache_folder("kind", "C2V_RAG_TEST_SWITCH")
    want = {"default": tmp_path / "kind", "own": Path("mine"), None: None}[expected]
    assert got == want
    assert switched_off("C2V_RAG_TEST_SWITCH") is (expected is None)
    assert cache_folder("kind") == tmp_path / "kind"  # no switch of its own: always the shared folder


def test_every_cache_switch_uses_the_one_rule(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from c2v_rag.cpu.onnx_decoder import onnx_cache_dir
    from c2v_rag.hub.fast_tokenizer import tokenizer_cache_dir
    from c2v_rag.hub.merged import merged_dir
    from c2v_rag.hub.plain_weights import plain_forward_enabled
    from c2v_rag.training.adapt.score_cache import ScoreCache

    monkeypatch.setenv("C2V_RAG_CACHE", str(tmp_path))
    for variable in ("C2V_RAG_MERGED_CACHE", "C2V_RAG_TOKENIZER_CACHE", "C2V_RAG_GATE_CACHE", "C2V_RAG_PLAIN_FORWARD"):
        monkeypatch.delenv(variable, raising=False)
    assert onnx_cache_dir() == tmp_path / "onnx"
    assert merged_dir() == tmp_path / "merged"
    assert tokenizer_cache_dir() == tmp_path / "tokenizers"
    gate = ScoreCache.from_environment()
    assert gate is not None and gate.root == tmp_path / "adapt-gate"
    for variable in ("C2V_RAG_MERGED_CACHE", "C2V_RAG_TOKENIZER_CACHE", "C2V_RAG_GATE_CACHE"):
        monkeypatch.setenv(variable, "Off")
    assert merged_dir() is None and tokenizer_cache_dir() is None and ScoreCache.from_environment() is None
    monkeypatch.setenv("C2V_RAG_TOKENIZER_CACHE", str(tmp_path / "tok"))
    assert tokenizer_cache_dir() == tmp_path / "tok"
    monkeypatch.setenv("C2V_RAG_PLAIN_FORWARD", "no")
    assert not plain_forward_enabled() and tokenizer_cache_dir() is None


def test_replacing_keeps_the_old_file_when_the_writer_fails(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "records.jsonl"
    write_text_atomically(target, "old\n")
    with pytest.raises(RuntimeError, match="half way"), replacing(target) as handle:
        handle.write("new, part one\n")
        raise RuntimeError("half way")
    assert target.read_text(encoding="utf-8") == "old\n"
    assert sorted(p.name for p in target.parent.iterdir()) == ["records.jsonl"]  # no temporary left behind
    with replacing(target) as handle:
        handle.write("new ✓\n")
    assert target.read_text(encoding="utf-8") == "new ✓\n"
    umask = os.umask(0o077)  # a user who keeps new files private: so does the writer
    try:
        with replacing(target) as handle:
            handle.write("private\n")
    finally:
        os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o600
    with replacing(target) as handle:
        handle.write("shared\n")
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask


def test_write_atomically_removes_its_folder_on_failure(tmp_path: Path) -> None:
    def fail(folder: Path) -> Path:
        (folder / "graph.onnx").write_bytes(b"partial")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_atomically(tmp_path / "graph.onnx", fail)
    assert list(tmp_path.iterdir()) == []
    built = write_atomically(tmp_path / "graph.onnx", lambda folder: _write(folder / "g", b"whole"))
    assert built.read_bytes() == b"whole" and [p.name for p in tmp_path.iterdir()] == ["graph.onnx"]


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_keep_text_skips_a_cache_it_cannot_write(tmp_path: Path) -> None:
    assert keep_text(tmp_path / "a" / "digest", "abc") is None
    assert (tmp_path / "a" / "digest").read_text(encoding="utf-8") == "abc"
    blocked = tmp_path / "not-a-folder"  # a file where the cache's folder should be: fails for root too
    blocked.write_text("x")
    assert isinstance(keep_text(blocked / "digest", "abc"), OSError)
    assert blocked.read_text() == "x"
