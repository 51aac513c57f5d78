"""The command line's errors name the flags a user can type: a fix the parser then refuses is no fix.

The library words its messages for Python (``truncate_dim=None``, ``mode='dense'``); the CLI rewrites them
(``c2v_rag/cli/errors.py``, ``FLAG_WORDING``). These run the real commands on a tiny variant.
"""

from __future__ import annotations

import pytest

for _module in ("qdrant_client", "llama_index.core"):
    pytest.importorskip(_module)

from rag_helpers import make_text

from c2v_rag.cli import main
from c2v_rag.cli.errors import EXIT_BAD_INPUT, in_flags, library_logs_once, one_line_warnings

CHUNKS = ["--chunk-size", "24", "--chunk-overlap", "4", "-q"]


@pytest.fixture(scope="module")
def matryoshka_variant(tiny_model_factory, tmp_path_factory):
    """A tiny variant (64 dims) trained, as far as its config says, for a 32-dim prefix."""
    path = tmp_path_factory.mktemp("variant-matryoshka")
    tiny_model_factory("llama", max_length=128, matryoshka_dims=[32]).save_pretrained(path)
    return path


@pytest.fixture
def docs(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    for i in range(2):
        (folder / f"{i}.txt").write_text(make_text(i), encoding="utf-8")
    return folder


def error_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "error:" in line]
    assert lines, err
    return lines[-1]


def test_a_truncate_dim_mismatch_suggests_a_value_the_flag_takes(docs, tmp_path, matryoshka_variant, capsys):
    """The error said 'pass truncate_dim=None (--truncate-dim None)', and --truncate-dim None was then
    'invalid int value'. Now the flag takes 'full', and a later ingest left without it adds at the size the
    collection records (it was refused with 'pass --truncate-dim 32')."""
    store = ["--path", str(tmp_path / "q"), "--model", str(matryoshka_variant)]
    assert main(["ingest", str(docs), *store, *CHUNKS]) == 0
    capsys.readouterr()

    assert main(["ingest", str(docs), *store, *CHUNKS, "--truncate-dim", "32"]) == EXIT_BAD_INPUT
    line = error_line(capsys)
    assert "records whole vectors. Leave --truncate-dim out" in line, line
    assert "None" not in line and "truncate_dim" not in line and "--collection NAME" in line, line
    assert main(["ingest", str(docs), *store, *CHUNKS, "--truncate-dim", "full"]) == 0

    short = ["--path", str(tmp_path / "q"), "--collection", "short", "--model", str(matryoshka_variant)]
    assert main(["ingest", str(docs), *short, *CHUNKS, "--truncate-dim", "32"]) == 0
    assert main(["ingest", str(docs), *short, *CHUNKS]) == 0
    capsys.readouterr()
    assert main(["ingest", str(docs), *short, *CHUNKS, "--truncate-dim", "full"]) == EXIT_BAD_INPUT
    assert "records --truncate-dim 32: its vectors are prefixes of 32 values" in error_line(capsys)

    with pytest.raises(SystemExit) as info:
        main(["ingest", str(docs), *short, "--truncate-dim", "3x"])
    assert info.value.code == 2 and "'3x' is neither a size" in capsys.readouterr().err


def test_search_errors_name_flags_not_keywords(docs, tmp_path, tiny_variant, capsys):
    store = ["--path", str(tmp_path / "q"), "--model", str(tiny_variant)]
    assert main(["ingest", str(docs), *store, *CHUNKS]) == 0
    capsys.readouterr()

    assert main(["search", "bone loss", *store, "--mode", "hybrid"]) == EXIT_BAD_INPUT
    line = error_line(capsys)
    assert "--mode dense" in line and "--sparse bm25" in line and "mode=" not in line and "sparse=" not in line, line

    # A mistyped task: the likely names and where the rest are, not 73 names on one line.
    assert main(["search", "bone loss", *store, "--task", "scifct"]) == EXIT_BAD_INPUT
    line = error_line(capsys)
    assert "did you mean 'SciFact'" in line and "c2v-rag tasks" in line and "--instruction" in line, line
    assert len(line) < 300 and "AmazonCounterfactualClassification" not in line


@pytest.mark.parametrize(
    ("typed", "meant"), [("--top_k", "--top-k"), ("--colection", "--collection"), ("--filters", "--filter")]
)
def test_a_mistyped_flag_gets_the_flag_it_likely_meant(typed, meant, capsys):
    with pytest.raises(SystemExit) as info:
        main(["search", "q", typed, "3"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and f"did you mean {meant}?" in err and "c2v-rag search --help" in err, err


@pytest.mark.parametrize(
    ("python", "cli"),
    [
        ("embedded Qdrant allows one at a time. Close the other client, or pass qdrant_url.", "pass --qdrant-url URL."),
        ("pass either qdrant_url (a server) or path", "pass either --qdrant-url URL (a server)"),
        ("qdrant_url='ftp://x' must look like http://host:6333", "--qdrant-url 'ftp://x' must look like"),
        ("on_error='continue' (--on-error continue) to skip it", "--on-error continue to skip it"),
        (
            "quantize='int8' runs on a CPU only: pass device='cpu'",
            "--quantize int8 runs on a CPU only: pass --device cpu",
        ),
        ("rebuild it with c2v_rag.reindex", "rebuild it with c2v-rag reindex"),
        ("pass chunk_size=254 (--chunk-size 254) or less", "pass --chunk-size 254 or less"),
        ("intra_op=0 threads: pass 1 or more, or None for torch's default", "--threads 0: pass 1 or more"),
        ("so pass rerank >= top_k (e.g. rerank=20 with top_k=5)", "pass --rerank >= --top-k (e.g. --rerank 20 with"),
        ("pass another target_path/target_url or target_collection", "pass another --to-path/--to-url or --to-co"),
        (
            "copy them with c2v_rag.migrate(..., source_path='/s', target_store='edge').",
            "c2v-rag migrate --path '/s' --to-store edge --to-path NEWDIR.",
        ),
        ("Pass chunk_context='lead' to", "Pass --chunk-context lead to"),
    ],
)
def test_the_flag_wording_table(python, cli):
    assert cli in in_flags(python)


def test_an_options_check_is_its_message_not_pydantics_report(docs, tmp_path, capsys):
    """The ingest's options are checked by pydantic, whose report (a header, the input dumped, a link) reached the
    terminal: '1 validation error for IngestConfig text_suffixes Value error, ... [type=value_error, ...]'."""
    store = ["--path", str(tmp_path / "q")]
    for flags, said in (
        (["--text-suffix", ".md"], "error: --text-suffix '.md': .md files are read as Markdown already"),
        (
            ["--chunk-size", "50", "--chunk-overlap", "60"],
            "error: --chunk-overlap 60 must be smaller than --chunk-size",
        ),
        (["--max-file-mb", "-1"], "error: --max-file-mb -1: pass the size in MB"),
    ):
        assert main(["ingest", str(docs), *store, *flags, "-q"]) == EXIT_BAD_INPUT, flags
        line = error_line(capsys)
        assert line.startswith(said), line
        assert "validation error" not in line and "pydantic" not in line and "input_value" not in line, line
    assert not (tmp_path / "q").exists()  # refused before the store was opened


def test_hybrid_scores_are_labelled_fused_ranks_not_cosines(docs, tmp_path, tiny_variant, capsys):
    """A hybrid search printed 1.0000, 0.6667... as if they were cosines."""
    pytest.importorskip("bm25s")
    store = ["--path", str(tmp_path / "q"), "--model", str(tiny_variant)]
    assert main(["ingest", str(docs), *store, *CHUNKS, "--sparse", "bm25"]) == 0
    capsys.readouterr()
    assert main(["search", "bone loss", *store, "--mode", "hybrid"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("scores: fused ranks") and "not cosines" in out.splitlines()[0], out
    assert main(["search", "bone loss", *store]) == 0
    assert "scores:" not in capsys.readouterr().out  # dense scores are cosines, unlabelled


def test_chunks_over_the_encoder_say_which_chunk_size_fits(tmp_path, tiny_model_factory, caplog):
    """The truncation warning said how many chunks the encoder cut and not what to change. A chunk size over
    the encoder's limit (here 16 tokens, 14 of text) is taken as asked, and the warning names the one that fits."""
    variant = tmp_path / "variant"
    tiny_model_factory("llama", max_length=128, encoder_max_length=16).save_pretrained(variant)
    docs = tmp_path / "long"
    docs.mkdir()
    (docs / "a.txt").write_text(make_text(3, sentences=10), encoding="utf-8")
    store = ["--path", str(tmp_path / "q"), "--model", str(variant), "-q"]
    with caplog.at_level("WARNING"):  # the CLI's log handlers (pytest's, here) print it
        assert main(["ingest", str(docs), *store, "--chunk-size", "100", "--chunk-overlap", "4"]) == 0
    text = caplog.text
    assert "truncated for the encoder" in text and "Chunks fit it whole at --chunk-size 14 or less." in text, text


def test_a_warning_is_said_once_a_command(capsys):
    """The same words warned from two places (``search -`` checks a filter before its prompt, then at its first
    search) show once, as a ``warning:`` line in the flags' words; other warnings still show."""
    import warnings

    with warnings.catch_warnings():  # restores showwarning and the filters
        warnings.simplefilter("default")
        one_line_warnings()
        for _ in range(2):
            warnings.warn("truncate_dim=None keeps the whole vector", UserWarning, stacklevel=1)
        warnings.warn("truncate_dim=None keeps the whole vector", UserWarning, stacklevel=1)  # another line
        warnings.warn("another matter", UserWarning, stacklevel=1)
    err = capsys.readouterr().err.splitlines()
    assert err == [f"warning: {in_flags('truncate_dim=None keeps the whole vector')}", "warning: another matter"]


def test_a_library_with_its_own_log_handler_is_heard_once():
    """huggingface_hub logs through a stderr handler of its own and passes each record to the root logger too: under
    the command line's root handler, each of its warnings (an offline hub's retries) showed twice. During a command
    the root's handler no longer gets them; its own still does."""
    import io
    import logging

    from huggingface_hub.utils import logging as hub_logging

    hub = hub_logging.get_logger("huggingface_hub.utils._http")
    assert logging.getLogger("huggingface_hub").handlers  # its own, added on import: one showing
    shown = io.StringIO()
    root = logging.StreamHandler(shown)
    logging.getLogger().addHandler(root)
    try:
        hub.warning("Retrying in 1s [Retry 1/5].")
        assert "Retrying in 1s" in shown.getvalue()  # the second showing, before
        with library_logs_once():
            hub.warning("Retrying in 2s [Retry 2/5].")
        assert "Retrying in 2s" not in shown.getvalue()
        hub.warning("Retrying in 4s [Retry 3/5].")  # a process that goes on gets its logging back as it was
        assert "Retrying in 4s" in shown.getvalue()
    finally:
        logging.getLogger().removeHandler(root)


def test_eval_without_a_model_is_a_usage_error(tmp_path, capsys):
    # It was a SystemExit with its message: exit 1 and no "error:" line, unlike every other refusal.
    assert main(["eval", "--data", str(tmp_path)]) == EXIT_BAD_INPUT
    assert error_line(capsys) == "error: name at least one variant (or 'default'), or a --baseline bi-encoder"


@pytest.mark.parametrize(
    ("override", "meant"), [("training.stepz=2", "did you mean 'steps'?"), ("datasets.0.pth=x", "did you mean 'path'?")]
)
def test_a_mistyped_recipe_key_gets_the_key_it_likely_meant(override, meant, capsys):
    """It was pydantic's report: '1 validation error for TrainConfig', 'Extra inputs are not permitted
    [type=extra_forbidden, ...]' and a link, with no word of the keys there are."""
    from pathlib import Path

    recipe = Path(__file__).resolve().parents[2] / "recipes" / "llm2vec_mntp.yaml"
    assert main(["train", str(recipe), "--set", override]) == EXIT_BAD_INPUT
    line = error_line(capsys)
    assert f"{override.split('=')[0]}: no such setting: {meant} it takes " in line, line
    assert "pydantic" not in line and "extra_forbidden" not in line, line
