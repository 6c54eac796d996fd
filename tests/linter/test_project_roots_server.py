"""The language server finds a buffer's project as the command line does: every file of every
project without markers (``fixtures/projects/without_markers``) opened in an editor gets the
findings ``amp-lint .`` inside its project gives it (`test_project_roots.py` checks the other
ways of linting against the same)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import pytest_lsp
from test_project_roots import FILES, FIXTURES, PROJECTS, in_process, unmarked_place
from test_server import SERVER, RecordingClient, open_buffer, start

#: One server for the module, as in `test_server.py`.
pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture(scope="module")
def place(tmp_path_factory: pytest.TempPathFactory) -> Path:
    place = unmarked_place(tmp_path_factory)
    for project in PROJECTS:
        shutil.copytree(FIXTURES / project, place / project)
    return place


@pytest_lsp.fixture(config=SERVER, scope="module")
async def client(lsp_client: RecordingClient, place: Path):
    # The workspace is the folder of all the projects: the server must not take it for one.
    await start(lsp_client, place)
    yield
    await lsp_client.shutdown_session()


@pytest.mark.parametrize(("project", "relative"), FILES, ids=["/".join(pair) for pair in FILES])
async def test_an_opened_file_gets_the_findings_of_its_project(
    client: RecordingClient, place: Path, project: str, relative: str
) -> None:
    root = place / project
    path = root / relative
    wanted = {
        (line, column, code, message)
        for name, line, column, code, message, _related in in_process(root, ".", root)
        if name == relative
    }
    diagnostics = await open_buffer(client, path, path.read_text(encoding="utf-8"), write=False)
    found = {
        (d.range.start.line + 1, d.range.start.character + 1, str(d.code), d.message)
        for d in diagnostics
    }
    assert found == wanted, json.dumps(sorted(map(list, found ^ wanted)), indent=1)
