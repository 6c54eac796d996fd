"""Reproduce, deterministically, the SIGABRT that made the gloo tests flaky (issue 14).

A process that finalizes the interpreter while a gloo worker thread still holds an async
collective's work object dies with "terminate called without an active exception". The thread
releases the work (``ProcessGroupGloo::runLoop`` -> ``~AsyncAllreduceWork`` -> the tensors'
destructors), a tensor's ``TensorImpl::decref_pyobject() noexcept`` takes the GIL for its Python
object, CPython ends a thread that asks for the GIL during finalization with ``pthread_exit``, and
the forced unwind through the ``noexcept`` frame calls ``std::terminate`` (backtrace taken with
gdb from this script's core dump on torch 2.13.0, Python 3.11.7). In the tests the window is
narrow: a worker thread starved of CPU on a loaded machine reaches the release only after the
main thread has started finalizing. Here a huge ``sys.setswitchinterval`` keeps the GIL on the
main thread, so the window is always open.

Usage::

    python tools/gloo_exit_abort_repro.py            # exit status 134 (SIGABRT) on torch 2.13
    python tools/gloo_exit_abort_repro.py --os-exit  # exit status 0: finalization is skipped

The test workers (tests/scaler/scaler_dist_workers.py) leave with ``os._exit(0)`` for this reason.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import torch
import torch.distributed as dist


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--os-exit", action="store_true", help="leave with os._exit(0)")
    parser.add_argument("--collectives", type=int, default=20)
    args = parser.parse_args()
    sys.setswitchinterval(1000.0)  # the main thread keeps the GIL until it blocks
    init = os.path.join(tempfile.mkdtemp(), "init")
    dist.init_process_group("gloo", init_method=f"file://{init}", rank=0, world_size=1)
    flags = []
    for _ in range(args.collectives):
        flag = torch.zeros(())
        dist.all_reduce(flag, async_op=True)  # the work keeps a reference to ``flag``
        flags.append(flag)
    if args.os_exit:
        os._exit(0)


if __name__ == "__main__":
    main()
