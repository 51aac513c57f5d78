"""docs/training.md's five-minute walk-through, run as written (the same command lines, from a fresh clone's
layout) on a tiny model; and what it prints at the default log level: no DEBUG line, no deprecation warning."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "training.md"
NOISE = re.compile(r"DEBUG|deprecat", re.IGNORECASE)


def walkthrough_commands() -> list[list[str]]:
    """The ``c2v-rag`` lines of the guide's walk-through block (the bash block after its marker comment)."""
    text = GUIDE.read_text(encoding="utf-8")
    marker = text.index("<!-- walkthrough")
    block = text[text.index("```bash", marker) + len("```bash") : text.index("```", text.index("```bash", marker) + 7)]
    lines = [line.split("#", 1)[0].strip() for line in block.splitlines()]
    return [shlex.split(line) for line in lines if line.startswith("c2v-rag ")]


@pytest.fixture
def fresh_clone(tmp_path):
    """A working directory laid out like a fresh clone: recipes/, docs/ and examples/, and no ../shared/data."""
    clone = tmp_path / "clone"
    clone.mkdir()
    for name in ("recipes", "docs", "examples"):
        (clone / name).symlink_to(ROOT / name)
    return clone


def test_the_walkthrough_runs_as_written_on_a_tiny_model_and_prints_no_noise(fresh_clone, tiny_model_factory):
    commands = walkthrough_commands()
    assert [words[1] for words in commands] == ["train", "train", "embed"]
    assert all(words[2] == "recipes/own_data.yaml" for words in commands if words[1] == "train")
    # The one change to each line: the tiny model in place of the preset, and its encoder part's width (24) in
    # place of MiniLM's (384) as the prefix the loss scores.
    tiny = tiny_model_factory("llama", representation="concat", encoder_share=0.5, max_length=256)
    variant = tiny.save_pretrained(fresh_clone.parent / "tiny-variant")
    swap = {
        "train": [
            *("--set", f"model.variant={variant}", "--set", "objective.matryoshka={24: 1.0}"),
            *("--set", "training.progress_bar=false"),
        ],
        "embed": [],
    }
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    for words in commands:
        proc = subprocess.run(
            [sys.executable, "-m", "c2v_rag.cli", *words[1:], *swap[words[1]]],
            cwd=fresh_clone,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, f"{shlex.join(words)}\n{proc.stderr}"
        noise = [line for line in proc.stderr.splitlines() if NOISE.search(line)]
        assert not noise, f"{shlex.join(words)} printed {noise}"
    for run in ("runs/my-docs", "runs/my-pairs"):
        assert (fresh_clone / run / "causal2vec_config.json").is_file()
        assert (fresh_clone / run / "encoder_adapter").is_dir()
    assert list((fresh_clone / "runs" / "my-docs-vectors").glob("*.parquet"))
