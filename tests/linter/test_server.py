"""`amp-lint server` end to end: a real LSP client (pytest-lsp) starts ``python -m linter server``
in a subprocess and speaks JSON-RPC to it over its standard streams; nothing here calls a handler.

Every wait is on a notification or a response (with a timeout), never on a sleep, so the tests
are as quick as the server and do not depend on the machine's speed.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.protocol import default_converter
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

from linter import fix_source, lint_source
from linter.rules import ALL_RULES

#: The debounce the server runs with here: short, so a change is linted quickly, and long enough
#: that a burst of changes sent at once reaches the server within it on a busy machine.
DEBOUNCE_MS = 100
#: How long any one wait may take before the test fails (the server answers in well under 1 s).
TIMEOUT_S = 30


class RecordingClient(LanguageClient):
    """pytest-lsp's client, keeping every diagnostics notification in order, per URI.

    Waiting on ``wait_for_notification`` can miss one: it wakes on the first of several
    notifications that arrive together. Here each one is kept, and a test takes them in turn.
    """

    def __init__(self) -> None:
        super().__init__(converter_factory=default_converter)
        self.publications: dict[str, list[types.PublishDiagnosticsParams]] = {}
        self.taken: dict[str, int] = {}
        self.arrived = asyncio.Event()

    def record(self, params: types.PublishDiagnosticsParams) -> None:
        self.diagnostics[params.uri] = params.diagnostics
        self.publications.setdefault(params.uri, []).append(params)
        self.arrived.set()

    async def next_publication(self, uri: str) -> types.PublishDiagnosticsParams:
        """The first diagnostics published for ``uri`` that the test has not taken yet."""
        while len(self.publications.get(uri, ())) <= self.taken.get(uri, 0):
            self.arrived.clear()
            await asyncio.wait_for(self.arrived.wait(), TIMEOUT_S)
        index = self.taken.get(uri, 0)
        self.taken[uri] = index + 1
        return self.publications[uri][index]


def recording_client() -> RecordingClient:
    client = RecordingClient()
    features = {**DEFAULT_CLIENT_FEATURES}
    features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS] = lambda ls, params: ls.record(params)
    register_lsp_features(client, features)
    return client


SERVER = ClientServerConfig(
    server_command=[sys.executable, "-m", "linter", "server", "--debounce", str(DEBOUNCE_MS)],
    client_factory=recording_client,
)

GET_SCALE = """\
import torch

scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    scaler.scale(loss_fn(model(x), y)).backward()
    scaler.step(optimizer)
    scaler.update()
    print(scaler.get_scale())
"""
#: AMP004 with one safe fix (the import and the use it rewrites).
DEPRECATED = """\
from torch.cuda.amp import GradScaler, autocast

scaler = GradScaler(2.0**14)
with autocast(enabled=use_amp):
    loss = model(x).sum()
"""
#: ampscale's scaler: AMP001's fix (read peek_scale() instead) is unsafe.
AMPSCALE_GET_SCALE = """\
from scaler import GradScaler

scaler = GradScaler("cuda")
for step, (x, y) in enumerate(loader):
    scaler.scale(loss_fn(model(x), y)).backward()
    scaler.step(optimizer)
    scaler.update()
    print(f"step {step} scale {scaler.get_scale()}")
"""


async def start(client: LanguageClient, root: Path) -> types.InitializeResult:
    """Initialize a session the way VS Code does, with ``root`` as the workspace folder."""
    registrations: list[types.Registration] = []
    client.registrations = registrations  # type: ignore[attr-defined]

    @client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def register(params: types.RegistrationParams) -> None:
        registrations.extend(params.registrations)

    return await client.initialize_session(
        types.InitializeParams(
            capabilities=client_capabilities("visual-studio-code"),
            root_uri=root.as_uri(),
            workspace_folders=[types.WorkspaceFolder(uri=root.as_uri(), name=root.name)],
        )
    )


#: One server for the module (starting one costs more than all its tests): each test works in
#: files of its own (its ``tmp_path``) and waits only for what is published for them.
pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_lsp.fixture(config=SERVER, scope="module")
async def client(lsp_client: RecordingClient, tmp_path_factory: pytest.TempPathFactory):
    await start(lsp_client, tmp_path_factory.mktemp("workspace"))
    yield
    await lsp_client.shutdown_session()


@pytest_lsp.fixture(config=SERVER, loop_scope="module")
async def unclosed_client(lsp_client: RecordingClient, tmp_path: Path):
    """A server of its own, which the test itself shuts down."""
    await start(lsp_client, tmp_path)
    yield


async def published(client: RecordingClient, uri: str) -> list[types.Diagnostic]:
    """The next diagnostics published for ``uri``."""
    return list((await client.next_publication(uri)).diagnostics)


async def open_buffer(
    client: RecordingClient, path: Path, text: str, *, write: bool = True
) -> Sequence[types.Diagnostic]:
    """Open ``text`` as the buffer of ``path`` (also written to disk unless ``write`` is
    false) and return what the server publishes for it."""
    if write:
        path.write_text(text, encoding="utf-8")
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(types.TextDocumentItem(path.as_uri(), "python", 1, text))
    )
    return await published(client, path.as_uri())


def span(diagnostic: types.Diagnostic) -> tuple[int, int, int, int]:
    r = diagnostic.range
    return (r.start.line, r.start.character, r.end.line, r.end.character)


def apply(text: str, edits: Sequence[types.TextEdit]) -> str:
    """``text`` with the edits applied, as an editor would (the texts here are ASCII, so
    UTF-16 units are characters)."""
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))

    def offset(position: types.Position) -> int:
        return min(starts[min(position.line, len(starts) - 1)] + position.character, len(text))

    for edit in sorted(edits, key=lambda e: offset(e.range.start), reverse=True):
        text = text[: offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end) :]
    return text


async def actions_at(
    client: RecordingClient, uri: str, diagnostic: types.Diagnostic, only: list[str] | None = None
) -> list[types.CodeAction]:
    result = await asyncio.wait_for(
        client.text_document_code_action_async(
            types.CodeActionParams(
                text_document=types.TextDocumentIdentifier(uri),
                range=diagnostic.range,
                context=types.CodeActionContext(diagnostics=[diagnostic], only=only),
            )
        ),
        TIMEOUT_S,
    )
    return [action for action in result or [] if isinstance(action, types.CodeAction)]


def edits_of(action: types.CodeAction, uri: str) -> Sequence[types.TextEdit]:
    assert action.edit is not None
    assert action.edit.changes is not None
    return action.edit.changes[uri]


async def test_open_publishes_amp001_at_the_call(client: RecordingClient, tmp_path: Path):
    diagnostics = await open_buffer(client, tmp_path / "train.py", GET_SCALE)
    assert [(d.code, d.source, span(d)) for d in diagnostics] == [
        ("AMP001", "amp-lint", (7, 10, 7, 28))
    ]
    assert "get_scale()" in diagnostics[0].message


async def test_ranges_are_in_the_clients_utf16_units(client: RecordingClient, tmp_path: Path):
    # One character outside the BMP before the call: two UTF-16 units, one code point.
    text = GET_SCALE.replace("print(scaler", 'print("😀", scaler')
    (diagnostic,) = await open_buffer(client, tmp_path / "train.py", text)
    line = text.splitlines()[7]
    start = len(line[: line.index("scaler.get")].encode("utf-16-le")) // 2
    assert span(diagnostic) == (7, start, 7, start + len("scaler.get_scale()"))
    assert start == line.index("scaler.get") + 1


async def test_closing_a_buffer_clears_its_diagnostics(client: RecordingClient, tmp_path: Path):
    path = tmp_path / "train.py"
    assert len(await open_buffer(client, path, GET_SCALE)) == 1
    client.text_document_did_close(
        types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(path.as_uri()))
    )
    assert await published(client, path.as_uri()) == []


async def test_the_buffer_is_linted_not_the_file(client: RecordingClient, tmp_path: Path):
    path = tmp_path / "train.py"
    path.write_text("x = 1\n", encoding="utf-8")
    diagnostics = await open_buffer(client, path, GET_SCALE, write=False)
    assert [d.code for d in diagnostics] == ["AMP001"]


async def test_a_change_that_removes_the_bug_clears_the_diagnostic(
    client: RecordingClient, tmp_path: Path
):
    path = tmp_path / "train.py"
    assert len(await open_buffer(client, path, GET_SCALE)) == 1
    # An incremental change, as editors send: line 8 loses its print.
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=path.as_uri(), version=2),
            content_changes=[
                types.TextDocumentContentChangePartial(
                    range=types.Range(types.Position(7, 4), types.Position(7, 29)), text="pass"
                )
            ],
        )
    )
    assert await published(client, path.as_uri()) == []
    # ...and one that brings it back is reported again.
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=path.as_uri(), version=3),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=GET_SCALE)],
        )
    )
    assert [d.code for d in await published(client, path.as_uri())] == ["AMP001"]


async def test_changes_in_a_burst_are_linted_once(client: RecordingClient, tmp_path: Path):
    path = tmp_path / "train.py"
    await open_buffer(client, path, "x = 1\n")
    for version, text in enumerate(("y = 2\n", "z = 3\n", GET_SCALE), start=2):
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(
                    uri=path.as_uri(), version=version
                ),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
            )
        )
    params = await client.next_publication(path.as_uri())
    # The first lint after the burst is of its last version.
    assert (params.version, [d.code for d in params.diagnostics]) == (4, ["AMP001"])


async def test_a_safe_fix_changes_the_buffer_as_fix_would(client: RecordingClient, tmp_path: Path):
    path = tmp_path / "train.py"
    (diagnostic,) = await open_buffer(client, path, DEPRECATED)
    assert diagnostic.code == "AMP004"
    actions = await actions_at(client, path.as_uri(), diagnostic)
    (fix,) = [a for a in actions if a.title.startswith("AMP004:")]
    assert fix.kind == types.CodeActionKind.QuickFix
    assert fix.is_preferred
    assert "unsafe" not in fix.title
    fixed = apply(DEPRECATED, edits_of(fix, path.as_uri()))
    assert fixed == fix_source(DEPRECATED, str(path)).text
    assert fixed != DEPRECATED
    # Asked for quick fixes only: the fix and the noqa action, not "fix all".
    quick = await actions_at(client, path.as_uri(), diagnostic, only=["quickfix"])
    assert [a.title for a in quick] == [fix.title, "Disable AMP004 for this line"]
    everything = await actions_at(client, path.as_uri(), diagnostic)
    assert [a.kind for a in everything][-1] == "source.fixAll.amp-lint"


async def test_fix_all_safe_is_a_source_fix_all_action(client: RecordingClient, tmp_path: Path):
    path = tmp_path / "train.py"
    text = DEPRECATED + GET_SCALE
    diagnostics = await open_buffer(client, path, text)
    assert {d.code for d in diagnostics} == {"AMP001", "AMP004"}
    # As an editor asks on save: only source.fixAll actions.
    actions = await actions_at(client, path.as_uri(), diagnostics[0], only=["source.fixAll"])
    (fix_all,) = actions
    assert fix_all.kind == "source.fixAll.amp-lint"
    fixed = apply(text, edits_of(fix_all, path.as_uri()))
    assert fixed == fix_source(text, str(path)).text
    # AMP001 has no safe fix: it is still there after fixing all.
    assert [d.code for d in lint_source(fixed, str(path))] == ["AMP001"]


async def test_unfixable_codes_offer_no_fix(client: RecordingClient, tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.amp-lint]\nunfixable = ["AMP004"]\n', encoding="utf-8"
    )
    path = tmp_path / "train.py"
    (diagnostic,) = await open_buffer(client, path, DEPRECATED)
    titles = [a.title for a in await actions_at(client, path.as_uri(), diagnostic)]
    # Only the noqa action: neither the fix nor "fix all".
    assert titles == ["Disable AMP004 for this line"]


async def test_an_unsafe_fix_is_labelled_and_not_preferred(client: RecordingClient, tmp_path: Path):
    path = tmp_path / "train.py"
    (diagnostic,) = await open_buffer(client, path, AMPSCALE_GET_SCALE)
    actions = await actions_at(client, path.as_uri(), diagnostic)
    (fix,) = [a for a in actions if a.title.startswith("AMP001:")]
    assert "unsafe" in fix.title
    assert not fix.is_preferred
    fixed = apply(AMPSCALE_GET_SCALE, edits_of(fix, path.as_uri()))
    assert fixed == fix_source(AMPSCALE_GET_SCALE, str(path), unsafe_fixes=True).text
    # Nothing safe to fix, so no "fix all".
    assert await actions_at(client, path.as_uri(), diagnostic, only=["source.fixAll"]) == []


async def test_the_noqa_action_adds_a_noqa_comment(client: RecordingClient, tmp_path: Path):
    path = tmp_path / "train.py"
    (diagnostic,) = await open_buffer(client, path, GET_SCALE)
    actions = await actions_at(client, path.as_uri(), diagnostic)
    (noqa,) = [a for a in actions if a.title == "Disable AMP001 for this line"]
    suppressed = apply(GET_SCALE, edits_of(noqa, path.as_uri()))
    assert suppressed.splitlines()[7] == "    print(scaler.get_scale())  # noqa: AMP001"
    assert lint_source(suppressed, str(path)) == []


async def test_the_noqa_action_extends_an_existing_noqa(client: RecordingClient, tmp_path: Path):
    path = tmp_path / "train.py"
    text = GET_SCALE.replace("get_scale())", "get_scale())  # noqa: F841 -- unused", 1)
    (diagnostic,) = await open_buffer(client, path, text)
    actions = await actions_at(client, path.as_uri(), diagnostic)
    (noqa,) = [a for a in actions if a.title == "Disable AMP001 for this line"]
    suppressed = apply(text, edits_of(noqa, path.as_uri()))
    assert suppressed.splitlines()[7] == (
        "    print(scaler.get_scale())  # noqa: F841, AMP001 -- unused"
    )
    assert lint_source(suppressed, str(path)) == []


async def hover_at(client: RecordingClient, uri: str, line: int, character: int) -> str | None:
    result = await asyncio.wait_for(
        client.text_document_hover_async(
            types.HoverParams(types.TextDocumentIdentifier(uri), types.Position(line, character))
        ),
        TIMEOUT_S,
    )
    if result is None:
        return None
    assert isinstance(result.contents, types.MarkupContent)
    return result.contents.value


async def test_hover_on_a_diagnostic_shows_the_rule(client: RecordingClient, tmp_path: Path):
    (rule,) = [rule for rule in ALL_RULES if rule.code == "AMP001"]
    path = tmp_path / "train.py"
    await open_buffer(client, path, GET_SCALE)
    shown = await hover_at(client, path.as_uri(), 7, 20)
    assert shown is not None
    assert "AMP001" in shown
    assert rule.summary in shown
    assert "amp-lint --explain AMP001" in shown
    assert await hover_at(client, path.as_uri(), 2, 0) is None


async def test_hover_on_a_code_in_a_noqa_comment(client: RecordingClient, tmp_path: Path):
    (rule,) = [rule for rule in ALL_RULES if rule.code == "AMP004"]
    path = tmp_path / "train.py"
    text = GET_SCALE.replace("get_scale())", "get_scale())  # noqa: AMP001, AMP004, F841", 1)
    # AMP004 suppresses nothing there: the file-level directive keeps AMP100 quiet about it.
    text = "# amp-lint: noqa: AMP100\n" + text
    assert await open_buffer(client, path, text) == []
    line = text.splitlines()[8]
    shown = await hover_at(client, path.as_uri(), 8, line.index("AMP004") + 2)
    assert shown is not None
    assert rule.summary in shown
    assert "AMP001**" not in shown
    # Not a rule of ours, and not a code at all.
    assert await hover_at(client, path.as_uri(), 8, line.index("F841") + 1) is None
    assert await hover_at(client, path.as_uri(), 8, line.index("noqa") + 1) is None


async def test_a_broken_buffer_gets_no_diagnostics_and_a_log_line(
    client: RecordingClient, tmp_path: Path
):
    broken = tmp_path / "broken.py"
    assert await open_buffer(client, broken, "scaler.get_scale(\nfor\n") == []
    assert any("not linted" in m.message and "broken.py" in m.message for m in client.log_messages)
    # The server is still there, and still lints.
    diagnostics = await open_buffer(client, tmp_path / "train.py", GET_SCALE)
    assert [d.code for d in diagnostics] == ["AMP001"]


async def test_settings_are_those_of_the_nearest_pyproject_and_reload(
    client: RecordingClient, tmp_path: Path
):
    config = tmp_path / "pyproject.toml"
    config.write_text('[tool.amp-lint]\nignore = ["AMP001"]\n', encoding="utf-8")
    path = tmp_path / "pkg" / "train.py"
    path.parent.mkdir()
    assert await open_buffer(client, path, GET_SCALE) == []
    # The server asked the client to watch pyproject.toml files.
    watchers = [
        watcher["globPattern"]
        for registration in client.registrations  # type: ignore[attr-defined]
        if registration.method == types.WORKSPACE_DID_CHANGE_WATCHED_FILES
        for watcher in registration.register_options["watchers"]
    ]
    assert watchers == ["**/pyproject.toml"]
    config.write_text("[tool.amp-lint]\n", encoding="utf-8")
    client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(
            [types.FileEvent(config.as_uri(), types.FileChangeType.Changed)]
        )
    )
    assert [d.code for d in await published(client, path.as_uri())] == ["AMP001"]


async def test_saving_a_buffer_reads_the_settings_again(client: RecordingClient, tmp_path: Path):
    # For editors that do not watch pyproject.toml for the server.
    config = tmp_path / "pyproject.toml"
    config.write_text("[tool.amp-lint]\n", encoding="utf-8")
    path = tmp_path / "train.py"
    assert [d.code for d in await open_buffer(client, path, GET_SCALE)] == ["AMP001"]
    config.write_text('[tool.amp-lint]\nignore = ["AMP001"]\n', encoding="utf-8")
    client.text_document_did_save(
        types.DidSaveTextDocumentParams(types.TextDocumentIdentifier(path.as_uri()))
    )
    assert await published(client, path.as_uri()) == []


async def test_a_broken_config_is_shown_and_nothing_is_reported(
    client: RecordingClient, tmp_path: Path
):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.amp-lint]\nselect = ["AMP9"]\n', encoding="utf-8"
    )
    assert await open_buffer(client, tmp_path / "train.py", GET_SCALE) == []
    assert any("pyproject.toml" in m.message for m in client.messages)


async def test_related_locations_are_related_information(client: RecordingClient, tmp_path: Path):
    path = tmp_path / "train.py"
    expected = [d for d in lint_source(DEPRECATED, str(path)) if d.related]
    assert expected, "AMP004 names the uses of the deprecated import"
    (diagnostic,) = await open_buffer(client, path, DEPRECATED)
    related = diagnostic.related_information or []
    assert [
        (r.location.uri, r.location.range.start.line + 1, r.location.range.start.character + 1)
        for r in related
    ] == [(path.as_uri(), site.line, site.column) for site in expected[0].related]
    assert [r.message for r in related] == [site.message for site in expected[0].related]


async def test_a_notebook_document_is_linted_across_its_cells(
    client: RecordingClient, tmp_path: Path
):
    notebook = tmp_path / "train.ipynb"
    cells = [
        ("import torch\nscaler = torch.amp.GradScaler('cuda')\n", types.NotebookCellKind.Code),
        ("# Training", types.NotebookCellKind.Markup),
        ("%time\nfor x, y in loader:\n" + GET_SCALE.split("\n", 4)[4], types.NotebookCellKind.Code),
    ]
    uris = [f"vscode-notebook-cell:{notebook.as_posix()}#cell{i}" for i in range(len(cells))]
    client.notebook_document_did_open(
        types.DidOpenNotebookDocumentParams(
            notebook_document=types.NotebookDocument(
                uri=notebook.as_uri(),
                notebook_type="jupyter-notebook",
                version=1,
                cells=[
                    types.NotebookCell(kind, uri)
                    for (_, kind), uri in zip(cells, uris, strict=True)
                ],
            ),
            cell_text_documents=[
                types.TextDocumentItem(uri, "python" if kind == 2 else "markdown", 1, text)
                for (text, kind), uri in zip(cells, uris, strict=True)
            ],
        )
    )
    diagnostics = await published(client, uris[2])
    line = cells[2][0].splitlines().index("    print(scaler.get_scale())")
    assert [(d.code, span(d)) for d in diagnostics] == [("AMP001", (line, 10, line, 28))]
    actions = await actions_at(client, uris[2], diagnostics[0])
    (noqa,) = [a for a in actions if a.title == "Disable AMP001 for this line"]
    assert next(iter(edits_of(noqa, uris[2]))).range.start.line == line
    # The other cells are published too (with nothing), and a change to a cell lints again.
    assert await published(client, uris[0]) == []
    fixed_cell = cells[2][0].replace("print(scaler.get_scale())", "pass")
    client.notebook_document_did_change(
        types.DidChangeNotebookDocumentParams(
            notebook_document=types.VersionedNotebookDocumentIdentifier(
                version=2, uri=notebook.as_uri()
            ),
            change=types.NotebookDocumentChangeEvent(
                cells=types.NotebookDocumentCellChanges(
                    text_content=[
                        types.NotebookDocumentCellContentChanges(
                            document=types.VersionedTextDocumentIdentifier(uri=uris[2], version=2),
                            changes=[types.TextDocumentContentChangeWholeDocument(text=fixed_cell)],
                        )
                    ]
                )
            ),
        )
    )
    assert await published(client, uris[2]) == []


async def test_a_notebook_fix_edits_each_cell_it_touches(client: RecordingClient, tmp_path: Path):
    notebook = tmp_path / "deprecated.ipynb"
    cells = [
        ("from torch.cuda.amp import GradScaler\n", types.NotebookCellKind.Code),
        ("Make the scaler:", types.NotebookCellKind.Markup),
        ("x = 1\nscaler = GradScaler()", types.NotebookCellKind.Code),
    ]
    uris = [f"vscode-notebook-cell:{notebook.as_posix()}#cell{i}" for i in range(len(cells))]
    client.notebook_document_did_open(
        types.DidOpenNotebookDocumentParams(
            notebook_document=types.NotebookDocument(
                uri=notebook.as_uri(),
                notebook_type="jupyter-notebook",
                version=1,
                cells=[
                    types.NotebookCell(kind, uri)
                    for (_, kind), uri in zip(cells, uris, strict=True)
                ],
            ),
            cell_text_documents=[
                types.TextDocumentItem(uri, "python" if kind == 2 else "markdown", 1, text)
                for (text, kind), uri in zip(cells, uris, strict=True)
            ],
        )
    )
    (diagnostic,) = await published(client, uris[0])
    actions = await actions_at(client, uris[0], diagnostic)
    (fix,) = [a for a in actions if a.title.startswith("AMP004:")]
    assert fix.edit is not None
    assert fix.edit.changes is not None
    changes = fix.edit.changes
    fixed = [apply(text, changes.get(uri, [])) for (text, _), uri in zip(cells, uris, strict=True)]
    # What --fix writes into the notebook's cells.
    document = {
        "cells": [
            {"cell_type": "code" if kind == 2 else "markdown", "metadata": {}, "source": text}
            for text, kind in cells
        ],
        "metadata": {"language_info": {"name": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    expected = json.loads(fix_source(json.dumps(document), str(notebook)).text)["cells"]
    assert fixed == ["".join(cell["source"]) for cell in expected]
    assert fixed[2] == 'x = 1\nscaler = GradScaler("cuda")'


async def test_a_step_function_opened_alone_gets_its_cross_module_amp001(
    client: RecordingClient, tmp_path: Path
):
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "trainer"\n\n[tool.amp-lint]\n', encoding="utf-8"
    )
    (tmp_path / "train.py").write_text(
        """\
import torch

from steps import train_step

scaler = torch.amp.GradScaler("cuda")
for batch in loader:
    train_step(model, batch, optimizer, scaler)
""",
        encoding="utf-8",
    )
    steps = """\
def train_step(model, batch, optimizer, scaler):
    scaler.scale(model(batch).loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return scaler.get_scale()
"""
    diagnostics = await open_buffer(client, tmp_path / "steps.py", steps)
    assert [(d.code, d.range.start.line) for d in diagnostics] == [("AMP001", 4)]


async def test_shutdown_then_exit_ends_the_server_with_status_0(unclosed_client: RecordingClient):
    await asyncio.wait_for(unclosed_client.shutdown_session(), TIMEOUT_S)
    server = unclosed_client._server
    assert server is not None
    assert server.returncode == 0
