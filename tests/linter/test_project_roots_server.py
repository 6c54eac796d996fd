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
from pygls.uris import to_fs_path
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
        (line, column, code, message, related)
        for name, line, column, code, message, related in in_process(root, ".", root)
        if name == relative
    }
    diagnostics = await open_buffer(client, path, path.read_text(encoding="utf-8"), write=False)

    def site(uri: str) -> str:
        """A related site's file as `in_process` names it: "" for the buffer's own."""
        return "" if uri == path.as_uri() else Path(to_fs_path(uri)).relative_to(root).as_posix()

    found = {
        (
            d.range.start.line + 1,
            d.range.start.character + 1,
            str(d.code),
            d.message,
            # A site in another file of the project points at that file.
            frozenset(
                (
                    site(r.location.uri),
                    r.location.range.start.line + 1,
                    r.location.range.start.character + 1,
                )
                for r in d.related_information or []
            ),
        )
        for d in diagnostics
    }
    assert found == wanted, json.dumps(sorted(map(repr, found ^ wanted)), indent=1)
