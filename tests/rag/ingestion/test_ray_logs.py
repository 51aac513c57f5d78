"""What Ray prints on the console during a run (quiet_ray), through Ray's own loggers and handlers."""

from __future__ import annotations

import logging
import warnings

import pytest

pytest.importorskip("ray.data")

import ray.data
from rag_helpers import ray_console_on_stderr

from c2v_rag.rag.ingestion.pipeline import printed_above_bars
from c2v_rag.rag.ingestion.ray_logs import quiet_ray

# What Ray logged during a one-minute ingest on a local cluster, each through the logger that logs it.
RAY_LINES = [
    (
        "ray._private.authentication.authentication_token_setup",
        logging.WARNING,
        "Token authentication is enabled for this Ray cluster. Set RAY_AUTH_MODE=disabled to opt out.",
    ),
    ("ray.data._internal.execution.streaming_executor", logging.INFO, "Starting execution of Dataset dataset_1"),
    ("ray.data._internal.execution.streaming_executor", logging.INFO, "Execution plan of Dataset dataset_1: ..."),
    ("ray.data", logging.WARNING, "Progress bars disabled. To enable, set `ray.data.DataContext...`"),
]
# What must still show: a worker's warning about a file it skipped, and Ray's errors.
KEPT_LINES = [
    ("ray.data._internal.execution.operators", logging.WARNING, "notes.txt: skipped 1 files and 0 records"),
    ("ray._private.worker", logging.ERROR, "The actor died unexpectedly"),
]


def _log_everything() -> None:
    for name, level, message in RAY_LINES + KEPT_LINES:
        logging.getLogger(name).log(level, message)
    warnings.warn(
        "The maximum number of concurrent tasks for 'Write' is set to 2, but the operator only received 1 input(s).",
        UserWarning,
        stacklevel=1,
    )


def _shown(text: str) -> set[str]:
    return {message for _, _, message in RAY_LINES + KEPT_LINES if message in text}


@pytest.mark.parametrize("inside_bars", [False, True])
def test_a_run_shows_ray_warnings_but_not_its_notes_and_all_with_verbose_logging(
    capsys, caplog, monkeypatch, inside_bars
):
    with ray_console_on_stderr():
        caplog.set_level(logging.WARNING, logger="c2v_rag")
        # Ray's loggers pass every record to the handlers: ray.init(logging_level=...) in another test of the
        # process sets the "ray" logger's level, which would drop some before any filter sees them.
        caplog.set_level(logging.DEBUG, logger="ray")
        context = ray.data.DataContext.get_current()
        monkeypatch.setattr(context, "enable_progress_bars", True)  # as a user's Ray has it
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with quiet_ray(bars_off=True):
                assert context.enable_progress_bars is False
                if inside_bars:  # as the Ray ingest runs: the bar's handlers wrap Ray's console handlers
                    with printed_above_bars():
                        _log_everything()
                else:
                    _log_everything()
        err = capsys.readouterr().err
        assert _shown(err) == {message for _, _, message in KEPT_LINES}
        assert not caught  # the write-concurrency advice
        assert context.enable_progress_bars is True  # as it was

        # After the run, Ray prints as before; and with c2v_rag logging at INFO (-v) every line shows during a run too.
        with pytest.warns(UserWarning, match="concurrent tasks for 'Write'"):
            _log_everything()
        assert _shown(capsys.readouterr().err) == {message for _, _, message in RAY_LINES + KEPT_LINES}
        caplog.set_level(logging.INFO, logger="c2v_rag")
        with warnings.catch_warnings(record=True) as caught, quiet_ray(bars_off=False):
            warnings.simplefilter("always")
            assert context.enable_progress_bars is True
            _log_everything()
        assert len(_shown(capsys.readouterr().err)) == len(RAY_LINES + KEPT_LINES) and len(caught) == 1


def test_a_run_that_keeps_ray_data_bars_keeps_its_progress_lines_without_a_terminal(capsys, caplog):
    """Without a terminal Ray Data logs its progress at INFO instead of drawing bars: embed --ray, which has no
    bar of its own, keeps those lines; a run with its own bar turns Ray's off (and so these lines)."""
    progress = logging.getLogger("ray.data._internal.progress.logging_progress")
    line = "Dataset dataset_1: 3/8 blocks, 1.2 MiB"  # the shape of Ray's line, not its exact wording
    with ray_console_on_stderr():
        caplog.set_level(logging.WARNING, logger="c2v_rag")
        caplog.set_level(logging.DEBUG, logger="ray")
        with quiet_ray(bars_off=False):
            progress.info(line)
            logging.getLogger("ray.data._internal.execution.streaming_executor").info("Execution plan of Dataset")
        kept = capsys.readouterr().err
        with quiet_ray(bars_off=True):
            progress.info(line)
        dropped = capsys.readouterr().err
    assert line in kept and "Execution plan" not in kept
    assert line not in dropped
