"""bench/ingest_folder.py's kernel-docs folder builder and ratios, bench/flops_profile.py's FLOP counts, and the
command line every bench records beside its results.

No model runs: the builder reads a small fake Documentation tree, the counts read config-like objects.
"""

from __future__ import annotations

import gzip
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from script_loading import load_script

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))  # flops_profile imports the benchmarks' shared module as ``common``
try:
    ingest_folder = load_script(BENCH / "ingest_folder.py", "bench_ingest_folder")
    flops_profile = load_script(BENCH / "flops_profile.py", "bench_flops_profile")
    common = load_script(BENCH / "common.py", "bench_common")
finally:
    sys.path.remove(str(BENCH))

PAGE = (
    """\
==========
Page title
==========

Intro text that is long enough to be kept as a page of its own, """
    + "words " * 40
    + """

Usage
-----

How to use it, again with enough words to pass the lower bound on a page. """
    + "more " * 40
    + """

Tiny
~~~~

too short
"""
)


def _tree(root: Path) -> Path:
    docs = root / "Documentation"
    for rel in ("admin-guide/a.rst.gz", "core-api/b.rst.gz", "translations/zh_CN/c.rst.gz"):
        path = docs / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(gzip.compress(PAGE.encode()))
    return docs


def test_rst_sections_cut_at_every_heading():
    titles = [title for title, _ in ingest_folder.rst_sections(PAGE)]
    assert titles == ["Page title", "Usage", "Tiny"]
    body = dict(ingest_folder.rst_sections(PAGE))["Page title"]
    assert body.startswith("Intro text") and "-----" not in body and "Usage" not in body


def test_kernel_folder_is_deterministic_and_skips_translations_and_short_sections(tmp_path):
    docs = _tree(tmp_path)
    pages = ingest_folder.kernel_pages(docs)
    assert [name for name, _ in pages] == [
        "admin-guide__a--000.md",
        "admin-guide__a--001.md",
        "core-api__b--000.md",
        "core-api__b--001.md",
    ]
    assert all(page.startswith("# ") for _, page in pages)
    first, second = tmp_path / "one", tmp_path / "two"
    (first).mkdir()
    (first / "stale.md").write_text("old")
    assert ingest_folder.build_kernel_folder(first, 2, docs) == 2
    ingest_folder.build_kernel_folder(second, 2, docs)
    assert sorted(p.name for p in first.iterdir()) == ["admin-guide__a--000.md", "core-api__b--000.md"]
    assert ingest_folder.folder_digest(first) == ingest_folder.folder_digest(second)
    with pytest.raises(SystemExit):
        ingest_folder.build_kernel_folder(first, 5, docs)


def test_ratios_are_per_chunk_against_st_minilm():
    rows = [
        {"pipeline": "st-minilm", "chunks": 100, "seconds": 10.0, "cpu_seconds": 8.0},
        {"pipeline": "c2v-float", "chunks": 50, "seconds": 25.0, "cpu_seconds": 24.0},
    ]
    ingest_folder.add_ratios(rows)
    assert rows[1]["wall_per_chunk_ratio"] == 5.0 and rows[1]["cpu_per_chunk_ratio"] == 6.0
    assert rows[0]["wall_per_chunk_ratio"] == 1.0 and rows[1]["ratio_base"] == "st-minilm"


def test_flop_counts_of_the_preset_shapes():
    smollm = SimpleNamespace(
        hidden_size=576,
        num_attention_heads=9,
        num_key_value_heads=3,
        head_dim=64,
        intermediate_size=1536,
        num_hidden_layers=30,
    )
    minilm = SimpleNamespace(hidden_size=384, intermediate_size=1536, num_hidden_layers=6)
    assert 2 * flops_profile.decoder_macs(smollm) / 1e6 == pytest.approx(212.3, abs=0.1)
    assert 2 * flops_profile.encoder_macs(minilm) / 1e6 == pytest.approx(21.2, abs=0.1)
    part = flops_profile.Part()
    part.add_work([3, 4], 4, macs=10, layers=2, hidden=8, causal=True)
    assert (part.real_tokens, part.padded_tokens) == (7, 8)
    assert part.linear_real == 2 * 10 * 7 and part.linear_padded == 2 * 10 * 8
    assert part.attention_real == 4 * 2 * 8 * (6 + 10)  # l(l+1)/2 of 3 and 4
    assert part.attention_padded == 4 * 2 * 8 * 16 * 2


def test_a_recorded_command_writes_the_home_folder_as_tilde_and_runs_as_typed(tmp_path, monkeypatch):
    import subprocess

    home = tmp_path / "home dir"
    monkeypatch.setenv("HOME", str(home))
    args = ["--folder", f"{home}/.cache/c2v rag/docs", "--json", "/tmp/out.json", "--files", "500"]
    line = common.recorded_command("bench/ingest_folder.py", args)
    assert str(home) not in line and line.startswith("python bench/ingest_folder.py --folder ~/")
    # A shell given the same HOME reads the recorded line back into the arguments as they were.
    echoed = subprocess.run(
        ["bash", "-c", "printf '%s\\n' " + line.removeprefix("python bench/ingest_folder.py ")],
        env={"HOME": str(home), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert echoed == args
    assert common.shown_path(home) == "~" and common.shown_path(f"{home}x/a") == f"{home}x/a"
