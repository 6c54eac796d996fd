"""Worker processes end with the run that made them, however it ends (issue 43).

A run killed with SIGKILL leaves no process behind; SIGTERM and Ctrl-C end it within a second,
with the exit status a shell reports (143, 130), one line on standard error and no process
left. The runs are real ones, in subprocesses, on a generated project large enough for every
pool of workers; their processes are found through Linux's /proc, by the session each run is
started in (a worker re-parented to init keeps its session, so none escapes the count).
"""

from __future__ import annotations

import multiprocessing
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest

import linter
from linter import cli
from linter._engine import PARALLEL_MIN_FILES
from linter._worker_pool import _tie_to_parent, worker_pool

ON_LINUX = sys.platform.startswith("linux") and os.path.isdir("/proc/self")
needs_proc = pytest.mark.skipif(
    not ON_LINUX, reason="finds a run's processes through Linux's /proc (no such listing here)"
)

#: A file the pre-filter passes, so that every file is read, summarised and parsed.
TRAINING_FILE = """\
import torch
from torch.cuda.amp import GradScaler, autocast

scaler = GradScaler()


def train_{index}(model, loader, optimizer):
    for step, (x, y) in enumerate(loader):
        with autocast():
            loss = model(x).sub(y).pow(2).mean()
        scaler.scale(loss).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
        print(step, scaler.get_scale())
        optimizer.zero_grad()
    return model.half().state_dict()
"""
#: Files in the generated project: well above the engine's and the model's pool thresholds
#: (32 each), so that a cold run reads, summarises and lints in pools of workers for seconds.
FILE_COUNT = 300
#: Seconds a run has to start its first workers (generous: a loaded two-core machine).
START_TIMEOUT_S = 120.0
#: Seconds after a SIGKILL by which every process of the run must be gone.
KILL_GRACE_S = 5.0
#: Seconds within which SIGTERM or Ctrl-C must end the whole run.
SIGNAL_DEADLINE_S = 1.0
#: How often the tests look at the processes.
POLL_S = 0.02


def _plain_pools() -> list[str]:
    """The modules of linter/ that make worker processes other than through `worker_pool`."""
    package = Path(linter.__file__).parent
    pattern = re.compile(r"\bProcessPoolExecutor\(|\bmultiprocessing\.(?:Pool|Process)\(")
    return sorted(
        path.relative_to(package.parent).as_posix()
        for path in package.rglob("*.py")
        if path.name != "_worker_pool.py" and pattern.search(path.read_text(encoding="utf-8"))
    )


#: The whole-run tests below cannot pass while a pool of the run is made without
#: `worker_pool`: its workers outlive a SIGKILL, and SIGTERM waits for their chunks.
_PLAIN_POOLS = _plain_pools()
whole_run = pytest.mark.xfail(
    bool(_PLAIN_POOLS),
    run=False,
    reason=f"not every pool of a run is a worker_pool yet: {', '.join(_PLAIN_POOLS)}",
)


def test_every_pool_of_worker_processes_is_a_worker_pool() -> None:
    assert _plain_pools() == []


# --- Processes, as /proc lists them ------------------------------------------------------------


def _stat(pid: int) -> list[str] | None:
    """/proc/PID/stat's fields from the state on (the name before them may hold spaces)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:  # gone
        return None
    return text.rpartition(")")[2].split()


def _live(select: Callable[[list[str]], bool]) -> set[int]:
    """The processes, zombies left out, whose stat fields ``select`` picks."""
    found = set()
    for name in os.listdir("/proc"):
        if name.isdigit():
            fields = _stat(int(name))
            if fields is not None and fields[0] != "Z" and select(fields):
                found.add(int(name))
    return found


def _children(parent: int) -> set[int]:
    return _live(lambda fields: int(fields[1]) == parent)


def _of_session(session: int) -> set[int]:
    """Every live process of a run started in its own session, re-parented ones included."""
    return _live(lambda fields: int(fields[3]) == session)


def _left_after(session: int, seconds: float) -> set[int]:
    """The processes of ``session`` still alive ``seconds`` from now (sooner when none is)."""
    deadline = time.monotonic() + seconds
    while True:
        left = _of_session(session)
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(POLL_S)


@contextmanager
def _session(command: list[str], folder: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``command`` started in a session of its own, its output written to ``folder``'s
    ``stdout`` and ``stderr`` (files: a pipe would stay open while an orphaned worker holds
    it). Whatever of it a failed test leaves is killed afterwards, so that one failure leaves
    no process behind for the next test."""
    # Python's fault handler prints every thread's stack on SIGABRT: see `_exit_status`.
    environment = {**os.environ, "PYTHONFAULTHANDLER": "1"}
    with (folder / "stdout").open("wb") as out, (folder / "stderr").open("wb") as errors:
        process = subprocess.Popen(
            command,
            cwd=folder,
            stdout=out,
            stderr=errors,
            start_new_session=True,
            env=environment,
        )
    try:
        yield process
    finally:
        for pid in _of_session(process.pid):
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        process.kill()
        process.wait()


def _exit_status(process: subprocess.Popen[bytes], folder: Path) -> int:
    """The exit status of a run told to end; a run still there a minute later fails the test
    with the stack of each of its threads, so that a hang says where it hangs."""
    try:
        return process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGABRT)
        process.wait()
        pytest.fail(f"still running a minute later: {(folder / 'stderr').read_text()}")


def _workers_started(process: subprocess.Popen[bytes], folder: Path, busy_s: float) -> set[int]:
    """Wait until the run has worker processes, and they have been there ``busy_s`` seconds
    (0: as soon as a pool starts); returns them."""
    seen: dict[int, float] = {}
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            errors = (folder / "stderr").read_text()
            pytest.fail(f"the run ended before its workers were seen: {errors!r}")
        now = time.monotonic()
        children = _children(process.pid)
        seen = {pid: seen.get(pid, now) for pid in children}
        if any(now - since >= busy_s for since in seen.values()):
            return children
        time.sleep(POLL_S)
    pytest.fail(f"no worker processes within {START_TIMEOUT_S} s")


@pytest.fixture(scope="module")
def big_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("big_project")
    (root / "pyproject.toml").write_text('[project]\nname = "big-project"\n')
    for index in range(FILE_COUNT):
        (root / f"train_{index:03}.py").write_text(TRAINING_FILE.format(index=index))
    assert FILE_COUNT >= 4 * PARALLEL_MIN_FILES
    return root


@pytest.fixture
def ctrl_c_reaches_children() -> Iterator[None]:
    """A test suite started in the background of a shell ignores SIGINT, and the runs it
    starts would inherit that; a command run at a terminal, which Ctrl-C reaches, does not."""
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def _amp_lint(project: Path) -> list[str]:
    """A cold run over ``project`` in two workers, whatever the machine's CPU count."""
    return [sys.executable, "-m", "linter", "--no-cache", "--jobs", "2", str(project)]


#: When a signal comes: as a pool starts its workers, or while they work.
MOMENTS = [pytest.param(0.0, id="pool-starting"), pytest.param(1.0, id="pool-working")]


# --- The command ------------------------------------------------------------------------------


@needs_proc
@whole_run
@pytest.mark.parametrize("busy_s", MOMENTS)
def test_a_run_killed_with_sigkill_leaves_no_process(
    big_project: Path, tmp_path: Path, busy_s: float
) -> None:
    with _session(_amp_lint(big_project), tmp_path) as run:
        _workers_started(run, tmp_path, busy_s)
        run.kill()
        assert run.wait() == -signal.SIGKILL
        assert _left_after(run.pid, KILL_GRACE_S) == set()


@needs_proc
@whole_run
@pytest.mark.parametrize("busy_s", MOMENTS)
def test_sigterm_ends_the_run_within_a_second_with_143(
    big_project: Path, tmp_path: Path, busy_s: float
) -> None:
    with _session(_amp_lint(big_project), tmp_path) as run:
        _workers_started(run, tmp_path, busy_s)
        sent = time.monotonic()
        run.send_signal(signal.SIGTERM)  # as `kill` or a CI runner sends it: to amp-lint alone
        code = _exit_status(run, tmp_path)
        took = time.monotonic() - sent
        left = _left_after(run.pid, max(0.0, SIGNAL_DEADLINE_S - took))
    assert (code, (tmp_path / "stderr").read_text(), left) == (143, "amp-lint: terminated\n", set())
    assert took < SIGNAL_DEADLINE_S


@needs_proc
@whole_run
@pytest.mark.usefixtures("ctrl_c_reaches_children")
@pytest.mark.parametrize("busy_s", MOMENTS)
def test_ctrl_c_ends_the_run_within_a_second_with_130_and_one_line(
    big_project: Path, tmp_path: Path, busy_s: float
) -> None:
    with _session(_amp_lint(big_project), tmp_path) as run:
        _workers_started(run, tmp_path, busy_s)
        sent = time.monotonic()
        os.killpg(run.pid, signal.SIGINT)  # as a terminal's Ctrl-C: to every process of the run
        code = _exit_status(run, tmp_path)
        took = time.monotonic() - sent
        left = _left_after(run.pid, max(0.0, SIGNAL_DEADLINE_S - took))
    # One line: no worker prints a KeyboardInterrupt traceback of its own.
    assert (code, (tmp_path / "stderr").read_text(), left) == (
        130,
        "amp-lint: interrupted\n",
        set(),
    )
    assert took < SIGNAL_DEADLINE_S


def test_the_command_gives_back_the_sigterm_handler_it_found(tmp_path: Path) -> None:
    (tmp_path / "clean.py").write_text("x = 1\n")
    before = signal.getsignal(signal.SIGTERM)
    assert cli.main(["--no-cache", "-q", str(tmp_path)]) == cli.EXIT_CLEAN
    assert signal.getsignal(signal.SIGTERM) is before


# --- The API ----------------------------------------------------------------------------------

#: A program that lints through the API and, when interrupted, lists its children still alive
#: at the moment the KeyboardInterrupt reached it.
API_CALLER = textwrap.dedent(
    """
    import os, sys
    from linter import lint_paths

    def children():
        found = []
        for name in filter(str.isdigit, os.listdir("/proc")):
            try:
                fields = open(f"/proc/{name}/stat").read().rpartition(")")[2].split()
            except OSError:
                continue
            if fields[0] != "Z" and int(fields[1]) == os.getpid():
                found.append(int(name))
        return found

    try:
        lint_paths([sys.argv[1]], jobs=2)
    except KeyboardInterrupt:
        print("interrupted; children left:", children())
    else:
        print("finished")
    """
)


@needs_proc
@whole_run
def test_an_api_caller_killed_with_sigkill_leaves_no_process(
    big_project: Path, tmp_path: Path
) -> None:
    with _session([sys.executable, "-c", API_CALLER, str(big_project)], tmp_path) as run:
        _workers_started(run, tmp_path, 0.0)
        run.kill()
        run.wait()
        assert _left_after(run.pid, KILL_GRACE_S) == set()


@needs_proc
@whole_run
@pytest.mark.usefixtures("ctrl_c_reaches_children")
def test_an_api_caller_gets_the_keyboard_interrupt_once_its_workers_are_gone(
    big_project: Path, tmp_path: Path
) -> None:
    with _session([sys.executable, "-c", API_CALLER, str(big_project)], tmp_path) as run:
        _workers_started(run, tmp_path, 1.0)
        run.send_signal(signal.SIGINT)
        code = _exit_status(run, tmp_path)
    output = ((tmp_path / "stdout").read_text(), (tmp_path / "stderr").read_text())
    assert (code, output) == (0, ("interrupted; children left: []\n", ""))


# --- The pool itself --------------------------------------------------------------------------

#: Creates a pool with the parent-death signal unavailable (as on macOS or Windows), hands
#: each worker a long sleep, and waits: killed, its workers must notice on their own.
WATCHED_POOL = textwrap.dedent(
    """
    import time
    import linter._worker_pool as pools

    pools._parent_death_signal = lambda: False
    with pools.worker_pool(max_workers=2) as pool:
        for _ in range(2):
            pool.submit(time.sleep, 300)
        time.sleep(300)
    """
)


@needs_proc
def test_without_the_parent_death_signal_a_watching_thread_ends_orphaned_workers(
    tmp_path: Path,
) -> None:
    with _session([sys.executable, "-c", WATCHED_POOL], tmp_path) as run:
        _workers_started(run, tmp_path, 0.0)
        run.kill()
        run.wait()
        assert _left_after(run.pid, KILL_GRACE_S) == set()


def _tied_to_a_parent_that_is_gone() -> None:
    # The pid of a parent that died before the worker asked for the signal is no longer its
    # parent's: -1 is nobody's.
    _tie_to_parent(-1)
    time.sleep(30)


def test_a_worker_whose_parent_died_before_it_was_tied_ends_at_once() -> None:
    worker = multiprocessing.get_context().Process(target=_tied_to_a_parent_that_is_gone)
    worker.start()
    worker.join(timeout=10)
    assert worker.exitcode == 1


#: What `_set_mark` left in a worker.
_MARKS: list[str] = []


def _set_mark(mark: str) -> None:
    _MARKS.append(mark)


def _marks(_: int) -> tuple[str, ...]:
    return tuple(_MARKS)


def test_the_callers_initializer_still_runs_in_each_worker() -> None:
    with worker_pool(max_workers=2, initializer=_set_mark, initargs=("set",)) as pool:
        assert set(pool.map(_marks, range(8))) == {("set",)}


def _interrupt_myself() -> str:
    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.2)
    except KeyboardInterrupt:  # returned, not raised: raised, it would stop the test session
        return "interrupted"
    return "still working"


def test_workers_leave_ctrl_c_to_the_process_that_made_them() -> None:
    with worker_pool(max_workers=1) as pool:
        assert pool.submit(_interrupt_myself).result(timeout=60) == "still working"


def _leave_by_an_interrupt(workers: set[multiprocessing.process.BaseProcess]) -> None:
    """Give a pool's two workers work for minutes, then leave its block by a Ctrl-C."""
    before = set(multiprocessing.active_children())
    with worker_pool(max_workers=2) as pool:
        for _ in range(2):
            pool.submit(time.sleep, 300)
        workers.update(set(multiprocessing.active_children()) - before)
        raise KeyboardInterrupt


def test_leaving_the_block_by_an_exception_kills_the_workers_without_waiting() -> None:
    workers: set[multiprocessing.process.BaseProcess] = set()
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        _leave_by_an_interrupt(workers)
    assert time.monotonic() - started < 60
    assert len(workers) == 2
    assert not any(worker.is_alive() for worker in workers)
