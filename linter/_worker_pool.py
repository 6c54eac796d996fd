"""Worker processes that end with the run that started them, however it ends.

Every pool of worker processes amp-lint makes comes from `worker_pool`, a drop-in for
``ProcessPoolExecutor(max_workers=..., initializer=..., initargs=...)`` used as a ``with``
block. Three things differ from the plain executor:

- **A worker dies with its parent.** A plain executor's workers outlive a parent killed with
  SIGKILL (``timeout -s KILL``, a CI step's time limit, a subprocess timeout, an editor
  restarting a tool): asleep on a queue nobody will write to again, re-parented to init. A day
  of such runs left 76 of them, about 90 MB each (issue 43). On Linux each worker asks the kernel
  for SIGKILL when its parent dies (``prctl(PR_SET_PDEATHSIG)``); elsewhere, or where that call
  is refused, a thread of the worker watches the parent and ends the worker when it is gone.
- **Leaving the block by an exception ends the workers now.** The executor's own ``with``
  waits for every chunk already handed out, so a Ctrl-C or a SIGTERM turned into an exception
  (see `linter.cli`) waited seconds for work whose results nobody would read. Here queued work
  is cancelled and the workers are killed, then reaped, before the exception goes on.
- **Ctrl-C and SIGTERM wait while the workers are forked.** A signal handler runs wherever the
  main thread is, and what it raises inside ``os.fork``'s at-fork callbacks is printed as
  "Exception ignored in: <function _releaseLock>" and dropped: the run went on to its end.
  Signalled just as a pool started, two runs of three did so. The workers are forked when the
  pool is made, with the two signals held, and a signal that came meanwhile is raised after.

Workers ignore SIGINT: a Ctrl-C at a terminal reaches every process of the foreground group,
and the parent, which ends the workers anyway, is the one to report it (otherwise each worker
printed a ``KeyboardInterrupt`` traceback of its own).
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from multiprocessing.context import BaseContext
from typing import Any

__all__ = ["worker_pool"]

#: The signals that end a run (see `linter.cli`): held while workers are forked.
_ENDING_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM})

#: prctl(2)'s option that names the signal a process gets when its parent dies (linux/prctl.h).
_PR_SET_PDEATHSIG = 1
#: How often a watching thread checks that the parent is still there (where no signal can tell).
_WATCH_INTERVAL_S = 0.5
#: How long ending a pool waits for its killed workers to be reaped.
_REAP_TIMEOUT_S = 2.0


@contextmanager
def worker_pool(
    max_workers: int | None = None,
    initializer: Callable[..., object] | None = None,
    initargs: tuple[Any, ...] = (),
) -> Iterator[concurrent.futures.ProcessPoolExecutor]:
    """A process pool whose workers end when this process dies, and are killed at once when
    the block is left by an exception (KeyboardInterrupt included, which then goes on).

    ``initializer(*initargs)`` still runs in each worker, after the worker is tied to this
    process. Whatever stops workers from starting (a sandbox without ``fork`` or POSIX
    semaphores: ``OSError``) is raised as the executor raises it, so callers keep their
    fallback of working in one process.
    """
    # Looked up when called, not imported by name, as callers and their tests do.
    pool = concurrent.futures.ProcessPoolExecutor(
        max_workers=max_workers,
        mp_context=_context(),
        initializer=_start_worker,
        initargs=(os.getpid(), initializer, initargs),
    )
    try:
        with _signals_held():
            # Forks every worker now (all of them at a fork context's first task) rather than
            # in the caller's first submit, where the signals are not held.
            pool.submit(_started)
        yield pool
        pool.shutdown(wait=True)
    except BaseException:
        _end_workers(pool)
        raise


@contextmanager
def _signals_held() -> Iterator[None]:
    """`_ENDING_SIGNALS` held back from this thread in the block, delivered after it."""
    if not hasattr(signal, "pthread_sigmask"):  # Windows, which has no fork either
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _ENDING_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _started() -> None:
    """The first task of every pool: nothing, but submitting it starts the workers."""


def _context() -> BaseContext:
    """The default way to start processes, but spawn for forkserver: a forkserver's workers
    are the server's children, not this process's, so the signal would watch the server and
    the check of `_tie_to_parent` could not tell a dead parent from the server."""
    context = multiprocessing.get_context()
    if context.get_start_method() == "forkserver":
        return multiprocessing.get_context("spawn")
    return context


def _end_workers(pool: concurrent.futures.ProcessPoolExecutor) -> None:
    """Cancel what is queued, kill the workers without waiting for their chunks, reap them,
    and let the pool's manager thread see them gone and close the pool.

    The manager thread must end, as the interpreter's exit waits for it. A worker killed in
    the middle of sending a result leaves half a message in the result pipe, and the thread
    blocked reading the rest: no end of file came, since this process holds the pipe's write
    end too, and 3 of 42 runs interrupted at random moments hung at exit until it is closed
    here. The thread is waited for as well: one still closing the pool at exit races the
    executor's exit hook, which wakes it through a pipe it is closing ("Exception ignored in:
    <module 'threading'>" and a traceback after the one line of an interrupted run, once in
    three runs interrupted as their pool started).
    """
    # Taken before shutdown, which forgets them. (Python 3.14's `kill_workers` does the same.)
    processes = list((pool._processes or {}).values())
    manager: object = pool._executor_manager_thread  # typeshed calls it a _ThreadWakeup
    results = pool._result_queue
    pool.shutdown(wait=False, cancel_futures=True)
    with _cancelled_future_race_quiet(manager):
        for process in processes:
            with suppress(OSError, ValueError):  # already gone, or already closed
                process.kill()
        deadline = time.monotonic() + _REAP_TIMEOUT_S
        for process in processes:
            with suppress(ValueError):
                process.join(max(0.0, deadline - time.monotonic()))
        # The result queue's write end (SimpleQueue's `_writer`, which typeshed leaves out):
        # the workers, its only users, are gone.
        writer = getattr(results, "_writer", None)
        if writer is not None:
            writer.close()
        if isinstance(manager, threading.Thread):
            manager.join(max(0.0, deadline - time.monotonic()))


@contextmanager
def _cancelled_future_race_quiet(manager: object) -> Iterator[None]:
    """Within the block, ``manager`` dying of a known race of Python before 3.12 prints
    nothing. Seeing its workers dead, the thread marks each pending future broken, and a
    future cancelled meanwhile (`Executor.map` cancels the rest when the caller's wait is
    interrupted) raises InvalidStateError: a traceback after the one line of an interrupted
    run (1 of 57 runs). 3.12 ignores that error there; a pool being ended has nothing left
    to tell its futures either."""
    if sys.version_info >= (3, 12):
        yield
        return
    chained = threading.excepthook

    def hook(args: threading.ExceptHookArgs) -> None:
        if args.thread is manager and args.exc_type is concurrent.futures.InvalidStateError:
            return
        chained(args)

    threading.excepthook = hook
    try:
        yield
    finally:
        threading.excepthook = chained


def _start_worker(
    parent: int, initializer: Callable[..., object] | None, initargs: tuple[Any, ...]
) -> None:
    """Each worker's initializer: tie it to ``parent`` (the process that made the pool), hand
    Ctrl-C to the parent, then run the caller's own initializer."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # A forked worker inherits the parent's handlers: the command's SIGTERM handler would
    # raise in the worker's loop and print a traceback. A worker dies quietly instead.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if hasattr(signal, "pthread_sigmask"):  # held while this worker was forked
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _ENDING_SIGNALS)
    _tie_to_parent(parent)
    if initializer is not None:
        initializer(*initargs)


def _tie_to_parent(parent: int) -> None:
    """End this process when ``parent`` dies: by the kernel's parent-death signal on Linux,
    else by a watching thread."""
    if _parent_death_signal():
        # The signal only covers a parent that dies after the request: one that died between
        # fork and prctl has already handed this process to init (or a subreaper), which
        # getppid now names. prctl(2) gives this check as the way to close that race.
        if os.getppid() != parent:
            os._exit(1)
        return
    threading.Thread(
        target=_watch_parent, args=(parent,), name="amp-lint parent watch", daemon=True
    ).start()


def _parent_death_signal() -> bool:
    """Ask Linux to SIGKILL this process when its parent thread ends; False where it cannot.

    The "parent" is the thread that forked this process, not the whole process (prctl(2)).
    A pool's workers are forked by the thread that first submits work to it, which stays in
    the ``with`` block until the pool is shut down, so the thread outlives the workers.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        done = libc.prctl(
            ctypes.c_int(_PR_SET_PDEATHSIG),
            ctypes.c_ulong(signal.SIGKILL),
            ctypes.c_ulong(0),
            ctypes.c_ulong(0),
            ctypes.c_ulong(0),
        )
    except (OSError, AttributeError):  # no C library to load, or no prctl in it
        return False
    return bool(done == 0)


def _watch_parent(parent: int) -> None:
    """End this process once ``parent`` is gone (a daemon thread's loop, where no signal is).

    Two signs, because neither is enough everywhere: on Windows a process is never
    re-parented, so ``getppid`` keeps the dead parent's id, but the parent's sentinel there is
    a handle to the parent process, ready when it exits; on POSIX the sentinel is a pipe whose
    write end forked siblings may hold too, but a dead parent's children are re-parented.
    """
    watched = multiprocessing.parent_process()
    sentinels = [watched.sentinel] if watched is not None and watched.sentinel is not None else []
    while True:
        if sentinels:
            gone = bool(multiprocessing.connection.wait(sentinels, _WATCH_INTERVAL_S))
        else:
            time.sleep(_WATCH_INTERVAL_S)
            gone = False
        if gone or os.getppid() != parent:
            os._exit(1)
