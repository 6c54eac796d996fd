"""What can run together on one path: branch arms, branch conditions, order, exclusive flags.

Rules that pair two statements (AMP002: a bf16 origin and an fp16 switch; the iteration rules:
backward, unscale_, clip, step, update) ask the same questions, answered here once per module:

- `PathFacts.conditions(node)`: the branch conditions that hold on every path to ``node`` —
  ``if A: ... elif B: <node>`` gives "A is false, B is true";
- `PathFacts.exclusive(a, b)`: no execution runs both — they sit in different arms of one
  ``if``/``elif``/``else``, or their conditions contradict (``if precision == "bf16"`` /
  ``if precision == "fp16"``; ``if args.bf16`` / ``if args.fp16``; flags an ``assert`` or an
  argparse mutually exclusive group makes exclusive);
- `PathFacts.may_precede(a, b)`: some execution runs ``a`` and later ``b``.

Conditions are kept as `Fact`s, small normal forms of a test (``args.bf16`` is true,
``precision == "fp16"``, ``torch.cuda.is_bf16_supported()`` is false), so a test elsewhere — an
``fp16=not torch.cuda.is_bf16_supported()`` argument — can be compared with them.

An fp16 flag and a bf16 flag (``args.fp16`` and ``self.args.bf16``, ``cfg.use_fp16`` and
``cfg.use_bf16``, ``fp16_full_eval`` and ``bf16_full_eval``) are exclusive: Hugging Face's
``TrainingArguments`` raises when both are set, and a script run with both asks for two
precisions at once.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import libcst as cst

from linter.model.syntax._dotted_names import dotted_name
from linter.model.syntax._module_index import ModuleIndex

#: Flag names (the last part of ``args.fp16``) that switch fp16 / bf16 on: ``fp16``,
#: ``use_fp16``, ``fp16_full_eval``, ``half``; ``bf16``, ``bf16_full_eval``, ``use_bfloat16``.
FP16_FLAG = re.compile(r"(^|_)(fp16|float16|half)(_|$)", re.IGNORECASE)
BF16_FLAG = re.compile(r"(^|_)(bf16|bfloat16)(_|$)", re.IGNORECASE)

#: Truth values: a `Fact` with this value says the subject is truthy / falsy.
TRUE = True
FALSE = False


@dataclass(frozen=True, slots=True)
class Fact:
    """One normal-form statement about a value that holds on a path.

    ``args.bf16`` -> ``Fact("args.bf16", "is", True)``; ``p == "fp16"`` ->
    ``Fact("p", "==", "fp16")``; ``p in ("a", "b")`` -> ``Fact("p", "in", ("a", "b"))``.
    """

    #: Source text of the tested expression, e.g. ``args.bf16`` or ``torch.cuda.is_available()``.
    subject: str
    #: ``is`` (truthiness), ``==``, ``!=``, ``in`` or ``not in``.
    relation: str
    #: The truth value, the constant, or the tuple of constants.
    value: object


def _constant(node: cst.BaseExpression) -> object:
    """A literal's value (strings, ints, True/False/None); ``_NOT_CONSTANT`` otherwise."""
    if isinstance(node, cst.SimpleString):
        return node.evaluated_value
    if isinstance(node, cst.Integer):
        return int(node.value, 0)
    if isinstance(node, cst.Name) and node.value in ("True", "False", "None"):
        return {"True": True, "False": False, "None": None}[node.value]
    if isinstance(node, cst.Tuple | cst.List | cst.Set):
        values = tuple(_constant(element.value) for element in node.elements)
        return _NOT_CONSTANT if _NOT_CONSTANT in values else values
    return _NOT_CONSTANT


_NOT_CONSTANT = object()
_NEGATED = {"==": "!=", "!=": "==", "in": "not in", "not in": "in"}


class Facts:
    """Turns tests into `Fact`s; one instance per module (it renders subjects as source)."""

    def __init__(self, module: cst.Module) -> None:
        self._module = module

    def subject(self, node: cst.BaseExpression) -> str:
        """The tested expression as text; a lookup of a literal key, ``args["fp16"]`` or
        ``args['fp16']``, in one spelling (``args['fp16']``), so two tests of it compare."""
        name = dotted_name(node)
        if name is not None:
            return name
        key = subscript_key(node)
        if key is not None:
            return f"{self.subject(node.value)}[{key!r}]"  # type: ignore[attr-defined]
        return self._module.code_for_node(node).strip()

    def of_test(self, test: cst.BaseExpression, holds: bool) -> frozenset[Fact]:
        """Facts that must be true when ``test`` evaluates to ``holds``."""
        while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            test, holds = test.expression, not holds
        if isinstance(test, cst.BooleanOperation):
            conjunction = isinstance(test.operator, cst.And)
            if conjunction == holds:  # `a and b` true, or `a or b` false: both parts hold
                return self.of_test(test.left, holds) | self.of_test(test.right, holds)
            return frozenset()
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
            target = test.comparisons[0]
            relation = _RELATIONS.get(type(target.operator))
            value = _constant(target.comparator)
            if relation is not None and value is not _NOT_CONSTANT:
                if not holds:
                    relation = _NEGATED[relation]
                return frozenset({Fact(self.subject(test.left), relation, value)})
            return frozenset()
        if isinstance(test, cst.Name | cst.Attribute | cst.Call) or subscript_key(test) is not None:
            return frozenset({Fact(self.subject(test), "is", holds)})
        return frozenset()


def _bindings(assign: cst.Assign) -> list[tuple[str, str | None]]:
    """(name, the ``Name`` literal bound to it or None) for each name ``assign`` binds: ``x =
    True``; ``g, d = False, True`` element by element; None for any other value."""
    found: list[tuple[str, str | None]] = []
    value = assign.value
    for target in assign.targets:
        pairs: list[tuple[cst.BaseExpression, cst.BaseExpression | None]] = [(target.target, value)]
        if isinstance(target.target, cst.Tuple):
            values = value.elements if isinstance(value, cst.Tuple) else ()
            elements = target.target.elements
            pairs = [
                (element.value, values[i].value if len(values) == len(elements) else None)
                for i, element in enumerate(elements)
            ]
        for bound, bound_value in pairs:
            name = dotted_name(bound)
            if name is not None:
                literal = bound_value.value if isinstance(bound_value, cst.Name) else None
                found.append((name, literal))
    return found


def subscript_key(node: cst.BaseExpression) -> str | None:
    """``fp16`` of ``args["fp16"]`` (a flag read from a dict of options), else None."""
    if not isinstance(node, cst.Subscript) or len(node.slice) != 1:
        return None
    index = node.slice[0].slice
    if not isinstance(index, cst.Index):
        return None
    value = _constant(index.value)
    return value if isinstance(value, str) else None


_RELATIONS: dict[type, str] = {
    cst.Equal: "==",
    cst.NotEqual: "!=",
    cst.In: "in",
    cst.NotIn: "not in",
    cst.Is: "==",
    cst.IsNot: "!=",
}


def _contradict(a: Fact, b: Fact) -> bool:
    """True when ``a`` and ``b`` about the same subject cannot both hold."""
    if a.subject != b.subject:
        return False
    pair = {a.relation, b.relation}
    if pair == {"is"}:
        return a.value != b.value
    if a.relation == "==" and b.relation == "==":
        return a.value != b.value
    if pair == {"==", "!="}:
        return a.value == b.value
    equal, member = (a, b) if a.relation == "==" else (b, a)
    if equal.relation == "==" and member.relation in ("in", "not in"):
        inside = equal.value in member.value  # type: ignore[operator]  # Fact.value is object; an `in` fact holds a tuple
        return inside != (member.relation == "in")
    if a.relation == "in" and b.relation == "in":
        return not set(a.value) & set(b.value)  # type: ignore[call-overload]  # Fact.value is object; both `in` facts hold tuples
    return False


def _flag(subject: str) -> str:
    """``fp16`` of ``self.args.fp16`` and of ``args['fp16']``."""
    keyed = re.fullmatch(r".*\[['\"](\w+)['\"]\]", subject)
    return keyed.group(1) if keyed else subject.rpartition(".")[2]


class PathFacts:
    """Branch, order and exclusivity facts of one module (see the module docstring)."""

    def __init__(self, index: ModuleIndex) -> None:
        self._index = index
        self.facts = Facts(index.module)
        self._conditions: dict[cst.CSTNode, frozenset[Fact]] = {}
        self._flag_setters: dict[str, list[cst.CSTNode]] | None = None
        #: Pairs of flag names an argparse mutually exclusive group declares.
        self._exclusive_flags: set[frozenset[str]] = set()
        #: Pairs of subjects an ``assert`` makes exclusive.
        self._exclusive_subjects: set[frozenset[str]] = set()
        #: ``if`` statement -> its test as `_boolean_test` reads it.
        self._tests: dict[cst.If, tuple[str, bool] | None] = {}
        #: Answers kept per node and per pair: the rules ask about every pair of events of an
        #: iteration, and each question walks the nodes' ancestors.
        self._arms: dict[cst.CSTNode, tuple[tuple[cst.If, cst.CSTNode], ...]] = {}
        self._exclusive: dict[tuple[cst.CSTNode, cst.CSTNode], bool] = {}
        self._may_precede: dict[tuple[cst.CSTNode, cst.CSTNode], bool] = {}
        self._collect_declared_exclusions()

    # -- questions ---------------------------------------------------------------------------

    def arms(self, node: cst.CSTNode) -> Iterator[tuple[cst.If, cst.CSTNode]]:
        """``(if statement, arm)`` for every ``if`` around ``node`` up to its function; the arm
        is the ``if``'s body or its ``orelse``."""
        found = self._arms.get(node)
        if found is None:
            found = self._arms[node] = tuple(self._walk_arms(node))
        return iter(found)

    def _walk_arms(self, node: cst.CSTNode) -> Iterator[tuple[cst.If, cst.CSTNode]]:
        child = node
        for ancestor in self._index.ancestors(node):
            if isinstance(ancestor, cst.FunctionDef | cst.Lambda | cst.ClassDef):
                return
            if isinstance(ancestor, cst.If) and child is not ancestor.test:
                yield ancestor, child
            child = ancestor

    def conditions(self, node: cst.CSTNode) -> frozenset[Fact]:
        """Facts that hold on every path reaching ``node`` within its function, with what a
        derived flag implies (`implied`)."""
        found = self._conditions.get(node)
        if found is None:
            facts: set[Fact] = set()
            for statement, arm in self.arms(node):
                facts |= self.facts.of_test(statement.test, arm is statement.body)
            for fact in list(facts):
                facts |= self.implied(fact)
            found = self._conditions[node] = frozenset(facts)
        return found

    def implied(self, fact: Fact) -> frozenset[Fact]:
        """What a derived flag being true implies: ``self.use_amp = True`` set only under
        ``if args.fp16:`` (and otherwise only ever ``False``/``None``) means ``args.fp16``."""
        if fact.relation != "is" or fact.value is not True:
            return frozenset()
        if self._flag_setters is None:
            self._flag_setters = self._collect_flag_setters()
        setters = self._flag_setters.get(fact.subject)
        if not setters:
            return frozenset()
        common: set[Fact] | None = None
        for setter in setters:
            facts: set[Fact] = set()
            for statement, arm in self.arms(setter):
                facts |= self.facts.of_test(statement.test, arm is statement.body)
            common = facts if common is None else common & facts
        return frozenset(common or ())

    def _collect_flag_setters(self) -> dict[str, list[cst.CSTNode]]:
        """Names assigned the literal ``True`` (their assignments), when every other
        assignment of the name is a literal ``False`` or ``None``."""
        setters: dict[str, list[cst.CSTNode]] = {}
        spoiled: set[str] = set()
        for assign in self._index.nodes(cst.Assign):
            for name, literal in _bindings(assign):
                if literal == "True":
                    setters.setdefault(name, []).append(assign)
                elif literal not in ("False", "None"):
                    spoiled.add(name)
        return {name: nodes for name, nodes in setters.items() if name not in spoiled}

    def in_exclusive_arms(self, a: cst.CSTNode, b: cst.CSTNode) -> bool:
        """``a`` and ``b`` sit in different arms of one ``if``/``elif``/``else`` chain."""
        arms_of_a = dict(self.arms(a))
        for statement, arm in self.arms(b):
            other = arms_of_a.get(statement)
            if other is not None and other is not arm:
                return True
        return False

    def _opposite_tests(self, a: cst.CSTNode, b: cst.CSTNode) -> bool:
        """``a`` and ``b`` sit in arms of two ``if`` statements that test the same ``and``/``or``
        of facts, one where it holds and one where it does not. `conditions` breaks a test
        into facts, but a conjunction that fails gives none (``not (fp16 and native)`` says
        neither flag is false), yet VL-T5's trainers scale the backward under ``if fp16 and
        native:`` and clip in the ``else`` of a second ``if fp16 and native:``. Every part must
        be a fact `conditions` would read (``cfg[key]`` is none: its key may differ)."""
        tests_of_a = {
            test for statement, arm in self.arms(a) if (test := self._test(statement, arm))
        }
        if not tests_of_a:
            return False
        return any(
            (test := self._test(statement, arm)) is not None
            and (test[0], not test[1]) in tests_of_a
            for statement, arm in self.arms(b)
        )

    def _test(self, statement: cst.If, arm: cst.CSTNode) -> tuple[str, bool] | None:
        """The test of ``statement`` as one text and whether it holds in ``arm``, when it is a
        boolean operation of facts (see `_opposite_tests`); None for any other test."""
        if statement not in self._tests:
            self._tests[statement] = self._boolean_test(statement.test)
        found = self._tests[statement]
        if found is None:
            return None
        return found[0], found[1] == (arm is statement.body)

    def _boolean_test(self, test: cst.BaseExpression) -> tuple[str, bool] | None:
        """A boolean operation of facts as one text (``not`` taken into the flag, parentheses
        and spacing left out) and whether the ``if`` body runs when that text holds."""
        holds = True
        while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            test, holds = test.expression, not holds
        if not isinstance(test, cst.BooleanOperation):
            return None
        parts: list[cst.BaseExpression] = [test]
        while parts:
            part = parts.pop()
            if isinstance(part, cst.BooleanOperation):
                parts += [part.left, part.right]
            elif not self.facts.of_test(part, True):
                return None
        text = self._index.module.code_for_node(test.with_changes(lpar=(), rpar=()))
        return " ".join(text.split()), holds

    def contradict(self, first: Iterable[Fact], second: Iterable[Fact]) -> bool:
        """True when no execution makes every fact of ``first`` and of ``second`` hold."""
        second = list(second)
        for a in first:
            for b in second:
                if _contradict(a, b) or self._exclusive_pair(a, b):
                    return True
        return False

    def exclusive(
        self,
        a: cst.CSTNode,
        b: cst.CSTNode,
        also_a: Iterable[Fact] = (),
        also_b: Iterable[Fact] = (),
    ) -> bool:
        """No execution runs both ``a`` (where ``also_a`` holds too) and ``b`` (``also_b``)."""
        if also_a or also_b:
            return self._exclusive_now(a, b, also_a, also_b)
        found = self._exclusive.get((a, b))
        if found is None:
            found = self._exclusive[a, b] = self._exclusive_now(a, b, (), ())
        return found

    def _exclusive_now(
        self, a: cst.CSTNode, b: cst.CSTNode, also_a: Iterable[Fact], also_b: Iterable[Fact]
    ) -> bool:
        if self.in_exclusive_arms(a, b) or self._opposite_tests(a, b):
            return True
        return self.contradict(
            self.conditions(a) | frozenset(also_a), self.conditions(b) | frozenset(also_b)
        )

    def may_precede(self, a: cst.CSTNode, b: cst.CSTNode) -> bool:
        """Some execution runs ``a`` and later ``b``.

        In one function: ``a`` comes first in the source, or a loop around both brings ``a``
        round again before ``b``; never when they are exclusive, or when ``a``'s arm leaves the
        function (``return``/``raise``) before reaching ``b``. Across functions the call order
        is not known, so the answer is yes unless they are exclusive.
        """
        found = self._may_precede.get((a, b))
        if found is None:
            found = self._may_precede[a, b] = self._may_precede_now(a, b)
        return found

    def _may_precede_now(self, a: cst.CSTNode, b: cst.CSTNode) -> bool:
        if a is b or self.exclusive(a, b):
            return False
        if self._index.enclosing_function(a) is not self._index.enclosing_function(b):
            return True
        if self._rank(a) < self._rank(b):
            return not self._leaves_before(a, b)
        # A loop of their own function around both brings `a` round again (a function grafted
        # under a call in a loop has that loop above its own definition: it does not count).
        function = self._index.enclosing_function(a)
        around_b = set(self._index.ancestors(b))
        for loop in self._index.ancestors(a):
            if loop is function:
                return False
            if isinstance(loop, cst.For | cst.While) and loop in around_b:
                return True
        return False

    def precedes_in_source(self, a: cst.CSTNode, b: cst.CSTNode) -> bool:
        """``a`` starts before ``b`` in the source."""
        return self._rank(a) < self._rank(b)

    # -- internals ---------------------------------------------------------------------------

    def _rank(self, node: cst.CSTNode) -> float:
        return _start(self._index, node)

    def _leaves_before(self, a: cst.CSTNode, b: cst.CSTNode) -> bool:
        """``a`` is in an ``if`` arm that ends with ``return``/``raise``, and ``b`` is not."""
        around_b = set(self._index.ancestors(b))
        for statement, arm in self.arms(a):
            if statement in around_b:
                continue
            if isinstance(arm, cst.IndentedBlock | cst.SimpleStatementSuite) and _ends_function(
                arm
            ):
                return True
            if isinstance(arm, cst.Else) and _ends_function(arm.body):
                return True
        return False

    def _exclusive_pair(self, a: Fact, b: Fact) -> bool:
        if not (a.relation == b.relation == "is" and a.value is True and b.value is True):
            return False
        if frozenset({a.subject, b.subject}) in self._exclusive_subjects:
            return True
        flag_a, flag_b = _flag(a.subject), _flag(b.subject)
        if frozenset({flag_a, flag_b}) in self._exclusive_flags:
            return True
        if self._complementary(a.subject, b.subject):
            return True
        # A precision flag pair of one run's configuration (`args.bf16` / `self.args.fp16`).
        return bool(
            (FP16_FLAG.search(flag_a) and BF16_FLAG.search(flag_b))
            or (BF16_FLAG.search(flag_a) and FP16_FLAG.search(flag_b))
        )

    def _complementary(self, first: str, second: str) -> bool:
        """Two flags each set true only in arms that set the other false, in different arms of
        one ``if``/``else`` (Open-Sora-Plan's VAE trainer: ``step_gen = False; step_dis = True``
        in one arm, ``step_gen = True; step_dis = False`` in the other, then ``if step_gen:``
        and ``if step_dis:`` each step and update): never both true."""
        if self._flag_setters is None:
            self._flag_setters = self._collect_flag_setters()
        sets_first = self._flag_setters.get(first, [])
        sets_second = self._flag_setters.get(second, [])
        if not sets_first or not sets_second:
            return False
        return all(
            self.in_exclusive_arms(one, other) for one in sets_first for other in sets_second
        ) and all(
            self._clears(setter, flag)
            for setters, flag in ((sets_first, second), (sets_second, first))
            for setter in setters
        )

    def _clears(self, setter: cst.CSTNode, flag: str) -> bool:
        """The block of ``setter`` also binds ``flag`` to ``False``/``None``."""
        block = self._index.parent.get(self._index.parent.get(setter))  # type: ignore[arg-type]  # a statement's line has a parent
        return any(
            (flag, literal) in _bindings(statement)
            for line in getattr(block, "body", ())
            # A compound statement beside the setter (an `if`, a `for`) binds nothing here.
            if isinstance(line, cst.SimpleStatementLine)
            for statement in line.body
            if isinstance(statement, cst.Assign)
            for literal in ("False", "None")
        )

    def _collect_declared_exclusions(self) -> None:
        """``assert not (a and b)``, ``assert a + b <= 1``, argparse mutually exclusive groups."""
        for statement in self._index.nodes(cst.Assert):
            facts = list(self.facts.of_test(statement.test, False))  # what a failure would mean
            truths = [f.subject for f in facts if f.relation == "is" and f.value is True]
            if len(truths) == 2:
                self._exclusive_subjects.add(frozenset(truths))
            summed = _at_most_one_of(statement.test)
            if summed is not None:
                subjects = [self.facts.subject(node) for node in summed]
                for pair in itertools.combinations(subjects, 2):
                    self._exclusive_subjects.add(frozenset(pair))
        groups: dict[str, list[str]] = {}
        for call in self._index.nodes(cst.Call):
            func = call.func
            if not isinstance(func, cst.Attribute) or func.attr.value != "add_argument":
                continue
            group = func.value
            if not isinstance(group, cst.Name) or not self._is_exclusive_group(group.value):
                continue
            dest = argument_dest(call)
            if dest is not None:
                groups.setdefault(group.value, []).append(dest)
        for dests in groups.values():
            for pair in itertools.combinations(dests, 2):
                self._exclusive_flags.add(frozenset(pair))

    def _is_exclusive_group(self, name: str) -> bool:
        for assign in self._index.nodes(cst.Assign):
            value = assign.value
            if (
                isinstance(value, cst.Call)
                and isinstance(value.func, cst.Attribute)
                and value.func.attr.value == "add_mutually_exclusive_group"
                and any(dotted_name(t.target) == name for t in assign.targets)
            ):
                return True
        return False


def argument_dest(call: cst.Call) -> str | None:
    """The ``dest`` of ``parser.add_argument("--base-model", ...)``: ``base_model``."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "dest":
            value = _constant(arg.value)
            return value if isinstance(value, str) else None
    names = [
        value
        for arg in call.args
        if arg.keyword is None and isinstance(value := _constant(arg.value), str)
    ]
    long = [name for name in names if name.startswith("--")]
    chosen = long[0] if long else (names[0] if names else None)
    if chosen is None:
        return None
    return chosen.lstrip("-").replace("-", "_")


def _at_most_one_of(test: cst.BaseExpression) -> list[cst.BaseExpression] | None:
    """The summed flags of ``a + b <= 1`` / ``int(a) + int(b) < 2``, else None."""
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
        return None
    target = test.comparisons[0]
    bound = _constant(target.comparator)
    if not (
        (isinstance(target.operator, cst.LessThanEqual) and bound == 1)
        or (isinstance(target.operator, cst.LessThan) and bound == 2)
    ):
        return None
    terms: list[cst.BaseExpression] = []
    stack: list[cst.BaseExpression] = [test.left]
    while stack:
        node = stack.pop()
        if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Add):
            stack += [node.left, node.right]
        elif isinstance(node, cst.Call) and dotted_name(node.func) in ("int", "bool") and node.args:
            terms.append(node.args[0].value)
        else:
            terms.append(node)
    return terms if len(terms) >= 2 else None


def _ends_function(suite: cst.BaseSuite) -> bool:
    body = suite.body
    if not body:
        return False
    last = body[-1]
    if isinstance(last, cst.SimpleStatementLine):
        last = last.body[-1]
    return isinstance(last, cst.Return | cst.Raise)


def _start(index: ModuleIndex, node: cst.CSTNode) -> float:
    """A rank that orders nodes as the source does (pre-order over collected nodes)."""
    rank = index.order.get(node)
    if rank is not None:
        return rank
    for ancestor in index.ancestors(node):
        rank = index.order.get(ancestor)
        if rank is not None:
            return rank
    return 0


def path_facts(index: ModuleIndex) -> PathFacts:
    """The module's `PathFacts`, built once and shared by every rule that asks."""
    return index.shared(PathFacts, lambda: PathFacts(index))
