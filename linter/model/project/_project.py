"""The project: every module's summary, joined by resolved imports, calls and class bases.

Rules never walk another file's tree. When an analysis of the module being linted reaches the edge
of what the module shows, it asks the project:

- *Is this function run every training step?* `Project.per_step_reason` follows the call sites of
  the function across modules (a ``train_one_epoch`` whose loop is in ``main.py``; a subclass's
  ``train_step`` that a base class's loop calls through ``self``), as far as the shared depth
  limit.
- *What does this call run?* `Project.graft` parses the called function of another module from its
  summary and hangs it under the call, so the iteration, dtype and scaler analyses read its events
  and returns as they read a function of the same module; positions inside it map to the call
  site, and findings name the other file as a related location. A method called on an object
  whose class nothing states has candidates (`linter.model.project._candidates`): it is grafted
  when they agree.

Every answer is recorded: `used` lists the summaries a lint consulted, which key its cached
result. Unknown stays unknown: an unresolvable import, candidates that disagree or a call into a
library gives no answer, never a guess.
"""

from __future__ import annotations

import builtins
import os
import pickle
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial

import libcst as cst

from linter._parse import parse_module, parse_module_anew
from linter.model.project._call_graph import CallGraph
from linter.model.project._candidates import (
    Candidate,
    ClassRef,
    agreeing_effects,
    arity_fits,
    classes_built,
    read_candidate,
    stored_parameter,
)
from linter.model.project._module_context import (
    ForeignSite,
    FunctionRef,
    ModuleContext,
    positions_of,
)
from linter.model.project._summary import (
    GRAFT_WORDS,
    CallRecord,
    FunctionRecord,
    constructed_receivers,
    declared_class,
    instance_type,
    qualified_name,
    receiver_type,
    written_callee,
)
from linter.model.syntax import (
    argument_for,
    call_lines,
    descendants,
    module_index,
    parameter_position,
    walk,
)

#: Trees kept per grafted function: the call sites of one function in one file, past which a
#: file's further sites are parsed and dropped (memory, not speed, sets it).
_GRAFT_COPIES = 8


@dataclass(slots=True)
class _GraftedTrees:
    """The trees grafting parses, kept for the next call site and the next file linted."""

    #: (path, qualname) -> the function parsed from its summary's source (None: unparsable).
    parsed: dict[tuple[str, str], cst.Module | None] = field(default_factory=dict)
    #: (path, qualname) -> trees of a grafted function, one per call site of one file.
    grafted: dict[tuple[str, str], list[cst.Module]] = field(default_factory=dict)
    #: (path, qualname) -> the first of those trees, pickled (see `Project._copy_of`).
    pickled: dict[tuple[str, str], bytes] = field(default_factory=dict)
    #: (path, qualname) of a caller -> its calls by (line, callee).
    calls_by_line: dict[tuple[str, str], dict[tuple[int, str], cst.Call]] = field(
        default_factory=dict
    )
    #: (path, qualname) -> the parsed caller's function and its code nodes.
    caller_nodes: dict[tuple[str, str], tuple[cst.CSTNode, ...]] = field(default_factory=dict)
    #: (path, qualname) -> the function as a candidate of a call on an object of unknown
    #: class (`linter.model.project._candidates.read_candidate`), None when unreadable.
    candidates: dict[tuple[str, str], Candidate | None] = field(default_factory=dict)
    #: (path, qualname, parameter) -> the classes its callers pass (`Project.passed_classes`), and
    #: the summaries that answer read.
    passed: dict[tuple[str, str, str], tuple[frozenset[ClassRef] | None, frozenset[str]]] = field(
        default_factory=dict
    )


#: The functions of other modules a call may run, as (path, qualified name), and whether they
#: are the candidates of a receiver of unknown class (`Project._graft_targets`).
GraftTargets = tuple[tuple[tuple[str, str], ...], bool]

#: One call of a function in a function of another module: the caller's path, record, parsed
#: tree and code nodes, and the call (None where the parse does not find it).
_CallerCall = tuple[str, FunctionRecord, cst.Module, tuple[cst.CSTNode, ...], cst.Call | None]


class Project(CallGraph):
    """The summaries of a project's modules and the questions rules ask across them: resolution
    and outlines (`ProjectIndex`), calls (`CallGraph`), and the functions of other modules
    grafted under a linted module's calls."""

    #: What grafting keeps between questions (made on the first graft).
    _kept_trees: _GraftedTrees | None = None

    @property
    def _trees(self) -> _GraftedTrees:
        if self._kept_trees is None:
            self._kept_trees = _GraftedTrees()
        return self._kept_trees

    def calls_from_other_modules(
        self, context: ModuleContext, function: cst.FunctionDef, via: cst.CSTNode
    ) -> list[cst.Call]:
        """The calls of ``function`` (of the module being linted) in functions of other
        modules, each parsed from its caller's summary and attached to ``context`` under
        ``via`` (the parameter asked about), so an analysis reads what they pass to it as it
        reads a local call's arguments. Calls at a module's top level are not summarised."""
        found = []
        for caller_path, caller, parsed, nodes, call in self._calls_elsewhere(context, function):
            if call is None:
                continue
            site = ForeignSite(via, self.display(caller_path), caller.qualname, caller.line, parsed)
            context.attach(nodes[0], via, site, nodes)
            found.append(call)
        return found

    def _calls_elsewhere(
        self, context: ModuleContext, function: cst.FunctionDef
    ) -> Iterator[_CallerCall]:
        """Each summarised call of ``function`` in a function of another module: the caller's
        path, record, parsed tree and code nodes, and the call (None where the parse does not
        find it)."""
        index = module_index(context)
        qualname = qualified_name(index, function)
        path = os.path.abspath(context.path)
        if qualname is None or path not in self.summaries:
            return
        for caller_path, record in self.callers(FunctionRef(path, qualname)):
            summary = self.summary(caller_path)
            caller = summary.function(record.caller) if summary and record.caller else None
            if caller_path == path or caller is None:
                continue
            parsed = self._parsed_function(caller_path, caller.qualname, caller.source)
            if parsed is None:
                continue
            nodes = self._trees.caller_nodes.get(key := (caller_path, caller.qualname))
            if nodes is None:
                root = next(s for s in parsed.body if isinstance(s, cst.FunctionDef))
                # Walked once per run: each parameter asked about attaches the same caller
                # again (26k attaches of 1,100 callers over 95 real repositories).
                nodes = self._trees.caller_nodes[key] = (root, *descendants(root))
            calls = self._trees.calls_by_line.get(key)
            if calls is None:
                calls = self._trees.calls_by_line[key] = _calls_by_line(
                    parsed, caller.source, nodes
                )
            call = calls.get((record.line - caller.line + 1, record.callee))
            yield caller_path, caller, parsed, nodes, call

    def passed_class(
        self, context: ModuleContext, function: cst.FunctionDef, name: str
    ) -> tuple[str, str] | None:
        """The project class of the object every caller of ``function`` passes as its
        parameter ``name`` (``train_one_epoch(..., loss_scaler, ...)`` where each caller, in
        another module, built ``loss_scaler = NativeScaler()``), as (path, class); None when
        callers pass objects of different classes, or of no project class (see
        `passed_classes`)."""
        classes = self.passed_classes(context, function, name)
        if classes is None or len(classes) != 1:
            return None
        found = next(iter(classes))
        return found if found[0] else None

    def passed_classes(
        self, context: ModuleContext, function: cst.FunctionDef, name: str
    ) -> frozenset[ClassRef] | None:
        """The classes of the objects the callers of ``function`` pass as its parameter
        ``name`` (`classes_built`: ("", name) for another library's class); None when a caller
        is in this module or passes something else, or when no caller is known: unknown stays
        unknown. (Calls at a module's top level are not summarised: such a caller is not
        seen.)"""
        if parameter_position(function, name) is None:
            return None
        index = module_index(context)
        qualname = qualified_name(index, function)
        path = os.path.abspath(context.path)
        if qualname is None:
            return None
        key = (path, qualname, name)
        known = self._trees.passed.get(key)
        if known is not None:
            # Asked again (another call of the parameter, another rule): the summaries the
            # answer read are used again, as they key the cached result.
            self.used |= known[1]
            return known[0]
        outer, self.used = self.used, set()  # what this answer reads, whatever was read before
        found: frozenset[ClassRef] | None = frozenset()
        callers = self.callers(FunctionRef(path, qualname))
        seen = 0
        for caller_path, _caller, _parsed, nodes, call in self._calls_elsewhere(context, function):
            seen += 1
            value = argument_for(call, function, name) if call is not None else None
            classes = classes_built(value, nodes, partial(self.class_of, caller_path))
            found = found | classes if found is not None and classes is not None else None
        answer = found if found and seen == len(callers) else None
        read, self.used = frozenset(self.used), outer
        self.used |= read
        self._trees.passed[key] = (answer, read)
        return answer

    def _parsed_function(self, path: str, qualname: str, source: str) -> cst.Module | None:
        """A summarised function's source, parsed once per run (its nodes stay the same
        objects, so every module that asks shares them)."""
        key = (path, qualname)
        if key not in self._trees.parsed:
            try:
                module = parse_module(source)
            except Exception:  # a summary from another libcst version
                module = None
            if module is not None and not any(isinstance(s, cst.FunctionDef) for s in module.body):
                module = None
            self._trees.parsed[key] = module
        return self._trees.parsed[key]

    def graft(
        self, context: ModuleContext, call: cst.Call, words: tuple[str, ...] = ()
    ) -> cst.FunctionDef | None:
        """The function of another module that ``call`` runs, parsed from its summary and hung
        under ``call`` (see the module docstring), if its source mentions one of ``words`` (any,
        when empty); None when the project cannot say which function it is."""
        grafts: dict[cst.Call, cst.FunctionDef | None] = context.grafts
        if call in grafts:
            return grafts[call]
        found = self._graft(context, call, words)
        if found is not None or not words:
            grafts[call] = found
        return found

    def _graft(
        self, context: ModuleContext, call: cst.Call, words: tuple[str, ...]
    ) -> cst.FunctionDef | None:
        index = module_index(context)
        if call in context.graft_targets:
            targets = context.graft_targets[call]
        elif (call, words) in context.graft_undecided:
            return None
        else:
            decided = self._graft_targets(context, call, words)
            if decided is None:
                context.graft_undecided.add((call, words))
                return None
            targets = context.graft_targets[call] = decided
        agreed = self._agreed(os.path.abspath(context.path), call, targets, words)
        if agreed is None:
            return None
        found, others = agreed
        target_path, target_qualname = found
        summary = self.summary(target_path)
        function_record = summary.function(target_qualname) if summary else None
        if function_record is None:
            return None
        module = self._graft_tree(context, found, function_record.source)
        if module is None:
            return None
        grafted = next((s for s in module.body if isinstance(s, cst.FunctionDef)), None)
        if grafted is None:
            return None
        alike = tuple((self.display(path), line, column) for path, line, column in others)
        site = ForeignSite(
            call, self.display(target_path), target_qualname, function_record.line, module, alike
        )
        context.attach(grafted, call, site, index.attach(grafted, call))
        context.graft_origins[grafted] = found
        return grafted

    def _agreed(
        self, here: str, call: cst.Call, targets: GraftTargets, words: tuple[str, ...]
    ) -> tuple[tuple[str, str], tuple[tuple[str, int, int], ...]] | None:
        """The function to graft under ``call`` of ``targets`` (see `_graft_targets`), if its
        source mentions one of ``words`` (any, when empty): the one target; of the candidates
        of a receiver of unknown class, those whose signature accepts the call (`arity_fits`),
        one when all of them do the same with ``words`` (`agreeing_effects`) and none is in the
        module ``here`` being linted (its own functions are not grafted); else None. With it,
        (path, line, column) of the other candidates' ``def``, which do the same."""
        found, inferred = targets
        records = []
        for path, qualname in found:
            summary = self.summary(path)
            record = summary.function(qualname) if summary else None
            if record is None:
                return None
            records.append(record)
        mentioning = [r for r in records if _mentions(r, words)]
        if not mentioning or (not inferred and len(found) != 1):
            return None
        if not inferred:
            return found[0], ()
        fitting: list[tuple[tuple[str, str], FunctionRecord, str]] = []
        for ref, record in zip(found, records, strict=True):
            candidate = self._candidate(ref, record.source)
            if candidate is None:
                return None
            if arity_fits(call, candidate):
                fitting.append((ref, record, candidate.body))
        if any(ref[0] == here for ref, *_ in fitting):
            return None
        if len(fitting) == 1:
            ref, record, _body = fitting[0]
            return (ref, ()) if record in mentioning else None
        if fitting and agreeing_effects([body for *_, body in fitting], words or GRAFT_WORDS):
            others = tuple((ref[0], r.line, r.column + 1) for ref, r, _ in fitting[1:])
            return fitting[0][0], others
        return None

    def _candidate(self, ref: tuple[str, str], source: str) -> Candidate | None:
        """The `Candidate` of the function ``ref``, read once per run."""
        if ref not in self._trees.candidates:
            self._trees.candidates[ref] = read_candidate(source)
        return self._trees.candidates[ref]

    def _graft_tree(
        self, context: ModuleContext, key: tuple[str, str], source: str
    ) -> cst.Module | None:
        """A tree of the function ``key`` that no other call of this file has grafted: each
        call site needs its own (its nodes' parents and order place them at that call), while
        the next file linted reuses the trees (composer's trainer tests graft `Trainer.fit` at
        123 calls of one file; 2,097 of 2,962 graft parses on a 55-repository tree repeated an
        earlier parse). At most `_GRAFT_COPIES` trees per function stay kept."""
        used = context.graft_copies.get(key, 0)
        context.graft_copies[key] = used + 1
        trees = self._trees.grafted.setdefault(key, [])
        if used < len(trees):
            return trees[used]
        module = self._copy_of(key, trees[0]) if trees else None
        if module is None:
            try:
                module = parse_module_anew(source)
            except Exception:  # a summary from another libcst version: nothing to graft
                return None
        if len(trees) < _GRAFT_COPIES:
            trees.append(module)
        return module

    def _copy_of(self, key: tuple[str, str], module: cst.Module) -> cst.Module | None:
        """A tree equal to ``module`` (the first tree of the function ``key``) that shares no
        node with it, or None. Unpickling our own tree, pickled once in this process, builds
        the nodes without parsing (or validating) them again: about a third of a parse's time,
        for the functions grafted at several calls of one file (123 calls of composer's
        ``Trainer.fit`` in one test file)."""
        try:
            blob = self._trees.pickled.get(key)
            if blob is None:
                blob = self._trees.pickled[key] = pickle.dumps(module, pickle.HIGHEST_PROTOCOL)
            copied = pickle.loads(blob)
        except (pickle.PicklingError, RecursionError, TypeError, AttributeError):
            return None
        return copied if isinstance(copied, cst.Module) else None

    def _graft_targets(
        self, context: ModuleContext, call: cst.Call, words: tuple[str, ...]
    ) -> GraftTargets | None:
        """The functions of other modules ``call`` may run, and whether they are the
        candidates of a receiver of unknown class (`_receiver_candidates`) rather than the one
        function a name, ``self`` or a known class resolves to. None, left undecided, where
        seeking the class of an object would cost a walk of the callers elsewhere and no
        project method of the name it calls mentions one of ``words`` (`_may_mention`):
        whichever it runs, it has nothing to graft for this question."""
        index = module_index(context)
        callee = written_callee(call)
        path = os.path.abspath(context.path)
        if callee is None or path not in self.summaries:
            return (), False
        if call in context.foreign:
            return self._nested_target(context, call, callee, path), False
        function = index.enclosing_function(call)
        caller = qualified_name(index, function) if function is not None else ""
        cls = index.enclosing_class(call)
        owner = cls.name.value if cls is not None else None
        constructed = index.shared(constructed_receivers, lambda: constructed_receivers(index))
        receiver = receiver_type(index, constructed, call, function, cls)
        if receiver is None:
            # `loss_scaler = NativeScaler()` ... `loss_scaler(loss, optimizer)`: an object of a
            # project class called runs that class's `__call__` (MAE's and ConvNeXt's scaler
            # wrappers, defined in `util/misc.py`, are called so from `engine.py`).
            receiver = instance_type(constructed, call, function, cls)
            callee = f"{callee}.__call__" if receiver is not None else callee
            if (
                receiver is None
                and isinstance(call.func, cst.Name)
                and function is not None
                and parameter_position(function, call.func.value) is not None
            ):
                if not self._may_mention(path, "__call__", words):
                    return None
                # A parameter that every caller elsewhere hands an object of one class.
                passed = self.passed_class(context, function, call.func.value)
                method = self.method(*passed, "__call__") if passed is not None else None
                if method is not None and method.path != path:
                    return ((method.path, method.qualname),), False
        held, _, name = callee.rpartition(".")
        unknown = receiver is None or (
            declared_class(receiver) is None and self.class_of(path, receiver) is None
        )
        if unknown and self._is_object(path, held) and self.resolve(path, callee) is None:
            if not self._may_mention(path, name, words):
                return None
            found = self._receiver_candidates(context, call, held, name)
            return tuple((t.path, t.qualname) for t in found), True
        record = CallRecord(callee, 0, 0, None, False, caller or "", owner, receiver)
        targets = [t for t in self.call_targets(path, record) if t.path != path]
        if len(targets) != 1:
            return (), False
        return ((targets[0].path, targets[0].qualname),), False

    def _may_mention(self, path: str, name: str, words: tuple[str, ...]) -> bool:
        """Whether a project method ``name`` connected to ``path`` mentions one of ``words``
        (any, when empty): what an object of unknown class may run when it is called so (the
        methods of its class, or of a class it inherits from, are among them)."""
        for ref in self.methods_named(path, name, generic=True):
            summary = self.summary(ref.path)
            record = summary.function(ref.qualname) if summary else None
            if record is None or _mentions(record, words):
                return True
        return False

    def _is_object(self, path: str, held: str) -> bool:
        """Whether ``held`` names an object whose class analysis may seek: a plain name or one
        attribute of ``self`` (``guidance``, ``self.guidance``), not a name an import or a
        builtin binds (``argparse.ArgumentParser``, ``str.join``)."""
        name = held.removeprefix("self.")
        if not name.isidentifier() or name in ("self", "cls"):
            return False
        if held.startswith("self."):
            return True
        summary = self.summary(path)
        imported = {record.local for record in summary.imports} if summary else set()
        return name not in imported and not hasattr(builtins, name)

    def _receiver_candidates(
        self, context: ModuleContext, call: cst.Call, held: str, name: str
    ) -> list[FunctionRef]:
        """The methods ``held.name(...)`` may run when no code states the class of ``held``:
        for a constructor parameter stored as ``self.x``, or a parameter of the function, the
        method of each class the callers pass (none if one of them is another library's or
        lacks it); else every project method of that name (`CallGraph.methods_named`). Asked
        only once `_may_mention` has found a project method of that name."""
        path = os.path.abspath(context.path)
        index = module_index(context)
        function = index.enclosing_function(call)
        cls = index.enclosing_class(call)
        classes = None
        if held.startswith("self.") and cls is not None:
            stored = stored_parameter(index, cls, held)
            classes = self.passed_classes(context, *stored) if stored is not None else None
        elif function is not None and parameter_position(function, held) is not None:
            classes = self.passed_classes(context, function, held)
        if classes is None:
            return self.methods_named(path, name)
        if any(not path for path, _cls in classes):
            return []
        methods = [self.method(path, cls_name, name) for path, cls_name in sorted(classes)]
        return [m for m in methods if m is not None] if all(methods) else []

    def _nested_target(
        self, context: ModuleContext, call: cst.Call, callee: str, path: str
    ) -> tuple[tuple[str, str], ...]:
        """The target of a call inside a function grafted from another module, resolved in
        that module (open_clip's `main.py` watches gradients that `train_one_epoch` in
        `training/train.py` scales through its module's `backward()`): a plain function or a
        `self.` method of its class; one level only (a call in a function grafted into a
        grafted one is not followed), and never back into the file being linted."""
        root = context.foreign.root(call)
        origin = context.graft_origins.get(root)
        if origin is None or context.foreign[root].via in context.foreign:
            return ()
        module_path, qualname = origin
        owner, _, _method = qualname.rpartition(".")
        summary = self.summary(module_path)
        caller_class = owner if owner and summary and summary.class_named(owner) else None
        record = CallRecord(callee, 0, 0, None, False, qualname, caller_class, None)
        targets = [t for t in self.call_targets(module_path, record) if t.path != path]
        if len(targets) != 1:
            return ()
        return ((targets[0].path, targets[0].qualname),)


def _calls_by_line(
    module: cst.Module, source: str, nodes: tuple[cst.CSTNode, ...]
) -> dict[tuple[int, str], cst.Call]:
    """(line, callee) -> the first call of that callee starting on that line of ``module`` (the
    parse of ``source``; ``nodes``, its function's code nodes in source order): computed once
    per parsed function, however many of its calls are asked for. The lines are CPython's, as
    the summaries' call lines are (`linter.model.syntax._line_numbers`); generating the positions
    of a
    large caller instead was a third of a cold lint of sd-scripts' SDXL pipeline."""
    calls = [node for node in nodes if isinstance(node, cst.Call)]
    lines = call_lines(source, calls)
    if lines is None:
        positions = positions_of(module)
        line_of = {call: positions[call].start.line for call in calls}
    else:
        line_of = dict(zip(calls, lines, strict=True))
    found: dict[tuple[int, str], cst.Call] = {}
    # In `walk`'s order, which decides between two calls of one callee on one line.
    for node in walk(module):
        if isinstance(node, cst.Call) and node in line_of:
            callee = written_callee(node)
            if callee is not None:
                found.setdefault((line_of[node], callee), node)
    return found


def _mentions(record: FunctionRecord, words: tuple[str, ...]) -> bool:
    """Whether the function ``record`` mentions one of ``words`` (any, when empty): whether it
    has anything to graft for a question about them."""
    return not words or not set(words).isdisjoint(record.words)
