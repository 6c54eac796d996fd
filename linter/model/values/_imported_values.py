"""What the module being linted reaches of other modules' AMP values, through the project.

``from utils import scaler``, ``from .amp import autocast_ctx as ctx``, ``self.scaler`` in a
subclass of a class of another module, ``opt, scaler = init_opt(...)``: each is answered by the
project's import resolution and class hierarchy from the other module's summary
(`linter.model.project._value_records`), never by reading the other file. The lowest room of the
values layer: the analyses of scalers, autocasts and engines ask it, and it asks only the project.
"""

from __future__ import annotations

import os

import libcst as cst

from linter.model.project import AUTOCAST, AUTOCAST_FACTORY, VALUE_KINDS, ValueRecord, context_of
from linter.model.syntax import ModuleIndex, dotted_name


class ImportedValues:
    """What the module being linted reaches of other modules' values (see the module
    docstring); empty when it is linted without its project."""

    def __init__(self, index: ModuleIndex) -> None:
        self._index = index
        context = context_of(index)
        self._project = context.project if context is not None else None
        self._path = os.path.abspath(context.path) if context is not None else ""
        self._bases: dict[cst.ClassDef, list[tuple[str, str]]] = {}

    def of_name(
        self, name: str, kinds: frozenset[str] = VALUE_KINDS
    ) -> tuple[ValueRecord, str] | None:
        """The value of one of ``kinds`` a name imported from another module holds (``scaler``
        of ``from utils import scaler``, ``utils.scaler``), with that module's display path.
        Every question names the kinds it wants: a module whose text holds none of them is
        not asked for its values (see `possible_kinds`)."""
        project = self._project
        if project is None or name.startswith("self."):
            return None
        found = project.resolve(self._path, name)
        if not (isinstance(found, tuple) and len(found) == 4 and found[0] == "constant"):
            return None
        if found[1] == self._path:
            return None
        return self._record(found[1], found[2], kinds)

    def of_attribute(
        self, name: str, at: cst.CSTNode, kinds: frozenset[str] = VALUE_KINDS
    ) -> tuple[ValueRecord, str] | None:
        """The value of one of ``kinds`` ``self.x`` holds in the class around ``at`` when a
        base class of another module binds it (and this class does not)."""
        project = self._project
        cls = self._index.enclosing_class(at)
        if project is None or cls is None or not name.startswith("self.") or name.count(".") > 1:
            return None
        if self._binds(cls, name):
            return None  # the class sets it itself: its own binding decides
        if cls not in self._bases:
            self._bases[cls] = project.bases(self._path, cls.name.value)
        for path, base in self._bases[cls]:
            if path == self._path:
                continue
            found = self._record(path, f"{base}.{name}", kinds)
            if found is not None:
                return found
        return None

    def inherited(
        self, cls: cst.ClassDef, kinds: frozenset[str] = VALUE_KINDS
    ) -> list[tuple[ValueRecord, str]]:
        """The ``self.`` values of one of ``kinds`` base classes of other modules bind for
        ``cls`` (nearest base first), those ``cls`` does not bind itself."""
        project = self._project
        if project is None:
            return []
        if cls not in self._bases:
            self._bases[cls] = project.bases(self._path, cls.name.value)
        found = []
        for path, base in self._bases[cls]:
            for record in project.values_of(path, kinds) if path != self._path else ():
                owner, _, attribute = record.holder.partition(".self.")
                if record.kind not in kinds or owner != base or not attribute:
                    continue
                if not self._binds(cls, f"self.{attribute}"):
                    found.append((record, project.display(path)))
        return found

    def _binds(self, cls: cst.ClassDef, name: str) -> bool:
        return any(
            self._index.enclosing_class(assign) is cls
            and any(dotted_name(t.target) == name for t in assign.targets)
            for assign in self._index.nodes(cst.Assign)
        )

    def of_call(
        self, call: cst.Call, place: int | None = None, kinds: frozenset[str] = VALUE_KINDS
    ) -> tuple[ValueRecord, str] | None:
        """The value of one of ``kinds`` a call of a function of another module returns
        (``build_engine(...)``), or returns at ``place`` of a tuple (``opt, scaler =
        init_opt(...)``: place 1)."""
        project = self._project
        name = dotted_name(call.func)
        if project is None or name is None or name.startswith("self."):
            return None
        found = project.resolve(self._path, name)
        qualname = getattr(found, "qualname", None)
        path = getattr(found, "path", None)
        if qualname is None or path is None or path == self._path:
            return None
        holder = f"{qualname}()" + ("" if place is None else f"[{place}]")
        return self._record(path, holder, kinds)

    def _record(
        self, path: str, holder: str, kinds: frozenset[str]
    ) -> tuple[ValueRecord, str] | None:
        assert self._project is not None
        record = next(
            (
                r
                for r in self._project.values_of(path, kinds)
                if r.holder == holder and r.kind in kinds
            ),
            None,
        )
        return (record, self._project.display(path)) if record is not None else None


def imported_values(index: ModuleIndex) -> ImportedValues:
    """The module's `ImportedValues`, built once and shared by every rule that asks."""
    return index.shared(ImportedValues, lambda: ImportedValues(index))


def imported_autocast(
    index: ModuleIndex, entered: cst.BaseExpression, at: cst.CSTNode
) -> tuple[ValueRecord, str] | None:
    """The autocast of another module that ``with <entered>:`` (at ``at``) enters: ``with
    ctx:`` on an imported (or inherited ``self.``) autocast context, ``with amp():`` on a
    factory."""
    called = isinstance(entered, cst.Call)
    if isinstance(entered, cst.Call):
        if entered.args:
            return None
        entered = entered.func
    name = dotted_name(entered)
    context = context_of(index)
    if name is None or context is None or context.project is None:
        return None
    values = imported_values(index)
    kinds = frozenset({AUTOCAST_FACTORY if called else AUTOCAST})
    if name.startswith("self."):
        return values.of_attribute(name, at, kinds)
    return values.of_name(name, kinds)
