"""Outlines: a module's summary from CPython's parser, libcst's analyses left for later.

Other modules ask of most summarised modules only their names: imports, classes and their
bases, functions and their sources, the calls they make. CPython's ``ast`` gives those at a
fifth of libcst's parse time. Two things need libcst's analyses: whether a function or a call
site runs every step (`linter.model.steps._per_step`) and the AMP values a module exports
(`linter.model.values._exported_values`). An outline leaves them out and names the content it was
made
from (`ModuleSummary.deferred`); the project makes the full summary of that content the first
time a question needs one (`Project.call_reason`, `Project.function_reason`,
`Project.values_of`), and keeps it in the summary store. Values are left out only when the
module's text may hold one (`outline_fits`); otherwise the outline knows there are none.

An outline holds exactly what `linter.model.project._summary.summarize` gives the same file, less
those
reasons and values (``tests/linter/model/test_outline.py`` checks it on every fixture); a file
CPython's parser rejects gets the full summary.
"""

from __future__ import annotations

import ast
import io
import re
import textwrap
import tokenize
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import cast

from linter.model.project._script_paths import anchored_folder, single_bindings
from linter.model.project._summary import (
    CONSTANT_CHARS,
    DOTTED,
    STAR,
    CallRecord,
    ClassRecord,
    FunctionRecord,
    ImportRecord,
    ModuleSummary,
    declared_class,
    graft_words,
    receiver_class,
)
from linter.model.project._value_records import possible_kinds
from linter.model.syntax import column_of

__all__ = ["outline", "outline_fits", "sys_path_folders"]

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)

#: Fields that hold no call, definition or assignment (a load/store context, an operator), and
#: node type -> its other fields: the walk reads only those.
_NO_CODE_FIELDS = frozenset({"ctx", "op", "ops"})
_CHILD_FIELDS: dict[type[ast.AST], tuple[str, ...]] = {}

#: A line end as CPython's tokenizer counts them (not `str.splitlines`' form feeds and others).
_LINE_END = re.compile(r"\r\n|\r|\n")


def outline_fits(text: str) -> bool:
    """Whether ``text`` surely exports no AMP value: its outline says so (no value to defer)."""
    return not possible_kinds(text)


def outline(path: str, text: str, digest: str, *, has_amp: bool = False) -> ModuleSummary | None:
    """The outline of ``text`` (the file at ``path`` whose bytes have sha256 ``digest``), or None
    when CPython's parser rejects it (the full summary decides then)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    walked = _Walk(text)
    walked.visit(tree)
    return ModuleSummary(
        path=path,
        imports=tuple(_imports(walked)),
        sys_path=tuple(_sys_path_inserts(walked)),
        functions=tuple(_functions(walked)),
        classes=tuple(_classes(walked)),
        calls=tuple(_calls(walked)),
        constants=tuple(_constants(walked)),
        has_amp=has_amp,
        deferred=digest,
        deferred_values=possible_kinds(text),
    )


@dataclass(frozen=True, slots=True)
class _Place:
    """Where a node sits, as the libcst summary's ancestor questions see it."""

    #: The nearest function around it (lambdas are transparent).
    function: ast.FunctionDef | ast.AsyncFunctionDef | None = None
    #: Whether a function or a lambda is around it.
    nested: bool = False
    #: How many classes are around it, and the outermost.
    classes: int = 0
    outermost: ast.ClassDef | None = None
    #: The nearest class or function around it.
    nearest: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef | None = None


@dataclass(slots=True)
class _Walk:
    """One pass over the tree recording the nodes a summary reads, each with its place."""

    text: str
    lines: list[str] = field(default_factory=list)
    calls: list[tuple[ast.Call, _Place]] = field(default_factory=list)
    functions: list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, _Place]] = field(
        default_factory=list
    )
    classes: list[tuple[ast.ClassDef, _Place]] = field(default_factory=list)
    assigns: list[tuple[ast.Assign, _Place]] = field(default_factory=list)
    #: ``self.x: Class = ...`` statements: the class an attribute declares.
    annotated: list[tuple[ast.AnnAssign, _Place]] = field(default_factory=list)
    imports: list[ast.Import] = field(default_factory=list)
    from_imports: list[ast.ImportFrom] = field(default_factory=list)
    #: function -> its qualified name (None for a nested function).
    qualnames: dict[ast.AST, str | None] = field(default_factory=dict)
    #: function -> the class whose body holds it directly, if any.
    owners: dict[ast.AST, ast.ClassDef | None] = field(default_factory=dict)
    #: Module-level assignments (statements of the module's own body).
    top: set[ast.Assign] = field(default_factory=set)
    #: Where each line starts in the text, as CPython counts lines (made when first needed).
    starts: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        # Split as `linter.model.syntax._line_numbers` splits: the sources match the libcst
        # summary's.
        self.lines = self.text.splitlines()

    def visit(self, tree: ast.Module) -> None:
        self.top = {s for s in tree.body if isinstance(s, ast.Assign)}
        stack: list[tuple[ast.AST, _Place]] = [(tree, _Place())]
        while stack:
            node, place = stack.pop()
            below = place
            kind = type(node)
            if kind is ast.Call:
                self.calls.append((node, place))  # type: ignore[arg-type]  # by its type
            elif kind in _FUNCTIONS:
                function = cast("ast.FunctionDef | ast.AsyncFunctionDef", node)
                self.functions.append((function, place))
                self.qualnames[node] = _qualname(function, place)
                nearest = place.nearest
                self.owners[node] = nearest if isinstance(nearest, ast.ClassDef) else None
                below = _Place(function, True, place.classes, place.outermost, function)
            elif kind is ast.ClassDef:
                cls = cast("ast.ClassDef", node)
                self.classes.append((cls, place))
                outermost = place.outermost or cls
                below = _Place(place.function, place.nested, place.classes + 1, outermost, cls)
            elif kind is ast.Lambda:
                below = _Place(place.function, True, place.classes, place.outermost, place.nearest)
            elif kind is ast.Assign:
                self.assigns.append((node, place))  # type: ignore[arg-type]  # by its type
            elif kind is ast.AnnAssign:
                self.annotated.append((node, place))  # type: ignore[arg-type]  # by its type
            elif kind is ast.Import:
                self.imports.append(node)  # type: ignore[arg-type]  # by its type
                continue  # its aliases hold nothing a summary reads
            elif kind is ast.ImportFrom:
                self.from_imports.append(node)  # type: ignore[arg-type]  # by its type
                continue
            fields = _CHILD_FIELDS.get(kind)
            if fields is None:
                fields = _CHILD_FIELDS[kind] = tuple(
                    name for name in kind._fields if name not in _NO_CODE_FIELDS
                )
            for name in fields:
                value = getattr(node, name, None)
                if type(value) is list:
                    stack.extend((item, below) for item in value if isinstance(item, ast.AST))
                elif isinstance(value, ast.AST):
                    stack.append((value, below))
        for found in (self.calls, self.functions, self.classes, self.assigns):
            found.sort(key=lambda item: _start(item[0]))
        self.imports.sort(key=_start)
        self.from_imports.sort(key=_start)

    def position(self, node: ast.stmt | ast.expr) -> tuple[int, int]:
        return node.lineno, column_of(self.lines, node.lineno, node.col_offset) + 1

    def segment(self, start: tuple[int, int], end: tuple[int, int]) -> str:
        """The text from ``start`` to ``end`` (1-based lines and CPython's byte offsets), line
        ends as written (``\\r\\n`` stays)."""
        return self.text[self.offset(*start) : self.offset(*end)]

    def offset(self, line: int, byte: int) -> int:
        """The index in the text of a CPython position."""
        if not self.starts:
            self.starts = [0] + [m.end() for m in _LINE_END.finditer(self.text)]
        if line - 1 >= len(self.starts):
            return len(self.text)
        begin = self.starts[line - 1]
        if self.text[begin : begin + byte].isascii():
            return begin + byte
        stop = self.starts[line] if line < len(self.starts) else len(self.text)
        return begin + len(self.text[begin:stop].encode()[:byte].decode(errors="ignore"))


def _start(node: ast.AST) -> tuple[int, int, int, int]:
    """libcst's pre-order: by start, the outer (longer) node first."""
    return (
        getattr(node, "lineno", 0),
        getattr(node, "col_offset", 0),
        -(getattr(node, "end_lineno", 0) or 0),
        -(getattr(node, "end_col_offset", 0) or 0),
    )


def _qualname(function: ast.FunctionDef | ast.AsyncFunctionDef, place: _Place) -> str | None:
    """As `linter.model.project._summary.qualified_name`: ``f``, ``C.m``, or None when nested."""
    if place.nested or place.classes > 1:
        return None
    return f"{place.outermost.name}.{function.name}" if place.outermost else function.name


def _dotted(node: ast.AST) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _one_string(walked: _Walk, node: ast.expr) -> str | None:
    """The value of a single plain string literal (libcst's ``SimpleString``): not an f-string,
    bytes, or literals joined by juxtaposition."""
    if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
        return None
    end = (node.end_lineno or node.lineno, node.end_col_offset or 0)
    source = walked.segment((node.lineno, node.col_offset), end)
    try:
        tokens = [
            t
            for t in tokenize.generate_tokens(io.StringIO(source).readline)
            if t.type not in (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER)
        ]
    except (tokenize.TokenError, SyntaxError):
        return None
    return node.value if len(tokens) == 1 and tokens[0].type == tokenize.STRING else None


def _imports(walked: _Walk) -> Iterator[ImportRecord]:
    for statement in walked.imports:
        for alias in statement.names:
            full = alias.name
            if alias.asname is not None:
                yield ImportRecord(alias.asname, full, None)
            else:
                yield ImportRecord(full.partition(".")[0], full.partition(".")[0], None)
                if "." in full:
                    yield ImportRecord(full, full, None)
    for relative in walked.from_imports:
        if any(alias.name == "*" for alias in relative.names):
            yield ImportRecord(STAR, relative.module or "", STAR, relative.level)
            continue
        for alias in relative.names:
            bound = alias.asname or alias.name
            yield ImportRecord(bound, relative.module or "", alias.name, relative.level)


def sys_path_folders(text: str) -> tuple[str, ...]:
    """The folders the module ``text`` adds to ``sys.path`` (`ModuleSummary.sys_path`), or
    none when CPython's parser rejects it: what the libcst summary records, and the evidence
    of a script's project root (`linter.model.project._roots`)."""
    if "sys" not in text or "path" not in text:
        return ()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ()
    walked = _Walk(text)
    walked.visit(tree)
    return tuple(_sys_path_inserts(walked))


def _sys_path_inserts(walked: _Walk) -> Iterator[str]:
    """``sys.path.insert(0, "lib")``, ``sys.path.append(ROOT_DIR)``...: a plain string literal
    as written, or a folder built from ``__file__``, relative to the module's folder
    (`linter.model.project._script_paths`); inserts first, then appends, in source order."""
    bindings: dict[str, ast.expr] | None = None
    for method in ("insert", "append"):
        for call, _place in walked.calls:
            func = call.func
            if not (isinstance(func, ast.Attribute) and func.attr == method):
                continue
            if _dotted(func.value) != "sys.path" or not (call.args or call.keywords):
                continue
            last = _last_argument(call)
            if last is None:
                continue
            value = _one_string(walked, last)
            if value is None and not isinstance(last, ast.Constant):
                if bindings is None:
                    bindings = single_bindings([assign for assign, _place in walked.assigns])
                value = anchored_folder(last, bindings)
            if value is not None:
                yield value


def _last_argument(call: ast.Call) -> ast.expr | None:
    """The value of the call's last argument in source order (libcst's ``args[-1]``)."""
    values = [arg.value if isinstance(arg, ast.Starred) else arg for arg in call.args] + [
        keyword.value for keyword in call.keywords
    ]
    return max(values, key=_start) if values else None


def _functions(walked: _Walk) -> Iterator[FunctionRecord]:
    for function, _place in walked.functions:
        qualname = walked.qualnames[function]
        if qualname is None:
            continue
        line, column = walked.position(function)
        end = function.end_lineno or function.lineno
        source = textwrap.dedent("\n".join(walked.lines[line - 1 : end])) + "\n"
        yield FunctionRecord(qualname, line, column, None, source, graft_words(source))


def _classes(walked: _Walk) -> Iterator[ClassRecord]:
    for cls, place in walked.classes:
        if place.nearest is not None:
            continue
        bases = tuple(
            name
            for base in cls.bases
            if (name := _dotted(base.value if isinstance(base, ast.Starred) else base))
        )
        methods = tuple(s.name for s in cls.body if isinstance(s, _FUNCTIONS))
        yield ClassRecord(cls.name, bases, methods)


def _calls(walked: _Walk) -> Iterator[CallRecord]:
    constructed = _constructed(walked)
    for call, place in walked.calls:
        callee = _written_callee(call)
        if callee is None:
            continue
        function = place.function
        caller = walked.qualnames[function] if function is not None else ""
        if caller is None:
            continue
        cls = _enclosing_class(walked, place)
        line, column = walked.position(call)
        yield CallRecord(
            callee,
            line,
            column,
            None,
            False,
            caller,
            cls.name if cls is not None else None,
            _receiver_type(walked, constructed, call, function, cls),
        )


def _enclosing_class(walked: _Walk, place: _Place) -> ast.ClassDef | None:
    """The class whose body directly holds the function around the node."""
    function = place.function
    if function is None:
        return None
    return walked.owners.get(function)


def _written_callee(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Attribute) and (built := _built_in_place(func.value)) is not None:
        return f"{built}().{func.attr}"
    return _dotted(func)


def _built_in_place(node: ast.AST) -> str | None:
    if not isinstance(node, ast.Call):
        return None
    return declared_class(_dotted(node.func))


_Scope = ast.AST | None


def _constructed(walked: _Walk) -> dict[tuple[_Scope, str], str | None]:
    """As `linter.model.project._summary.constructed_receivers`."""
    found: dict[tuple[_Scope, str], str | None] = {}
    for assign, place in walked.assigns:
        value = assign.value
        callee = _dotted(value.func) if isinstance(value, ast.Call) else None
        for target in assign.targets:
            name = _dotted(target)
            if name is None:
                continue
            # `self.x` belongs to the class, other names to the function they are bound in.
            self_attribute = name.startswith("self.")
            scope = _enclosing_class(walked, place) if self_attribute else place.function
            key: tuple[_Scope, str] = (scope, name)
            found[key] = callee if found.get(key, callee) == callee else None
    for statement, place in walked.annotated:
        name = _dotted(statement.target)
        declared = declared_class(_dotted(statement.annotation))
        if name is not None and name.startswith("self.") and declared is not None:
            found[(_enclosing_class(walked, place), name)] = declared
    return found


def _receiver_type(
    walked: _Walk,
    constructed: dict[tuple[_Scope, str], str | None],
    call: ast.Call,
    function: ast.FunctionDef | ast.AsyncFunctionDef | None,
    cls: ast.ClassDef | None,
) -> str | None:
    func = call.func
    if not isinstance(func, ast.Attribute):
        return None
    return receiver_class(
        _built_in_place(func.value),
        _dotted(func.value),
        constructed,
        function,
        cls,
        lambda name: _annotated_class(walked, function, name) if function is not None else None,
    )


def _annotated_class(
    walked: _Walk, function: ast.FunctionDef | ast.AsyncFunctionDef, name: str
) -> str | None:
    args = function.args
    for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs):
        if arg.arg != name:
            continue
        annotation = arg.annotation
        if annotation is None:
            return None
        if isinstance(annotation, ast.Constant):
            text = _one_string(walked, annotation)
            return text if text is not None and DOTTED.fullmatch(text) else None
        return _dotted(annotation)
    return None


def _constants(walked: _Walk) -> Iterator[tuple[str, str]]:
    counts: dict[str, int] = {}
    values: dict[str, str] = {}
    for assign, _place in walked.assigns:
        module_level = assign in walked.top
        for target in assign.targets:
            if not isinstance(target, ast.Name):
                continue
            counts[target.id] = counts.get(target.id, 0) + 1
            if module_level:
                values[target.id] = _value_text(walked, assign)
    for name, text in values.items():
        if counts[name] == 1 and len(text) <= CONSTANT_CHARS:
            yield name, text


def _value_text(walked: _Walk, assign: ast.Assign) -> str:
    """The assigned value's source with its own parentheses (libcst's node includes them):
    from the ``=`` after the last target to the statement's end."""
    last = assign.targets[-1]
    start = (last.end_lineno or last.lineno, last.end_col_offset or 0)
    end = (assign.end_lineno or assign.lineno, assign.end_col_offset or 0)
    rest = walked.segment(start, end)
    _before, _equals, value = rest.partition("=")
    return value.lstrip(" \t\r\n\f\\").rstrip()
