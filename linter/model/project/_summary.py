"""Per-module summaries: what the rest of the project needs to know of one module, as plain data.

A summary is built from one parse of the module and holds no CST: its imports (as written, resolved
later against the project's files), the folders it adds to ``sys.path``, its classes and their
bases, and per function its local per-step reason, the calls it makes (each with whether the call
site runs every step, or runs whenever its function runs), and its source, so that a caller in
another module can bring the function's training-iteration events and returned values into its
own analysis. Summaries are JSON-serialisable and cached by the file's content (mypy's
incremental cache and Pysa's function summaries are the models).
"""

from __future__ import annotations

import hashlib
import json
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

import libcst as cst

from linter.model.project._value_records import ValueRecord
from linter.model.syntax import dotted_name

#: Bumped whenever the summary layout or what goes into it changes.
SUMMARY_FORMAT = 12

#: `ImportRecord.local` (and ``name``) of ``from module import *``: it binds no one name, but
#: every public name of the module (`ProjectIndex.resolve`).
STAR = "*"

#: Words whose presence in a function makes it worth grafting into a caller of another module:
#: training-iteration events (gradient reads among them), scale reads, dtype casts, checkpoint
#: saves and loads, scalers, autocasts, and the precision engines a helper builds (AMP014).
GRAFT_WORDS = (
    "backward",
    "step",
    "update",
    "unscale_",
    "clip_grad",
    "zero_grad",
    ".grad",
    "get_total_norm",
    "get_scale",
    "half",
    "float16",
    "bfloat16",
    "from_pretrained",
    "GradScaler",
    "autocast",
    "state_dict",
    "save",
    "deepspeed",
    "Accelerator",
)

#: The graft words an optimizer or scaler method names (``opt.step()``, ``scaler.update()``):
#: a function mentions them only when it calls that method, not when it counts steps
#: (``global_step``, ``steps_per_epoch``) or updates a dict's keys by another name.
METHOD_WORDS = ("step", "update")
_METHOD_WORDS = {word: re.compile(rf"\.[\s\\]*{word}\b") for word in METHOD_WORDS}


def graft_words(source: str) -> tuple[str, ...]:
    """Which of `GRAFT_WORDS` ``source`` mentions, ``step`` and ``update`` only as a method
    name (a function that merely counts steps is not worth grafting: none of its calls is an
    optimizer's or a scaler's step)."""
    return tuple(
        word
        for word in GRAFT_WORDS
        if word in source
        and (word not in _METHOD_WORDS or _METHOD_WORDS[word].search(source) is not None)
    )


#: Method names too common to follow through ``obj.name()`` calls; ``self.name()`` still counts.
GENERIC_METHOD_NAMES = frozenset(
    {
        "__init__",
        "__call__",
        "step",
        "update",
        "forward",
        "run",
        "get",
        "set",
        "reset",
        "close",
        "start",
        "stop",
        "save",
        "load",
        "log",
        "state_dict",
        "load_state_dict",
    }
)


@dataclass(frozen=True, slots=True)
class ImportRecord:
    """One name an import statement binds, as written."""

    #: The local name bound (``np`` of ``import numpy as np``; ``a`` of ``import a.b``; `STAR`
    #: for ``from a import *``, which binds the module's public names).
    local: str
    #: The module named (``a.b``; ``""`` for ``from . import x``).
    module: str
    #: The imported name of a ``from`` import, else None.
    name: str | None
    #: Leading dots of a relative import.
    level: int = 0


@dataclass(frozen=True, slots=True)
class CallRecord:
    """A call whose callee may be a function of another module."""

    #: The callee as written (``engine.train_one_epoch``, ``self.train_step``, ``helper``).
    callee: str
    line: int
    column: int
    #: Why this call site runs every training step, as a phrase (``inside the loop at line
    #: 40``), or None.
    reason: str | None
    #: True when the site runs whenever its function runs (no loop, guard or epoch loop in
    #: between), so its function's callers decide.
    open: bool
    #: Qualified name of the function holding the call (``Trainer.fit``), ``""`` at module level.
    caller: str
    #: The class around ``caller``, for ``self.`` calls.
    caller_class: str | None = None
    #: For ``x.m()`` / ``self.x.m()``: the callee of the one call whose result ``x`` holds
    #: (``Trainer`` of ``x = Trainer(cfg)``, or of ``self.x = Trainer(cfg)`` in the class), so the
    #: project can tell which class's ``m`` runs.
    receiver_type: str | None = None


@dataclass(frozen=True, slots=True)
class FunctionRecord:
    """One module-level function or method."""

    #: ``train_one_epoch`` or ``Trainer.train_step``.
    qualname: str
    line: int
    column: int
    #: Why the function runs every step from within its own module (a framework hook, a
    #: per-step caller of the same module), or None.
    reason: str | None
    #: The function's source, dedented (a caller elsewhere parses it to bring its events).
    source: str
    #: Which of `GRAFT_WORDS` the source mentions: what a caller may learn by grafting it.
    words: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ClassRecord:
    """One module-level class."""

    name: str
    #: Bases as written (``BaseTrainer``, ``engine.Trainer``).
    bases: tuple[str, ...]
    #: Method names it defines.
    methods: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ModuleSummary:
    """Everything other modules may ask of one module (see the module docstring)."""

    #: Absolute path of the file.
    path: str
    imports: tuple[ImportRecord, ...] = ()
    #: Literal folders passed to ``sys.path.insert``/``append`` (as written, relative to the file).
    sys_path: tuple[str, ...] = ()
    functions: tuple[FunctionRecord, ...] = ()
    classes: tuple[ClassRecord, ...] = ()
    calls: tuple[CallRecord, ...] = ()
    #: Module-level names bound exactly once, with the source of their value (short values
    #: only: ``AMP_DTYPE = torch.bfloat16``, ``PRECISION = "fp16"``).
    constants: tuple[tuple[str, str], ...] = ()
    #: Whether the module mentions any rule's trigger word (it was parsed for its own sake).
    has_amp: bool = False
    #: GradScalers, autocasts and precision engines other modules reach: its globals, its
    #: classes' ``self.`` attributes, its functions' returns
    #: (`linter.model.values._exported_values`).
    values: tuple[ValueRecord, ...] = ()
    #: For an outline (`linter.model.project._outline`), the sha256 of the content it was made
    #: from: its
    #: per-step reasons were left out, and the project computes them from that content when a
    #: query needs them. ``""`` for a full summary.
    deferred: str = ""
    #: The kinds of value (`linter.model.values._exported_values.possible_kinds`) an outline left
    #: out
    #: of `values` because its text may hold one: the project computes them as it computes the
    #: reasons, when a question wants one of those kinds. Empty when the outline knows there
    #: are none, and in a full summary.
    deferred_values: tuple[str, ...] = ()
    _functions: dict[str, FunctionRecord] = field(default_factory=dict, compare=False, repr=False)
    #: The summary as `text` writes it, while `keep_text` keeps it (a worker, for the trip back).
    _text: list[str] = field(default_factory=list, compare=False, repr=False)

    def __post_init__(self) -> None:
        self._functions.update({record.qualname: record for record in self.functions})

    def function(self, qualname: str) -> FunctionRecord | None:
        return self._functions.get(qualname)

    def class_named(self, name: str) -> ClassRecord | None:
        return next((c for c in self.classes if c.name == name), None)

    def to_json(self) -> dict[str, Any]:
        data = {name: _plain_field(getattr(self, name)) for name in _SUMMARY_FIELDS}
        data["format"] = SUMMARY_FORMAT
        return data

    def text(self) -> str:
        """The summary as canonical JSON (sorted keys, no spaces): what the store writes and
        `digest` hashes."""
        if self._text:
            return self._text[0]
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))

    def keep_text(self) -> None:
        """Make `text` now and keep it with the summary: a worker does, so that the process
        that stores and hashes every summary does not write them out again."""
        if not self._text:
            self._text.append(self.text())

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ModuleSummary:
        if data.get("format") != SUMMARY_FORMAT:
            raise ValueError("summary format")
        return cls(
            path=str(data["path"]),
            imports=tuple(ImportRecord(**item) for item in data["imports"]),
            sys_path=tuple(str(item) for item in data["sys_path"]),
            functions=tuple(
                FunctionRecord(**{**item, "words": tuple(item["words"])})
                for item in data["functions"]
            ),
            classes=tuple(
                ClassRecord(item["name"], tuple(item["bases"]), tuple(item["methods"]))
                for item in data["classes"]
            ),
            calls=tuple(CallRecord(**item) for item in data["calls"]),
            constants=tuple((str(name), str(text)) for name, text in data["constants"]),
            has_amp=bool(data["has_amp"]),
            values=tuple(ValueRecord(**item) for item in data["values"]),
            deferred=str(data["deferred"]),
            deferred_values=tuple(str(kind) for kind in data["deferred_values"]),
        )

    def release_text(self) -> None:
        """Forget the text `keep_text` kept: a project holds thousands of summaries for a
        whole run, and each needs its text only to be stored and hashed."""
        self._text.clear()

    def digest(self) -> str:
        """A hash of the summary's content: what a dependent's cached result is keyed by."""
        return hashlib.sha256(self.text().encode()).hexdigest()[:32]


#: The fields of each record type, in order, as `dataclasses.asdict` would read them.
_RECORD_FIELDS: dict[type, tuple[str, ...]] = {
    record: tuple(f.name for f in fields(record))
    for record in (ImportRecord, CallRecord, FunctionRecord, ClassRecord, ValueRecord)
}
#: ...and of a summary, less what it keeps for itself.
_SUMMARY_FIELDS = tuple(f.name for f in fields(ModuleSummary) if not f.name.startswith("_"))


#: Record type -> a getter of its fields' values, in `_RECORD_FIELDS` order.
_RECORD_VALUES: dict[type, Callable[[Any], tuple[Any, ...]]] = {
    record: operator.attrgetter(*names) for record, names in _RECORD_FIELDS.items()
}


def _plain_field(value: Any) -> Any:
    """A summary field as JSON data: what `dataclasses.asdict` gives, without its deep copies
    and recursion (serialising the sample's 3,246 summaries with it, in the main process, was
    about 14 s of a cold run's 100; a recursive walk of every value took 0.86 s where this
    takes 0.70 s for 1,500 of them, with the same text). Records hold no records, and `json`
    writes their tuples of text as it writes lists."""
    if not isinstance(value, tuple) or not value:
        return value
    names = _RECORD_FIELDS.get(type(value[0]))
    if names is None:
        return value
    return [dict(zip(names, _RECORD_VALUES[type(record)](record), strict=True)) for record in value]


def empty_summary(path: str) -> ModuleSummary:
    """The summary of a file that could not be read or parsed: it offers nothing."""
    return ModuleSummary(path)


def qualified_name(index: Any, function: cst.FunctionDef) -> str | None:
    """``f`` for a module-level function, ``C.m`` for a method of a module-level class; None
    for functions nested in functions (only their own module calls them)."""
    owner = None
    for ancestor in index.ancestors(function):
        if isinstance(ancestor, cst.FunctionDef | cst.Lambda):
            return None
        if isinstance(ancestor, cst.ClassDef):
            if owner is not None:
                return None
            owner = ancestor
    name = function.name.value
    return f"{owner.name.value}.{name}" if owner is not None else name


def constructed_receivers(index: Any) -> dict[tuple[cst.CSTNode | None, str], str | None]:
    """(scope, dotted target) -> the callee of the call assigned to it, when every assignment
    of it in that scope assigns a call of one callee (``None`` when they differ or one is not a
    call), or the class an annotated ``self.x: Class = ...`` declares. The scope is the
    function for plain names, the class for ``self.x``."""
    found: dict[tuple[cst.CSTNode | None, str], str | None] = {}
    for assign in index.nodes(cst.Assign):
        value = assign.value
        callee = dotted_name(value.func) if isinstance(value, cst.Call) else None
        for target in assign.targets:
            name = dotted_name(target.target)
            if name is None:
                continue
            if name.startswith("self."):
                scope: cst.CSTNode | None = index.enclosing_class(assign)
            else:
                scope = index.enclosing_function(assign)
            key = (scope, name)
            found[key] = callee if found.get(key, callee) == callee else None
    for statement in index.nodes(cst.AnnAssign):
        name = dotted_name(statement.target)
        declared = declared_class(dotted_name(statement.annotation.annotation))
        if name is not None and name.startswith("self.") and declared is not None:
            # `self.model: LanguageModel = model`: the class the attribute declares, whatever
            # is assigned (flair's trainers are handed their model).
            found[(index.enclosing_class(statement), name)] = declared
    return found


def declared_class(annotation: str | None) -> str | None:
    """``LanguageModel`` of ``self.model: LanguageModel = ...`` or of ``LanguageModel(...)``: a
    name spelled as a class (capitalised, perhaps dotted); None for anything else
    (``Optional[...]``, a string, a builtin, a lower-case builder that may return anything)."""
    if annotation is None or not annotation.rpartition(".")[2][:1].isupper():
        return None
    return annotation


def written_callee(call: cst.Call) -> str | None:
    """The callee as written (``engine.train_one_epoch``, ``self.train_step``, ``helper``); the
    method of an object built in place as ``Class().method`` (allennlp's
    ``MixedPrecisionBackwardCallback(path).on_backward(...)``); None for other shapes."""
    func = call.func
    if isinstance(func, cst.Attribute) and (built := _built_in_place(func.value)) is not None:
        return f"{built}().{func.attr.value}"
    return dotted_name(func)


def _built_in_place(node: cst.BaseExpression) -> str | None:
    """``Class`` of ``Class(...)``: a call of a capitalised name, as a constructor is spelled (a
    lower-case ``build_model(cfg)`` may return anything)."""
    if not isinstance(node, cst.Call):
        return None
    return declared_class(dotted_name(node.func))


def receiver_type(
    index: Any,
    constructed: dict[tuple[cst.CSTNode | None, str], str | None],
    call: cst.Call,
    function: cst.FunctionDef | None,
    cls: cst.ClassDef | None,
) -> str | None:
    func = call.func
    if not isinstance(func, cst.Attribute):
        return None
    return receiver_class(
        _built_in_place(func.value),
        dotted_name(func.value),
        constructed,
        function,
        cls,
        lambda name: annotated_class(function, name) if function is not None else None,
    )


def instance_type(
    constructed: dict[tuple[cst.CSTNode | None, str], str | None],
    call: cst.Call,
    function: cst.FunctionDef | None,
    cls: cst.ClassDef | None,
) -> str | None:
    """The class of the object ``call`` calls (``scaler(loss, optimizer)`` where ``scaler =
    NativeScaler()``), as `receiver_class` finds a method's receiver; None for a function."""
    name = dotted_name(call.func)
    if name is None or "." in name.removeprefix("self."):
        return None
    return receiver_class(None, name, constructed, function, cls, lambda _name: None)


#: A scope node of either parser's tree (a function, a class, or None for the module).
_Scope = TypeVar("_Scope")


def receiver_class(
    built: str | None,
    receiver: str | None,
    constructed: Mapping[tuple[_Scope, str], str | None],
    function: _Scope,
    cls: _Scope,
    annotated: Callable[[str], str | None],
) -> str | None:
    """The class of the object a method is called on (`CallRecord.receiver_type`), whichever
    parser's tree the facts come from: ``built`` for ``Class(...).m()``; for ``self.x.m()`` what
    the class (``cls``) assigns to ``self.x``; for ``x.m()`` what ``function`` assigns to
    ``x``, else the class ``annotated(x)`` gives its parameter; None otherwise."""
    if built is not None:
        return built
    if receiver is None or receiver in ("self", "cls"):
        return None
    if receiver.startswith("self.") and receiver.count(".") == 1:
        return constructed.get((cls, receiver))
    if "." not in receiver:
        if (function, receiver) in constructed:
            return constructed[(function, receiver)]
        return annotated(receiver)
    return None


def annotated_class(function: cst.FunctionDef, name: str) -> str | None:
    """The class a parameter ``name`` of ``function`` is annotated with (``trainer: Trainer``,
    ``trainer: "Trainer"``), for a function that never assigns it: a caller may pass a subclass,
    whose method overrides are the project's to find, as for a constructed receiver."""
    params = function.params
    for param in (*params.posonly_params, *params.params, *params.kwonly_params):
        if param.name.value != name:
            continue
        if param.annotation is None:
            return None
        annotation = param.annotation.annotation
        if isinstance(annotation, cst.SimpleString):
            text = annotation.evaluated_value
            return text if isinstance(text, str) and DOTTED.fullmatch(text) else None
        return dotted_name(annotation)
    return None


#: A dotted name in a string annotation (``"models.Trainer"``).
DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")


#: Longest value source kept for a module-level constant.
CONSTANT_CHARS = 200
