"""Which function a method call on an object of unknown class runs: class-hierarchy analysis.

Registries, factories keyed by config and objects handed to a constructor hide the class of the
object a method is called on (``self.guidance.train_step(latents)``, where ``self.guidance`` is
whatever a caller passed; ``model = build_model(opt); model.optimize_parameters()``). The
project's classes that define that method, and whose signature accepts the call's arguments,
are the candidates. A call whose candidates do different things stays unknown: one is grafted
only when every candidate does the same thing with what the question asks about
(`agreeing_effects`), so a finding holds whichever of them runs.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from linter.model.project._summary import declared_class
from linter.model.syntax import ModuleIndex, dotted_name, parameter_position

#: A class of the project (path, name), or ("", name) for a class no summary holds (another
#: library's): an object of it runs no project method.
ClassRef = tuple[str, str]


@dataclass(frozen=True, slots=True)
class Candidate:
    """What analysis needs of a candidate method before grafting it: its signature, as a call
    fills it (``self`` left out unless a ``staticmethod``), and its body's text. Read with
    CPython's parser from the summary's source: a fifth of libcst's cost, for every candidate
    of every call, where libcst parses only the one grafted."""

    positional: tuple[str, ...]
    keyword_only: tuple[str, ...]
    #: Parameters without a default.
    required: frozenset[str]
    star_args: bool
    star_kwargs: bool
    #: The body's lines, the ``def`` line and decorators aside.
    body: str


def read_candidate(source: str) -> Candidate | None:
    """The `Candidate` of a summarised function's source; None when CPython's parser rejects
    it or it holds no function."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    function = next(
        (n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)), None
    )
    if function is None or not function.body:
        return None
    args = function.args
    positional = [a.arg for a in (*args.posonlyargs, *args.args)]
    defaulted = set(positional[len(positional) - len(args.defaults) :] if args.defaults else ())
    required = {name for name in positional if name not in defaulted}
    required |= {
        a.arg
        for a, default in zip(args.kwonlyargs, args.kw_defaults, strict=True)
        if default is None
    }
    static = any(
        isinstance(d, ast.Name) and d.id == "staticmethod" for d in function.decorator_list
    )
    if positional and not static:
        required.discard(positional[0])
        positional = positional[1:]
    lines = source.splitlines()
    return Candidate(
        tuple(positional),
        tuple(a.arg for a in args.kwonlyargs),
        frozenset(required),
        args.vararg is not None,
        args.kwarg is not None,
        "\n".join(lines[function.body[0].lineno - 1 :]),
    )


def arity_fits(call: cst.Call, candidate: Candidate) -> bool:
    """Whether the candidate accepts the arguments ``call`` passes: no more positionals than
    it takes, no keyword it lacks, every parameter without a default given. A call that
    unpacks ``*args`` or ``**kwargs`` fits."""
    if any(arg.star for arg in call.args):
        return True
    given = sum(1 for arg in call.args if arg.keyword is None)
    if given > len(candidate.positional) and not candidate.star_args:
        return False
    named = {arg.keyword.value for arg in call.args if arg.keyword is not None}
    accepted = {*candidate.positional[given:], *candidate.keyword_only}
    if not named <= accepted and not candidate.star_kwargs:
        return False
    filled = {*candidate.positional[:given], *named}
    return candidate.required <= filled


def agreeing_effects(bodies: list[str], words: tuple[str, ...]) -> bool:
    """Whether candidates whose bodies are ``bodies`` do the same with ``words``: the lines of
    code that mention one (comments and blank lines aside) are the same lines in the same
    order in each, and there is at least one. Strict on purpose: two classes whose
    ``train_step`` both backpropagate ``latents.backward(gradient=grad)`` agree, one that
    backpropagates ``self.scaler.scale(loss)`` does not."""
    effects = {_effect_lines(body, words) for body in bodies}
    return len(effects) == 1 and bool(next(iter(effects)))


def _effect_lines(body: str, words: tuple[str, ...]) -> tuple[str, ...]:
    lines = (line.strip() for line in body.splitlines())
    return tuple(
        line
        for line in lines
        if line and not line.startswith("#") and any(word in line for word in words)
    )


def classes_built(
    value: cst.BaseExpression | None,
    nodes: tuple[cst.CSTNode, ...],
    class_of: Callable[[str], ClassRef | None],
    seen: frozenset[str] = frozenset(),
) -> frozenset[ClassRef] | None:
    """The classes of the object ``value`` may be, in a function whose code ``nodes`` are:
    ``Guidance(...)`` itself, either arm of ``A(...) if flag else B(...)``, or a name that
    function binds only to such values (``None`` on the runs that have none aside); None when
    one of them is not a constructor call (a builder, a parameter, a registry lookup, a name
    bound to itself: ``net = net.module if wrapped else net``): unknown. ``class_of`` finds a
    callee's project class; a capitalised callee it does not find is another library's
    class."""
    if isinstance(value, cst.IfExp):
        body = classes_built(value.body, nodes, class_of, seen)
        orelse = classes_built(value.orelse, nodes, class_of, seen)
        return body | orelse if body is not None and orelse is not None else None
    if isinstance(value, cst.Name):
        if value.value in seen:
            return None
        bound = [
            node.value
            for node in nodes
            if isinstance(node, cst.Assign)
            and not (isinstance(node.value, cst.Name) and node.value.value == "None")
            and any(
                isinstance(t.target, cst.Name) and t.target.value == value.value
                for t in node.targets
            )
        ]
        found: frozenset[ClassRef] = frozenset()
        for expression in bound:
            classes = classes_built(expression, nodes, class_of, seen | {value.value})
            if classes is None:
                return None
            found |= classes
        return found or None
    if isinstance(value, cst.Call):
        callee = dotted_name(value.func)
        if callee is None:
            return None
        owner = class_of(callee)
        if owner is not None:
            return frozenset({owner})
        return frozenset({("", callee)}) if declared_class(callee) is not None else None
    return None


def stored_parameter(
    index: ModuleIndex, cls: cst.ClassDef, attribute: str
) -> tuple[cst.FunctionDef, str] | None:
    """(``__init__``, parameter) when the class ``cls`` stores a constructor parameter as
    ``attribute`` (``self.guidance = guidance``) and assigns that attribute nowhere else."""
    stored = index.shared(_attribute_assignments, lambda: _attribute_assignments(index))
    found = stored.get((cls, attribute), [])
    if len(found) != 1:
        return None
    init, value = found[0]
    if init is None or init.name.value != "__init__" or not isinstance(value, cst.Name):
        return None
    if parameter_position(init, value.value) is None:
        return None
    return init, value.value


def _attribute_assignments(
    index: ModuleIndex,
) -> dict[tuple[cst.ClassDef, str], list[tuple[cst.FunctionDef | None, cst.BaseExpression]]]:
    """(class, ``self.x``) -> each assignment of it in the class's methods: (the method, the
    value); made once per module, however many calls ask."""
    found: dict[
        tuple[cst.ClassDef, str], list[tuple[cst.FunctionDef | None, cst.BaseExpression]]
    ] = {}
    for assign in index.nodes(cst.Assign):
        cls = index.enclosing_class(assign)
        if cls is None:
            continue
        for target in assign.targets:
            name = dotted_name(target.target)
            if name is not None and name.startswith("self."):
                found.setdefault((cls, name), []).append(
                    (index.enclosing_function(assign), assign.value)
                )
    return found
