"""Build the documentation once per test run and hand the HTML folder to the tests.

The build runs ``sphinx-build -W --keep-going -n`` in a subprocess, exactly as CI and tox do, so a
page that warns fails here too. Under pytest-xdist every worker would build its own copy; a lock
file in the run's shared temporary folder lets the first worker build and the others reuse it.
"""

from __future__ import annotations

import fcntl
import json
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from docs_site import DOCS, DocsBuild


def _build(out: Path) -> dict[str, object]:
    command = [
        sys.executable, "-m", "sphinx", "-W", "--keep-going", "-n", "-b", "html", "-q",
        str(DOCS), str(out / "html"),
    ]  # fmt: skip
    # CPU time, not wall time: on a machine shared with other jobs (CI's 2 cores, xdist workers)
    # the wall time of the same build varied from ~40 s to 140 s (issue 14).
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = subprocess.run(command, capture_output=True, text=True, check=False, timeout=600)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "returncode": result.returncode,
        "log": result.stdout + result.stderr,
        "cpu_seconds": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
    }


@pytest.fixture(scope="session")
def docs_build(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> DocsBuild:
    # The parent of the base temp folder is shared by all xdist workers of one run.
    shared = (
        tmp_path_factory.getbasetemp() / "docs"
        if worker_id == "master"
        else (tmp_path_factory.getbasetemp().parent / "docs")
    )
    shared.mkdir(parents=True, exist_ok=True)
    record = shared / "build.json"
    with (shared / "build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not record.exists():
            record.write_text(json.dumps(_build(shared)), encoding="utf-8")
    outcome = json.loads(record.read_text(encoding="utf-8"))
    return DocsBuild(html=shared / "html", **outcome)


@pytest.fixture(scope="session")
def built_docs(docs_build: DocsBuild) -> DocsBuild:
    """The build, which must have succeeded: tests that read pages need the pages."""
    if docs_build.returncode != 0:
        pytest.fail(f"sphinx-build failed ({docs_build.returncode}):\n{docs_build.log}")
    return docs_build
