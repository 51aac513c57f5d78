"""remembered_interrupts: a Ctrl-C that a finalizer swallows still stops the loop at its next check.
sigint_kept / ignore_further_interrupts: a command that stopped on Ctrl-C exits without a second one's reach, and a
process that goes on gets its handler back."""

from __future__ import annotations

import signal
import threading

import pytest

from c2v_rag.core.interrupts import ignore_further_interrupts, remembered_interrupts, sigint_kept


class _InterruptedFinalizer:
    """An object whose finalizer receives the Ctrl-C: Python runs the handler there and drops its exception."""

    def __del__(self) -> None:
        signal.raise_signal(signal.SIGINT)
        sum(range(1000))  # bytecode after the signal, where the pending handler runs


# pytest reports the exception Python dropped in the finalizer: that drop is what these tests are about.
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


@pytest.fixture
def python_sigint_handler():
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_python_alone_loses_a_ctrl_c_taken_in_a_finalizer(python_sigint_handler):
    # What the latch is for: without it, no KeyboardInterrupt comes out of the finalizer, and the code after it
    # runs on as if no Ctrl-C had come.
    obj = _InterruptedFinalizer()
    del obj


def test_the_latch_raises_the_swallowed_ctrl_c_at_the_next_check(python_sigint_handler):
    steps = []
    with pytest.raises(KeyboardInterrupt), remembered_interrupts() as interrupts:
        for step in range(3):
            interrupts.check()
            steps.append(step)
            obj = _InterruptedFinalizer()
            del obj  # the Ctrl-C arrives here and is dropped with "Exception ignored in"
    assert steps == [0]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back


def test_a_ctrl_c_outside_a_finalizer_still_raises_at_once(python_sigint_handler):
    reached = []
    with pytest.raises(KeyboardInterrupt), remembered_interrupts():
        signal.raise_signal(signal.SIGINT)
        reached.append("after")
    assert reached == []


def test_a_program_with_its_own_handler_keeps_it(python_sigint_handler):
    calls = []

    def own(signum, frame):
        calls.append(signum)

    signal.signal(signal.SIGINT, own)
    with remembered_interrupts() as interrupts:
        signal.raise_signal(signal.SIGINT)
        interrupts.check()  # the program's handler took it; nothing to raise
    assert calls == [signal.SIGINT]
    assert signal.getsignal(signal.SIGINT) is own


def test_off_the_main_thread_nothing_changes():
    seen = []

    def worker():
        with remembered_interrupts() as interrupts:
            seen.append(signal.getsignal(signal.SIGINT))
            interrupts.check()

    before = signal.getsignal(signal.SIGINT)
    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert seen == [before]


def test_once_stopped_a_further_ctrl_c_does_nothing_and_the_handler_comes_back(python_sigint_handler):
    with sigint_kept(restore=True):
        ignore_further_interrupts()
        signal.raise_signal(signal.SIGINT)  # would raise KeyboardInterrupt under Python's handler
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with pytest.raises(KeyboardInterrupt):
        signal.raise_signal(signal.SIGINT)


def test_a_program_about_to_exit_keeps_sigint_ignored(python_sigint_handler):
    with sigint_kept(restore=False):
        ignore_further_interrupts()
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN  # the fixture puts Python's handler back


def test_a_block_that_ignores_nothing_leaves_the_handler_alone(python_sigint_handler):
    def own(signum, frame):
        pass

    signal.signal(signal.SIGINT, own)
    with sigint_kept(restore=True):
        pass
    assert signal.getsignal(signal.SIGINT) is own


def test_sigterm_raises_terminated_within_the_block_as_ctrl_c_does_and_is_told_apart():
    """Inside the block SIGTERM stops the code as Ctrl-C does (a KeyboardInterrupt), and a run's own interrupt
    raised while handling it still says it was SIGTERM; outside, SIGTERM's handler is what it was."""
    from c2v_rag.core.interrupts import Terminated, caused_by_ctrl_c, caused_by_sigterm, sigterm_as_interrupt
    from c2v_rag.rag.errors import RunInterrupted

    before = signal.getsignal(signal.SIGTERM)
    if before is not signal.SIG_DFL:
        pytest.skip("this process has a SIGTERM handler of its own; the block leaves it alone")
    with pytest.raises(RunInterrupted) as caught, sigterm_as_interrupt():
        try:
            signal.raise_signal(signal.SIGTERM)
        except KeyboardInterrupt:
            raise RunInterrupted("interrupted; 3 chunks were stored") from None
    assert isinstance(caught.value.__context__, Terminated)
    assert caused_by_sigterm(caught.value) and caused_by_ctrl_c(caught.value)
    assert not caused_by_sigterm(RunInterrupted("Ctrl-C"))
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_a_program_with_its_own_sigterm_handler_keeps_it():
    from c2v_rag.core.interrupts import sigterm_as_interrupt

    seen = []
    before = signal.signal(signal.SIGTERM, lambda signum, frame: seen.append(signum))
    try:
        with sigterm_as_interrupt():
            signal.raise_signal(signal.SIGTERM)
        assert seen == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, before)
