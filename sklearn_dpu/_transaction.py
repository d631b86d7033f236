"""Undo logs that make a deletion all-or-nothing without copying the state.

A deletion edits the stored state in place (the registry's rows, the Gram
statistics, an SGD run): a snapshot of the estimator's attributes cannot undo
that, and a deep copy would cost O(n) per deletion. Instead every in-place
edit made inside :func:`atomic` registers how to undo itself
(:func:`on_rollback`, or :func:`keep_attributes` / :func:`keep_array_values`
before the edit); if the block raises, ``KeyboardInterrupt`` included, the undo
steps run in reverse order, so the objects hold exactly what they held
before. Work that cannot be undone and need not happen before the end (the
removal of a disk-backed registry's former working file, printing) is
postponed to the commit (:func:`on_commit`).

Blocks nest: an inner block that raises undoes its own edits; one that
completes leaves them to the outermost block, which undoes them too if it
fails later (a pipeline whose last step fails undoes its first step's
deletion; a search undoes its selected model's).

SIGINT is deferred (main thread only; elsewhere ``signal.signal`` raises,
and nothing is deferred) while undo steps and commit actions run
(:func:`deferred_sigint`), so that a Ctrl-C cannot stop a rollback half-way.
"""

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import numpy as np

__all__ = [
    "atomic",
    "deferred_sigint",
    "hold_sigint",
    "in_transaction",
    "keep_array_values",
    "keep_attributes",
    "on_commit",
    "on_rollback",
    "staged_finishes",
    "unstaged",
]


# The signal module's functions wrapped by ``signal.signal`` and
# ``signal.getsignal``, which convert every handler to an enum (3 us a call
# against 0.3 us; a deletion makes about 7 of them, 20-30 us of a 0.8 ms
# one-row deletion at n = 1e6, d = 100).
_set_handler, _get_handler = signal._signal.signal, signal._signal.getsignal
_SIGINT = int(signal.SIGINT)


class _Transaction:
    """Undo steps and commit actions of the outermost :func:`atomic` block."""

    def __init__(self) -> None:
        self.undo: list[Callable[[], None]] = []
        self.commit: list[Callable[[], None]] = []
        self.sigint: tuple | None = None  # (previous handler, signals received)

    def hold_sigint(self) -> None:
        """Defer SIGINT until the outermost block ends (main thread only)."""
        if self.sigint is not None or not _may_handle_sigint():
            return
        received: list = []
        try:
            previous = _set_handler(_SIGINT, lambda signum, frame: received.append(signum))
        except ValueError:  # not the main interpreter's main thread
            return
        self.sigint = (previous, received)

    def release_sigint(self) -> bool:
        """Put SIGINT's handler back; whether a SIGINT was held."""
        if self.sigint is None:
            return False
        previous, received = self.sigint
        self.sigint = None
        _set_handler(_SIGINT, previous)
        return bool(received)

    def rollback(self, mark: int) -> None:
        """Run the undo steps registered after the first ``mark``, newest first."""
        with deferred_sigint():
            while len(self.undo) > mark:
                self.undo.pop()()


_ACTIVE: ContextVar[_Transaction | None] = ContextVar("sklearn_dpu_transaction", default=None)


@contextmanager
def atomic() -> Iterator[None]:
    """Run the block all-or-nothing: if it raises, undo the edits it registered.

    Commit actions (:func:`on_commit`) run when the outermost block
    completes, with SIGINT deferred.
    """
    outer = _ACTIVE.get()
    transaction = _Transaction() if outer is None else outer
    mark, commits = len(transaction.undo), len(transaction.commit)
    try:
        try:
            if outer is None:
                _ACTIVE.set(transaction)
            yield
        except BaseException:
            del transaction.commit[commits:]
            transaction.rollback(mark)
            raise
        finally:
            # set back whatever interrupted the block, even before its yield
            # (a token could be lost between set() and its assignment)
            if outer is None:
                _ACTIVE.set(None)
        if outer is None:
            with deferred_sigint():
                _run_all(transaction.commit)
    finally:
        interrupted = outer is None and transaction.release_sigint()
    if interrupted:
        raise KeyboardInterrupt("interrupted while committing (the call completed)")


def _run_all(actions: list[Callable[[], None]]) -> None:
    """Run every commit action (the call has completed: one failing, say
    a print to a closed pipe, must not skip the others), then raise the
    first error."""
    error = None
    for action in actions:
        try:
            action()
        except Exception as caught:  # noqa: BLE001 (raised after the others ran)
            error = error or caught
    if error is not None:
        raise error


def hold_sigint() -> None:
    """From here to the end of the outermost :func:`atomic` block, hold a
    SIGINT and raise ``KeyboardInterrupt`` only once the block has completed
    (main thread only; elsewhere, nothing is deferred).

    For a commit point: once a charge is recorded in a shared ledger, a
    Ctrl-C must not undo the estimator's side of it.
    """
    transaction = _ACTIVE.get()
    if transaction is not None:
        transaction.hold_sigint()


_STAGED: ContextVar[list | None] = ContextVar("sklearn_dpu_staged", default=None)


@contextmanager
def _staging(value: list | None) -> Iterator[list | None]:
    """Run the block with ``_STAGED`` set to ``value``; yield the value it
    had before (set back after the block, however it ends)."""
    before = _STAGED.get()
    try:
        _STAGED.set(value)
        yield before
    finally:
        _STAGED.set(before)


@contextmanager
def staged_finishes() -> Iterator[list]:
    """Collect the ``(prepare, charge)`` steps of the deletions the block runs
    directly instead of running them; the caller runs every ``prepare``, then
    every ``charge``, once every deletion has executed."""
    finishes: list = []
    with _staging(finishes):
        yield finishes


@contextmanager
def unstaged() -> Iterator[list | None]:
    """Run the block with no staging (the deletions it nests finish at
    once); yields the list a :func:`staged_finishes` block collects in, if any."""
    with _staging(None) as before:
        yield before


def in_transaction() -> bool:
    """Whether an :func:`atomic` block is running in this context."""
    return _ACTIVE.get() is not None


def on_rollback(undo: Callable[[], None]) -> None:
    """Register ``undo``, run if the enclosing :func:`atomic` block fails
    (nothing outside a block)."""
    transaction = _ACTIVE.get()
    if transaction is not None:
        transaction.undo.append(undo)


def on_commit(action: Callable[[], None]) -> None:
    """Run ``action`` when the outermost :func:`atomic` block completes
    (at once outside a block); never if it fails."""
    transaction = _ACTIVE.get()
    if transaction is None:
        action()
    else:
        transaction.commit.append(action)


def keep_attributes(obj: Any) -> None:
    """Register the restore of ``obj``'s attributes (a shallow snapshot of its
    ``__dict__``: reassignments are undone, in-place edits of the arrays they
    hold are not)."""
    if _ACTIVE.get() is None:
        return
    saved = dict(obj.__dict__)

    def undo() -> None:
        obj.__dict__.clear()
        obj.__dict__.update(saved)

    on_rollback(undo)


def keep_array_values(array: np.ndarray | None) -> None:
    """Register the restore of ``array``'s values (a copy: for arrays whose
    size does not grow with the number of rows)."""
    if array is None or _ACTIVE.get() is None:
        return
    saved = array.copy()
    on_rollback(lambda: np.copyto(array, saved))


@contextmanager
def deferred_sigint() -> Iterator[None]:
    """Hold a SIGINT that arrives during the block; raise ``KeyboardInterrupt``
    after it. Outside the main thread, or when SIGINT has a handler other
    than Python's default, the block runs as it is (nothing is deferred)."""
    if not _may_handle_sigint():
        yield
        return
    received = []
    try:
        previous = _set_handler(_SIGINT, lambda signum, frame: received.append(signum))
    except ValueError:  # not the main interpreter's main thread
        yield
        return
    try:
        yield
    finally:
        _set_handler(_SIGINT, previous)
    if received:
        raise KeyboardInterrupt


def _may_handle_sigint() -> bool:
    """Whether SIGINT may be deferred here: in the main thread, while
    Python's default handler (``KeyboardInterrupt``) is installed."""
    return (
        threading.current_thread() is threading.main_thread()
        and _get_handler(_SIGINT) is signal.default_int_handler
    )
