"""`amp-lint server`: the linter as a Language Server (LSP over standard input and output).

A thin face over the Python API, as `linter.cli` is: each buffer is linted with `lint_source`
under its real path and the settings of its nearest configured ``pyproject.toml``, and fixed
with `fix_source`; this module only converts positions and edits to the protocol's and decides
when to lint (on open and save at once, on change after a pause). What was published for each
buffer is kept, so code actions and hover answer from the findings the user sees.

Jupyter notebooks arrive as LSP notebook documents (one text document per cell); their code
cells are linted together, as one notebook file, and each finding is published on its cell.
It needs the ``server`` extra (pygls and lsprotocol); `linter.cli` says so when they are missing.
"""

from __future__ import annotations

import asyncio
import enum
import os
import traceback
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path
from pygls.workspace.position_codec import ServerTextPosition, ServerTextRange

from linter._buffer_edits import line_edits, noqa_code_at, noqa_edit, split_lines
from linter._diagnostic import Diagnostic
from linter._fix import SAFE, Edit
from linter._lsp_notebook import CellLayout, as_ipynb
from linter._notebook import NOTEBOOK_SUFFIX
from linter._selection import SelectorError
from linter._version import __version__
from linter.api import LintError, fix_source, fixable_codes, lint_source
from linter.config import ConfigError, Settings, load_settings
from linter.rules import ALL_RULES

#: The ``source`` of every published diagnostic.
SOURCE = "amp-lint"
#: The kind of "fix all safe": editors that run ``source.fixAll`` on save pick it up.
FIX_ALL_KIND = f"{types.CodeActionKind.SourceFixAll.value}.{SOURCE}"
#: The file whose change reloads the settings.
CONFIG_NAME = "pyproject.toml"
#: How long a buffer must stay unchanged before it is linted again, by default.
DEFAULT_DEBOUNCE_S = 0.3
#: Suffixes of the files linted as Python (besides buffers whose language id says so).
PYTHON_SUFFIXES = (".py", ".pyi")
#: Rules by code, for hover.
RULES = {rule.code: rule for rule in ALL_RULES}


@dataclass(frozen=True, slots=True)
class Shown:
    """One finding as published, and its fix as edits of the documents it changes."""

    #: The finding (in a notebook: positioned in its cell).
    diagnostic: Diagnostic
    #: What was published for it.
    lsp: types.Diagnostic
    #: (document URI, edits) pairs of its fix; a notebook's fix may change several cells.
    fix_edits: tuple[tuple[str, tuple[Edit, ...]], ...] = ()


@dataclass(frozen=True, slots=True)
class Published:
    """What was published for one text document or notebook cell, for code actions and hover."""

    #: The text the findings are positioned in.
    text: str
    #: Its version when it was linted (``None``: not known).
    version: int | None
    #: Each finding, with what was published for it.
    findings: tuple[Shown, ...]
    #: Codes whose fixes may be offered (``fixable`` less ``unfixable``).
    fixable: frozenset[str]
    #: The path linted and its settings, for "fix all" (``None``: a notebook cell).
    path: str | None = None
    settings: Settings | None = field(default=None, repr=False)


class AmpLintServer(LanguageServer):
    """The server's state: settings per folder, what was published, the pending lints."""

    def __init__(self, debounce: float = DEFAULT_DEBOUNCE_S) -> None:
        super().__init__(
            SOURCE,
            __version__,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
            notebook_document_sync=types.NotebookDocumentSyncOptions(
                notebook_selector=[
                    types.NotebookDocumentFilterWithCells(
                        notebook="jupyter-notebook",
                        cells=[types.NotebookCellLanguage(language="python")],
                    )
                ],
            ),
        )
        self.debounce = debounce
        #: Folder to the settings of the files in it (or the error that the config holds).
        self.settings: dict[str, tuple[Settings, frozenset[str]] | str] = {}
        #: Text document or cell URI to what was published for it.
        self.published: dict[str, Published] = {}
        #: Notebook URI to the URIs of its cells, as last published.
        self.notebook_cells: dict[str, tuple[str, ...]] = {}
        self.pending: dict[str, asyncio.TimerHandle] = {}
        #: URI to what "fix all" made of what was last published for it.
        self.fixed: dict[str, tuple[Published, str]] = {}

    # -- settings ------------------------------------------------------------------------------

    def settings_for(self, path: str) -> tuple[Settings, frozenset[str]] | None:
        """The settings of the nearest configured ``pyproject.toml`` above ``path`` and the codes
        whose fixes they allow; ``None`` (and the error shown once) when that file cannot be
        used, so nothing is reported until it is fixed."""
        folder = os.path.dirname(os.path.abspath(path))
        if folder not in self.settings:
            found: tuple[Settings, frozenset[str]] | str
            try:
                settings = load_settings(start=folder)
            except ConfigError as error:
                found = str(error)
            else:
                try:
                    found = (settings, fixable_codes(settings))
                except SelectorError as error:  # e.g. a selection that picks no rule
                    found = f"{settings.source}: {error}"
            if isinstance(found, str):
                self.say(f"amp-lint: {found}", types.MessageType.Error, show=True)
            else:
                for note in found[0].notes:
                    self.say(f"amp-lint: warning: {note}", types.MessageType.Warning)
            self.settings[folder] = found
        found = self.settings[folder]
        return None if isinstance(found, str) else found

    def reload_settings(self) -> None:
        """Forget every folder's settings and lint every open buffer again."""
        self.settings.clear()
        self.say(f"amp-lint: {CONFIG_NAME} changed; settings reloaded", types.MessageType.Info)
        self.lint_all()

    def say(self, message: str, kind: types.MessageType, *, show: bool = False) -> None:
        self.window_log_message(types.LogMessageParams(type=kind, message=message))
        if show:
            self.window_show_message(types.ShowMessageParams(type=kind, message=message))

    # -- linting -------------------------------------------------------------------------------

    def schedule(self, uri: str) -> None:
        """Lint ``uri`` once it has stayed unchanged for `debounce` seconds."""
        self.cancel(uri)
        loop = asyncio.get_running_loop()
        self.pending[uri] = loop.call_later(self.debounce, self.lint_uri, uri)

    def cancel(self, uri: str) -> None:
        handle = self.pending.pop(uri, None)
        if handle is not None:
            handle.cancel()

    def lint_all(self) -> None:
        for uri in list(self.workspace.text_documents):
            if self.workspace.get_notebook_document(cell_uri=uri) is None:
                self.lint_uri(uri)
        for uri in list(self.workspace.notebook_documents):
            self.lint_uri(uri)

    def lint_uri(self, uri: str) -> None:
        """Lint a text document or a notebook (given its URI or one of its cells')."""
        self.cancel(uri)
        notebook = self.workspace.get_notebook_document(notebook_uri=uri)
        if notebook is None:
            notebook = self.workspace.get_notebook_document(cell_uri=uri)
        if notebook is not None:
            self.lint_notebook(notebook)
        elif uri in self.workspace.text_documents:
            self.lint_text_document(uri)

    def lint_text_document(self, uri: str) -> None:
        document = self.workspace.get_text_document(uri)
        path = buffer_path(uri)
        if not (document.language_id == "python" or path.endswith(PYTHON_SUFFIXES)):
            return
        text = document.source
        settings, fixable = self.settings_for(path) or (None, frozenset[str]())
        found = [] if settings is None else self.lint(text, path, settings)
        lines = split_lines(text)
        findings = tuple(
            Shown(d, self.to_lsp(d, uri, lines, {}), ((uri, d.fix.edits),) if d.fix else ())
            for d in found
        )
        self.published[uri] = Published(text, document.version, findings, fixable, path, settings)
        self.publish(uri, document.version, findings)

    def lint_notebook(self, notebook: types.NotebookDocument) -> None:
        path = buffer_path(notebook.uri)
        if not path.endswith(NOTEBOOK_SUFFIX):
            path += NOTEBOOK_SUFFIX
        cells = [(cell, self.workspace.get_text_document(cell.document)) for cell in notebook.cells]
        texts = {cell.document: document.source for cell, document in cells}
        settings, fixable = self.settings_for(path) or (None, frozenset[str]())
        found = [] if settings is None else self.lint(as_ipynb(cells), path, settings)
        numbered = {number: cell.document for number, (cell, _) in enumerate(cells, start=1)}
        layout = CellLayout.of(cells)
        # Every cell gets its diagnostics, none included, so a fixed cell is cleared.
        by_cell: dict[str, list[Shown]] = {cell.document: [] for cell, _ in cells}
        for diagnostic in found:
            cell_uri = numbered[diagnostic.cell]
            lines = split_lines(texts[cell_uri])
            lsp = self.to_lsp(diagnostic, cell_uri, lines, numbered)
            edits = layout.split(cell_uri, diagnostic.fix.edits) if diagnostic.fix else ()
            by_cell[cell_uri].append(Shown(diagnostic, lsp, edits))
        stale = set(self.notebook_cells.get(notebook.uri, ())) - set(by_cell)
        for cell_uri in stale:
            self.published.pop(cell_uri, None)
            self.publish(cell_uri, None, ())
        for cell_uri, findings in by_cell.items():
            version = self.workspace.get_text_document(cell_uri).version
            self.published[cell_uri] = Published(texts[cell_uri], version, tuple(findings), fixable)
            self.publish(cell_uri, version, findings)
        self.notebook_cells[notebook.uri] = tuple(by_cell)

    def lint(self, text: str, path: str, settings: Settings) -> list[Diagnostic]:
        """The findings in ``text``; none (and a log line) when it cannot be linted."""
        try:
            return lint_source(text, path, settings=settings)
        except LintError as error:
            self.say(f"amp-lint: not linted: {error}", types.MessageType.Log)
        except Exception as error:  # a bug of ours: say it, and keep serving the other buffers
            reason = "".join(traceback.format_exception_only(error)).strip()
            self.say(f"amp-lint: failed on {path}: {reason}", types.MessageType.Error)
        return []

    def publish(self, uri: str, version: int | None, findings: Iterable[Shown]) -> None:
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(
                uri=uri, version=version, diagnostics=[shown.lsp for shown in findings]
            )
        )

    def to_lsp(
        self, diagnostic: Diagnostic, uri: str, lines: Sequence[str], cells: dict[int, str]
    ) -> types.Diagnostic:
        """The protocol's diagnostic; related sites in a notebook point at their own cell, those in
        another file at that file."""
        end = (diagnostic.end_line, diagnostic.end_column)
        if end < (diagnostic.line, diagnostic.column):
            end = (diagnostic.line, diagnostic.column)
        related = []
        for site in diagnostic.related:
            if site.path:  # another file of the project (named from this process's folder)
                site_uri = from_fs_path(os.path.abspath(site.path)) or uri
            else:
                site_uri = cells.get(site.cell, uri)
            site_lines = lines if site_uri == uri else self.lines_of(site_uri)
            where = self.to_range(site_lines, site.line, site.column, site.line, site.column)
            related.append(
                types.DiagnosticRelatedInformation(types.Location(site_uri, where), site.message)
            )
        return types.Diagnostic(
            range=self.to_range(lines, diagnostic.line, diagnostic.column, *end),
            message=diagnostic.message,
            severity=types.DiagnosticSeverity.Warning,
            code=diagnostic.code,
            source=SOURCE,
            related_information=related or None,
        )

    def lines_of(self, uri: str) -> list[str]:
        return split_lines(self.workspace.get_text_document(uri).source)

    def to_range(
        self, lines: Sequence[str], line: int, column: int, end_line: int, end_column: int
    ) -> types.Range:
        """A 1-based code-point span as the client counts (UTF-16 unless agreed otherwise)."""
        span = ServerTextRange(
            ServerTextPosition(line - 1, column - 1),
            ServerTextPosition(end_line - 1, end_column - 1),
        )
        return self.workspace.position_codec.range_to_client_units(lines, span)

    def to_text_edits(self, text: str, edits: Iterable[Edit]) -> list[types.TextEdit]:
        lines = split_lines(text)
        return [
            types.TextEdit(
                self.to_range(lines, e.line, e.column, e.end_line, e.end_column), e.content
            )
            for e in edits
        ]

    def current(self, uri: str) -> Published | None:
        """What was published for ``uri``, linted again first if the buffer changed since."""
        notebook = self.workspace.get_notebook_document(cell_uri=uri)
        linted = notebook.uri if notebook is not None else uri
        published = self.published.get(uri)
        if uri in self.workspace.text_documents:
            version = self.workspace.get_text_document(uri).version
            if published is None or published.version != version or linted in self.pending:
                self.lint_uri(linted)
                published = self.published.get(uri)
        return published

    # -- code actions and hover ----------------------------------------------------------------

    def code_actions(self, params: types.CodeActionParams) -> list[types.CodeAction]:
        uri = params.text_document.uri
        published = self.current(uri)
        if published is None:
            return []
        actions: list[types.CodeAction] = []
        for shown in published.findings:
            diagnostic, lsp = shown.diagnostic, shown.lsp
            if not _overlaps(lsp.range, params.range):
                continue
            fix = diagnostic.fix
            if fix is not None and shown.fix_edits and diagnostic.code in published.fixable:
                safe = fix.applicability == SAFE
                label = "" if safe else " (unsafe fix: it changes behaviour, review it)"
                actions.append(
                    types.CodeAction(
                        title=f"{diagnostic.code}: {fix.message}{label}",
                        kind=types.CodeActionKind.QuickFix,
                        diagnostics=[lsp],
                        is_preferred=safe,
                        edit=self.workspace_edit(shown.fix_edits),
                    )
                )
            noqa = noqa_edit(published.text, diagnostic.line, diagnostic.code)
            if noqa is not None:
                actions.append(
                    types.CodeAction(
                        title=f"Disable {diagnostic.code} for this line",
                        kind=types.CodeActionKind.QuickFix,
                        diagnostics=[lsp],
                        edit=self.workspace_edit(((uri, (noqa,)),), published.text),
                    )
                )
        fix_all = self.fix_all(uri, published)
        if fix_all is not None:
            actions.append(fix_all)
        only = params.context.only
        if only:
            actions = [a for a in actions if any(_kind_in(a.kind or "", k) for k in only)]
        return actions

    def fix_all(self, uri: str, published: Published) -> types.CodeAction | None:
        """ "Fix all safe": what ``amp-lint --fix`` would write, as edits of the changed lines."""
        if published.path is None or published.settings is None:
            return None
        if not any(
            d.fix is not None and d.fix.applicability == SAFE and d.code in published.fixable
            for d in (shown.diagnostic for shown in published.findings)
        ):
            return None
        # Editors ask for code actions at every cursor move: fix each published text once.
        if self.fixed.get(uri, (None, ""))[0] is not published:
            try:
                text = fix_source(published.text, published.path, settings=published.settings).text
            except LintError as error:
                self.say(f"amp-lint: cannot fix: {error}", types.MessageType.Log)
                text = published.text
            self.fixed[uri] = (published, text)
        fixed = self.fixed[uri][1]
        if fixed == published.text:
            return None
        edits = line_edits(published.text, fixed)
        return types.CodeAction(
            title="amp-lint: fix all safe fixes",
            kind=FIX_ALL_KIND,
            edit=self.workspace_edit(((uri, tuple(edits)),), published.text),
        )

    def workspace_edit(
        self, edits: Iterable[tuple[str, Sequence[Edit]]], text: str | None = None
    ) -> types.WorkspaceEdit:
        """Edits of one or more documents; ``text``: the one document's, else the workspace's."""
        return types.WorkspaceEdit(
            changes={
                uri: self.to_text_edits(
                    text if text is not None else self.workspace.get_text_document(uri).source,
                    changes,
                )
                for uri, changes in edits
            }
        )

    def hover(self, params: types.HoverParams) -> types.Hover | None:
        uri = params.text_document.uri
        published = self.current(uri)
        if published is None and uri in self.workspace.text_documents:
            text = self.workspace.get_text_document(uri).source
        elif published is not None:
            text = published.text
        else:
            return None
        lines = split_lines(text)
        here = self.workspace.position_codec.position_from_client_units(lines, params.position)
        line, column = here.line + 1, here.character + 1
        code = noqa_code_at(text, line, column)
        codes = [code] if code is not None else []
        for shown in published.findings if published is not None else ():
            if _contains(shown.lsp.range, params.position) and shown.diagnostic.code not in codes:
                codes.append(shown.diagnostic.code)
        known = [RULES[code] for code in codes if code in RULES]
        if not known:
            return None
        parts = [
            f"**{rule.code}** `{rule.name}`: {rule.summary}\n\n"
            f"Docs: `amp-lint --explain {rule.code}`, or the page "
            f"`reference/rules/{rule.code.lower()}` of the ampscale docs."
            for rule in known
        ]
        return types.Hover(
            contents=types.MarkupContent(
                kind=types.MarkupKind.Markdown, value="\n\n---\n\n".join(parts)
            )
        )


def buffer_path(uri: str) -> str:
    """The file a buffer's URI names (an unsaved buffer: its URI's last part, in no folder)."""
    path = to_fs_path(uri)
    return path if path is not None else uri.rsplit("/", 1)[-1] or uri


def _before(a: types.Position, b: types.Position) -> bool:
    return (a.line, a.character) <= (b.line, b.character)


def _overlaps(a: types.Range, b: types.Range) -> bool:
    return _before(a.start, b.end) and _before(b.start, a.end)


def _contains(span: types.Range, position: types.Position) -> bool:
    return _before(span.start, position) and _before(position, span.end)


def _kind_in(kind: str, wanted: str) -> bool:
    """Whether ``kind`` is ``wanted`` or one of its sub-kinds (``source.fixAll.amp-lint``).

    Kinds may be lsprotocol's `CodeActionKind`, a `str` enum: compared as strings, never
    through ``str()``, which gives the member's name.
    """
    kind, wanted = _value(kind), _value(wanted)
    return kind == wanted or kind.startswith(f"{wanted}.")


def _value(kind: str) -> str:
    return kind.value if isinstance(kind, enum.Enum) else kind


def build_server(debounce: float = DEFAULT_DEBOUNCE_S) -> AmpLintServer:
    """The server with every feature registered (not started)."""
    server = AmpLintServer(debounce)

    @server.feature(types.INITIALIZED)
    def initialized(ls: AmpLintServer, params: types.InitializedParams) -> None:
        watched = ls.client_capabilities.workspace
        watch = watched.did_change_watched_files if watched is not None else None
        if watch is not None and watch.dynamic_registration:
            options = types.DidChangeWatchedFilesRegistrationOptions(
                watchers=[types.FileSystemWatcher(glob_pattern=f"**/{CONFIG_NAME}")]
            )
            registration = types.Registration(
                id=f"{SOURCE}-config",
                method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                register_options=options,
            )
            ls.client_register_capability(types.RegistrationParams([registration]))

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: AmpLintServer, params: types.DidOpenTextDocumentParams) -> None:
        ls.lint_uri(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: AmpLintServer, params: types.DidChangeTextDocumentParams) -> None:
        ls.schedule(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: AmpLintServer, params: types.DidSaveTextDocumentParams) -> None:
        if buffer_path(params.text_document.uri).endswith(CONFIG_NAME):
            ls.reload_settings()
        else:
            # The other buffers' findings may read this file from disk; and the settings are
            # read again, for editors that do not watch pyproject.toml for the server.
            ls.settings.clear()
            ls.lint_all()

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: AmpLintServer, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        ls.cancel(uri)
        ls.fixed.pop(uri, None)
        if ls.published.pop(uri, None) is not None:
            ls.publish(uri, None, ())

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)
    def notebook_open(ls: AmpLintServer, params: types.DidOpenNotebookDocumentParams) -> None:
        ls.lint_uri(params.notebook_document.uri)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
    def notebook_change(ls: AmpLintServer, params: types.DidChangeNotebookDocumentParams) -> None:
        ls.schedule(params.notebook_document.uri)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_SAVE)
    def notebook_save(ls: AmpLintServer, params: types.DidSaveNotebookDocumentParams) -> None:
        ls.lint_uri(params.notebook_document.uri)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def notebook_close(ls: AmpLintServer, params: types.DidCloseNotebookDocumentParams) -> None:
        uri = params.notebook_document.uri
        ls.cancel(uri)
        for cell_uri in ls.notebook_cells.pop(uri, ()):
            ls.published.pop(cell_uri, None)
            ls.publish(cell_uri, None, ())

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def watched_files(ls: AmpLintServer, params: types.DidChangeWatchedFilesParams) -> None:
        if any(buffer_path(change.uri).endswith(CONFIG_NAME) for change in params.changes):
            ls.reload_settings()

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(
            code_action_kinds=[types.CodeActionKind.QuickFix, FIX_ALL_KIND],
            resolve_provider=False,
        ),
    )
    def code_action(ls: AmpLintServer, params: types.CodeActionParams) -> list[types.CodeAction]:
        return ls.code_actions(params)

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    def hover(ls: AmpLintServer, params: types.HoverParams) -> types.Hover | None:
        return ls.hover(params)

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: AmpLintServer, params: None) -> None:
        for uri in list(ls.pending):
            ls.cancel(uri)

    return server


def serve(debounce: float = DEFAULT_DEBOUNCE_S) -> int:
    """Run the server over standard input and output until the client says exit."""
    build_server(debounce).start_io()
    return 0
