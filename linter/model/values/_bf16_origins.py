"""Where each model in a module became bf16: loaded or cast as bfloat16, or a bf16 family.

The same tracking answers "where did this model become fp16?" (AMP008) when built with
``target=FP16``: then ``.half()``/``.to(torch.float16)`` casts and fp16 loads are the origins,
there are no families, and a peft wrapper ends the origin (its trainable adapters are fp32).

Models are tracked by the dotted name they are bound to (``model``, ``self.model``), per scope:
plain names per function (in source order, so a rebinding ends the old model), ``self.x``
per class. A model keeps its origin through ``.to(device)``, ``.cuda()``, wrappers such as
``get_peft_model(model, ...)`` or ``torch.compile(model)`` and ``accelerator.prepare(model, ...)``.
A function's parameter holds whatever this module's own calls of that function pass to it.
A dtype chosen at runtime (``torch_dtype=dtype`` where ``dtype`` depends on a flag) is not
known statically, so it makes no origin: one switch driving both sides is not a mismatch.
"""

from __future__ import annotations

from dataclasses import replace

import libcst as cst

from linter.model.project import ForeignSite, context_of
from linter.model.settings import DtypeChoices, ModuleConstants
from linter.model.syntax import (
    BF16,
    FP16,
    FP32,
    MAX_CALL_DEPTH,
    Fact,
    ImportAliases,
    ModuleIndex,
    PathFacts,
    dotted_name,
    keyword,
    last_part,
    literal_dtype,
    parameter_position,
    positional,
    string_value,
)
from linter.model.values._bf16_families import Bf16Family, bf16_family
from linter.model.values._model_origins import (
    CHECKPOINT_KEYWORDS,
    DTYPE_WORDS,
    FORWARDED,
    MODEL_WRAPPERS,
    TRAINS_ADAPTERS_ONLY,
    Bf16Origin,
    DtypeArgument,
)

#: Module methods that cast to one dtype, by the dtype.
_CAST_METHODS = {"bfloat16": BF16, "half": FP16}


#: Keywords that give ``from_pretrained`` its dtype.
_DTYPE_KEYWORDS = ("torch_dtype", "dtype")


#: Module methods that cast in place (as statements they change what the name holds).
_IN_PLACE_CASTS = frozenset({"to", "bfloat16", "half", "float"})

#: Methods that return the same model, dtype unchanged.
_KEEP_DTYPE_METHODS = frozenset({"cuda", "cpu", "train", "eval", "requires_grad_", "to_empty"})


#: Words a function of another module must mention for its returned model's dtype to matter.
_MODEL_WORDS = ("half", "float16", "bfloat16", "from_pretrained")

#: `Bf16Origins`' bindings: (scope, dotted name) -> (source rank, binding node, origin or None).
_Bindings = dict[tuple[cst.CSTNode | None, str], list[tuple[float, cst.CSTNode, Bf16Origin | None]]]


class Bf16Origins:
    """bf16 origins of the models in one module."""

    def __init__(
        self,
        index: ModuleIndex,
        aliases: ImportAliases,
        constants: ModuleConstants,
        paths: PathFacts | None = None,
        extra_families: tuple[Bf16Family, ...] = (),
        target: str = BF16,
        choices: DtypeChoices | None = None,
        *,
        forwards: bool = False,
    ) -> None:
        #: The dtype whose origins are tracked: BF16 (AMP002) or FP16 (AMP008).
        self.target = target
        #: (For the analysis of a function of another module, alone.) Whether a load that takes
        #: its dtype from the function's ``**kwargs`` is an origin the caller completes
        #: (`FORWARDED`): the dtype is what the calling module passes.
        self._forwards = forwards
        #: Run-time dtypes picked by a flag; casts to them are origins for FP16 only (for
        #: BF16, the same flag often picks the fp16 site, and one run cannot be both).
        self._choices = choices
        self._index = index
        self._aliases = aliases
        self._constants = constants
        self._paths = paths or PathFacts(index)
        self._extra_families = extra_families
        #: (scope, dotted name) -> (source rank, binding node, origin or None) in source order;
        #: the scope is the function for plain names, the class for ``self.x``.
        self._bindings: _Bindings = {}
        #: The previous pass's final bindings, read when following arguments to parameters.
        self._settled: _Bindings | None = None
        self._resolving: set[cst.FunctionDef] = set()
        self._functions: dict[str, list[cst.FunctionDef]] | None = None
        self._returns: dict[cst.FunctionDef, list[cst.Return]] | None = None
        #: Grafted function of another module -> the analysis of it alone.
        self._foreign: dict[cst.FunctionDef, Bf16Origins] = {}
        #: Whether the bindings are collected (at the first question about a model's origin).
        self._collected = False

    def _collect_once(self) -> None:
        """The module's bindings, collected when a model's origin is first asked for: most
        modules an fp16 rule reads have no fp16 site, so nothing asks, and the collection (an
        origin for every assignment, through grafts and callers in other modules) was most of
        AMP002's and AMP008's time on real trees where neither found anything."""
        if self._collected:
            return
        self._collected = True
        # Two passes: a function defined above its caller sees the caller's models on the second.
        self._collect()
        self._settled = self._bindings
        self._bindings = {}
        self._collect()
        self._settled = self._bindings

    @property
    def paths(self) -> PathFacts:
        return self._paths

    # -- dtypes -----------------------------------------------------------------------------

    def dtype(self, node: cst.BaseExpression | None) -> str | None:
        """``bf16``/``fp16``/``fp32``/``auto`` for a literal dtype, None when not static."""
        if node is None:
            return None
        return literal_dtype(self._constants.resolve(node), self._aliases)

    def bound_value(self, node: cst.BaseExpression) -> cst.BaseExpression | None:
        """What a name its function (or the module) binds once is bound to."""
        return self._constants.bound_value(node)

    def checkpoint_name(self, node: cst.BaseExpression | None) -> str | None:
        if node is None:
            return None
        return string_value(self._constants.resolve(node))

    def cast_dtype(self, call: cst.Call) -> str | None:
        """The dtype a ``.to(...)`` call casts to, if static."""
        dtype_arg = keyword(call, "dtype")
        if dtype_arg is not None:
            return self.dtype(dtype_arg.value)
        for arg in call.args:
            if arg.keyword is None:
                found = self.dtype(arg.value)
                if found in (BF16, FP16, FP32):
                    return found
        return None

    # -- origins of expressions ---------------------------------------------------------------

    def loading_dtype_arg(self, call: cst.Call) -> DtypeArgument | None:
        """The dtype a ``from_pretrained`` call loads with: ``torch_dtype=``/``dtype=``, or
        that key of a ``**model_kwargs`` dict bound once (``dict(torch_dtype=...)`` or
        ``{"torch_dtype": ...}``), as TRL and many fine-tuning scripts pass it."""
        for name in _DTYPE_KEYWORDS:
            found = keyword(call, name)
            if found is not None:
                return DtypeArgument(found, name, found.value)
        for arg in call.args:
            if arg.star == "**":
                entry = self._dict_entry(self._constants.bound_value(arg.value))
                if entry is not None:
                    return entry
        return None

    def _dict_entry(self, value: cst.BaseExpression | None) -> DtypeArgument | None:
        if isinstance(value, cst.Call) and dotted_name(value.func) == "dict":
            for name in _DTYPE_KEYWORDS:
                found = keyword(value, name)
                if found is not None:
                    return DtypeArgument(found, name, found.value)
        if isinstance(value, cst.Dict):
            for element in value.elements:
                if isinstance(element, cst.DictElement):
                    key = string_value(element.key)
                    if key in _DTYPE_KEYWORDS:
                        return DtypeArgument(element, key, element.value)
        return None

    def family_origin(self, name_node: cst.BaseExpression | None) -> Bf16Origin | None:
        checkpoint = self.checkpoint_name(name_node)
        if checkpoint is None or self.target != BF16:
            return None
        family = bf16_family(checkpoint, self._extra_families)
        if family is None:
            return None
        declared = self._constants.describe(name_node) if name_node is not None else None
        where = f" (the default of {declared})" if declared else ""
        return Bf16Origin(
            name_node,  # type: ignore[arg-type]  # a checkpoint name was found, so name_node is set
            f"loads `{checkpoint}`{where}, a {family.name} checkpoint pretrained in bfloat16",
            family,
            "family",
        )

    def of_expression(self, node: cst.BaseExpression, at: cst.CSTNode) -> Bf16Origin | None:
        """The origin of the model ``node`` evaluates to, seen from the site ``at``."""
        self._collect_once()
        if isinstance(node, cst.Call):
            func = node.func
            if isinstance(func, cst.Attribute):
                method = func.attr.value
                if method == "from_pretrained":
                    return self._from_pretrained(node)
                if method in _CAST_METHODS:
                    return self._cast_origin(node, _CAST_METHODS[method])
                if method == "to":
                    cast = self.cast_dtype(node)
                    flagged = self._flag_cast(node) if cast is None else None
                    if flagged is not None:
                        return flagged
                    if cast in (BF16, FP16):
                        # A cast to the other half type is no origin (for AMP002 it is the
                        # fp16 site; the result is fp16 already).
                        return self._cast_origin(node, cast)
                    base = self.of_expression(func.value, at)
                    if cast == FP32 and base is not None and base.family is None:
                        return None
                    return base
                if method == "float":
                    base = self.of_expression(func.value, at)
                    return base if base is not None and base.family is not None else None
                if method in _KEEP_DTYPE_METHODS:
                    return self.of_expression(func.value, at)
            name = dotted_name(func)
            if name is not None and self.target == FP16 and last_part(name) in TRAINS_ADAPTERS_ONLY:
                return None
            if self._constructs_own_class(node):
                # `cls(encoder=base_model, ...)`: the module built around the model holds it.
                for arg in node.args:
                    origin = self.of_expression(arg.value, at)
                    if origin is not None:
                        return origin
                return None
            if name is not None and last_part(name) in MODEL_WRAPPERS:
                first = positional(node, 0) or keyword(node, "model")
                if first is not None:
                    return self.of_expression(first.value, at)
            return self.returned(node, None)
        if isinstance(node, cst.Subscript):
            return None
        name = dotted_name(node)
        if name is None:
            return None
        found = self.of_name(name, at)
        root, dot, _component = name.partition(".")
        if (
            found is None
            and dot
            and root not in ("self", "cls")
            and not any(bound == name for _scope, bound in self._bindings)
        ):
            # `transformer = pipe.transformer`: a component of a model or pipeline loaded in
            # bf16 is bf16 too (`from_pretrained(..., torch_dtype=...)` casts every component),
            # unless the component itself is bound here (`pipe.transformer = <fp32 model>`).
            return self.of_name(root, at)
        return found

    def _flag_cast(self, node: cst.Call) -> Bf16Origin | None:
        """``.to(ptdtype)`` where a flag's default (every run) or one of its choices (the runs
        that pick it) is the tracked dtype."""
        if self._choices is None or self.target != FP16:
            return None
        arguments = [a for a in node.args if a.keyword is None or a.keyword.value == "dtype"]
        for argument in arguments:
            # The flag's own words first ("when run with --mixed_precision fp16"), then the
            # test that picks the dtype.
            options = self._choices.of(argument.value)
            run = options.first(FP16) if options is not None else None
            if run is not None:
                description = f"cast to {DTYPE_WORDS[FP16]}"
                return Bf16Origin(node, description, kind="cast", when=run.when, facts=run.facts)
            picked = self._conditional_dtype(node, argument.value, "cast")
            if picked is not None:
                return picked
        return None

    def _conditional_dtype(
        self, node: cst.CSTNode, value: cst.BaseExpression, kind: str
    ) -> Bf16Origin | None:
        """(fp16 only.) A dtype picked by a conditional on a setting, fp16 in one arm and not in
        the other (``torch.float16 if cfg.use_fp16 else "auto"``): the same as casting under
        ``if cfg.use_fp16:``, an origin on the runs where the test says so. For bf16 such a
        pick is one switch driving both sides (AMP002 pairs nothing on it)."""
        if self.target != FP16:
            return None
        if isinstance(value, cst.Name):
            bound = self._constants.bound_value(value)
            if not isinstance(bound, cst.IfExp):
                return self._dtype_by_branch(node, value, kind)
            value = bound
        if not isinstance(value, cst.IfExp):
            return None
        arms = (self.dtype(value.body), self.dtype(value.orelse))
        if arms.count(FP16) != 1:
            return None
        holds = arms[0] == FP16
        facts = self._paths.facts.of_test(value.test, holds)
        return self._picked_fp16(node, value.test, holds, kind, facts) if facts else None

    def _dtype_by_branch(self, node: cst.CSTNode, name: cst.Name, kind: str) -> Bf16Origin | None:
        """(fp16 only.) A dtype name the branches of its function bind, fp16 in one arm only
        (tevatron's ``if training_args.bf16: torch_dtype = torch.bfloat16 elif
        training_args.fp16: torch_dtype = torch.float16 else: torch_dtype = torch.float32``): as
        the conditional above, an origin on the runs that take that arm."""
        function = self._index.enclosing_function(name)
        bindings = [
            assign
            for assign in self._index.nodes(cst.Assign)
            if self._index.enclosing_function(assign) is function
            and any(dotted_name(t.target) == name.value for t in assign.targets)
            and self._paths.precedes_in_source(assign, node)
        ]
        dtypes = [self.dtype(assign.value) for assign in bindings]
        if len(bindings) < 2 or None in dtypes or dtypes.count(FP16) != 1:
            return None
        chosen = bindings[dtypes.index(FP16)]
        facts = self._paths.conditions(chosen)
        arm = next(self._paths.arms(chosen), None)
        if not facts or arm is None:
            return None
        statement, branch = arm
        return self._picked_fp16(node, statement.test, branch is statement.body, kind, facts)

    def _picked_fp16(
        self,
        node: cst.CSTNode,
        test: cst.BaseExpression,
        holds: bool,
        kind: str,
        facts: frozenset[Fact],
    ) -> Bf16Origin:
        """An fp16 load or cast on the runs where ``test`` is ``holds``."""
        description = "loaded as float16" if kind == "loaded" else "cast to float16"
        when = f"when {self._test_is(test, holds)}"
        return Bf16Origin(node, description, kind=kind, when=when, facts=facts)

    def _test_is(self, test: cst.BaseExpression, holds: bool) -> str:
        """The runs where ``test`` evaluates to ``holds``, as a message says it (a quoted
        ``args.fp16`` followed by "is true")."""
        code = self._index.module.code_for_node(test)
        return f"`{code}` is {'true' if holds else 'false'}"

    def _cast_origin(self, node: cst.Call, dtype: str) -> Bf16Origin | None:
        if dtype != self.target:
            return None
        return Bf16Origin(node, f"cast to {DTYPE_WORDS[dtype]}", kind="cast")

    def returned(self, call: cst.Call, element: int | None) -> Bf16Origin | None:
        """The origin of what a same-module function returns (``element`` of a returned tuple):
        ``model, tok = load_model_and_tokenizer(name)``."""
        self._collect_once()
        callees = self._callees(call)
        if not callees:
            return self._foreign_returned(call, element)
        for function in callees:
            if function in self._resolving or len(self._resolving) >= MAX_CALL_DEPTH:
                continue
            self._resolving.add(function)
            try:
                for statement in self._returns_of(function):
                    value = statement.value
                    if element is not None:
                        if not isinstance(value, cst.Tuple) or element >= len(value.elements):
                            continue
                        value = value.elements[element].value
                    if value is None:
                        continue
                    origin = self.of_expression(value, statement)
                    if origin is not None:
                        return origin
            finally:
                self._resolving.discard(function)
        return None

    def _foreign_returned(self, call: cst.Call, element: int | None) -> Bf16Origin | None:
        """The origin of what a function of another project module returns (a ``build_model``
        in ``models.py`` that loads a bf16 checkpoint or calls ``.half()``), read by the same
        analysis run over that function alone; its nodes map to the other file."""
        context = context_of(self._index)
        if context is None or context.project is None or call in context.foreign:
            return None
        grafted = context.project.graft(context, call, _MODEL_WORDS)
        if grafted is None:
            return None
        origins = self._alone(context.foreign[grafted])
        for statement in origins._returns_of(grafted):
            value = statement.value
            if element is not None:
                if not isinstance(value, cst.Tuple) or element >= len(value.elements):
                    continue
                value = value.elements[element].value
            if value is not None:
                origin = origins.of_expression(value, statement)
                if origin is not None and origin.kind == FORWARDED:
                    origin = self._caller_dtype(call)
                if origin is not None:
                    return origins._only_on_runs(origin, value, statement, grafted)
        return None

    def _only_on_runs(
        self,
        origin: Bf16Origin,
        value: cst.BaseExpression,
        at: cst.CSTNode,
        function: cst.FunctionDef,
    ) -> Bf16Origin:
        """``origin`` of what ``function`` (of another module, analysed alone) returns, with
        the runs it holds on added to its ``when``: the returned name (or the model a
        ``cls(...)`` it returns is built around) is the tracked model in one arm of an ``if``
        only, and something else in the other (tevatron's builders wrap the fp16 base in
        LoRA adapters when ``model_args.lora`` is set). The test is the other module's, so it
        joins the message, not the facts compared here."""
        names = [value] if isinstance(value, cst.Name) else []
        if isinstance(value, cst.Call) and self._constructs_own_class(value):
            names = [a.value for a in value.args if isinstance(a.value, cst.Name)]
        for name in names:
            bindings = self._bindings.get((function, name.value), [])
            tracked = [node for _, node, found in bindings if found is not None]
            other = [node for _, node, found in bindings if found is None]
            if len(tracked) != 1 or not other:
                continue
            if not all(self._paths.exclusive(tracked[0], node) for node in other):
                continue
            arm = next(self._paths.arms(tracked[0]), None)
            if arm is None:
                continue
            statement, branch = arm
            runs = self._test_is(statement.test, branch is statement.body)
            where = f"{runs} in `{function.name.value}`"
            when = f"{origin.when} and {where}" if origin.when else f"when {where}"
            return replace(origin, when=when)
        return origin

    def _returns_of(self, function: cst.FunctionDef) -> list[cst.Return]:
        """The ``return`` statements of ``function`` itself (not of functions nested in it)."""
        if self._returns is None:
            self._returns = {}
            for statement in self._index.nodes(cst.Return):
                owner = self._index.enclosing_function(statement)
                if owner is not None:
                    self._returns.setdefault(owner, []).append(statement)
        return self._returns.get(function, [])

    def _callees(self, call: cst.Call) -> list[cst.FunctionDef]:
        """The functions of this module a call may run: ``f(...)`` a module-level function,
        ``self.f(...)`` a method of the caller's class."""
        if self._functions is None:
            self._functions = {}
            for function in self._index.nodes(cst.FunctionDef):
                self._functions.setdefault(function.name.value, []).append(function)
        func = call.func
        if isinstance(func, cst.Name):
            return [
                f
                for f in self._functions.get(func.value, [])
                if self._index.enclosing_class(f.body) is None
            ]
        if isinstance(func, cst.Attribute) and dotted_name(func.value) == "self":
            cls = self._index.enclosing_class(call)
            return [
                f
                for f in self._functions.get(func.attr.value, [])
                if cls is not None and self._index.enclosing_class(f.body) is cls
            ]
        return []

    def of_name(self, name: str, at: cst.CSTNode) -> Bf16Origin | None:
        self._collect_once()
        function = self._index.enclosing_function(at)
        order = self._index.order.get(at, len(self._index.order))
        # `model = model.half()`: the binding being evaluated does not exist yet.
        enclosing = {at, *self._index.ancestors(at)}
        if name.startswith("self."):
            return self._attribute_origin(name, at, function, order, enclosing)
        parameter = parameter_position(function, name) if function is not None else None
        for scope in (function, None):
            if scope is None and parameter is not None:
                # A parameter shadows the global: the callers say what it holds.
                return self._argument_origin(function, name, parameter)  # type: ignore[arg-type]  # a parameter was found, so function is set
            # A function body runs after the module-level code that binds its globals.
            limit = len(self._index.order) if scope is None and function is not None else order
            found: Bf16Origin | None = None
            seen = False
            for position, node, origin in self._bindings.get((scope, name), []):
                if (
                    position < limit
                    and node not in enclosing
                    and not self._paths.exclusive(node, at)
                    and not self._adapters_on_some_runs(node, enclosing)
                ):
                    found, seen = origin, True
            if seen:
                return found
        return None

    def _adapters_on_some_runs(self, node: cst.CSTNode, enclosing: set[cst.CSTNode]) -> bool:
        """``node`` wraps the fp16 model in peft adapters in an ``if`` arm that does not hold
        the site (``if train_config.use_peft: model = get_peft_model(model, ...)``): the runs
        that skip it train the fp16 model itself, so the origin before it still reaches the
        site (`Fp32Trainables.switched_off` says which runs, or keeps the site quiet)."""
        if self.target != FP16 or not isinstance(node, cst.Assign):
            return False
        value = node.value
        name = dotted_name(value.func) if isinstance(value, cst.Call) else None
        if name is None or not (
            last_part(name) in TRAINS_ADAPTERS_ONLY or name == "PeftModel.from_pretrained"
        ):
            return False
        return any(arm not in enclosing for _statement, arm in self._paths.arms(node))

    def _attribute_origin(
        self,
        name: str,
        at: cst.CSTNode,
        function: cst.FunctionDef | None,
        order: float,
        enclosing: set[cst.CSTNode],
    ) -> Bf16Origin | None:
        """``self.x``: the last binding before ``at`` in its own method; else one from another
        method of the class."""
        bindings = [
            (position, node, origin)
            for position, node, origin in self._bindings.get((self._class_of(at), name), [])
            if node not in enclosing and not self._paths.exclusive(node, at)
        ]
        here = [
            origin
            for position, node, origin in bindings
            if position < order and self._index.enclosing_function(node) is function
        ]
        if here:
            return here[-1]
        # Another method's binding: its call order is unknown, so only one that comes first in
        # the source or sits in `__init__` (which runs before any other method) is cited.
        for position, node, origin in bindings:
            owner = self._index.enclosing_function(node)
            if origin is None or owner is function:
                continue
            if position < order or (owner is not None and owner.name.value == "__init__"):
                return origin
        return None

    def _argument_origin(
        self, function: cst.FunctionDef, name: str, position: int
    ) -> Bf16Origin | None:
        """The origin of what this module's calls of ``function`` pass as parameter ``name``."""
        if function in self._resolving or len(self._resolving) >= MAX_CALL_DEPTH:
            return None
        self._resolving.add(function)
        saved = self._bindings
        if self._settled is not None:
            self._bindings = self._settled
        try:
            for call in self._calls_of(function):
                arg = keyword(call, name) or positional(call, position)
                if arg is not None:
                    origin = self.of_expression(arg.value, call)
                    if origin is not None:
                        return origin
            return self._passed_from_other_modules(function, name, position)
        finally:
            self._bindings = saved
            self._resolving.discard(function)

    def _passed_from_other_modules(
        self, function: cst.FunctionDef, name: str, position: int
    ) -> Bf16Origin | None:
        """The origin of what a function of another project module passes as parameter
        ``name`` (``train(model, args)`` called from ``main.py`` with a model it loaded as
        bf16), read by the same analysis run over the calling function alone."""
        context = context_of(self._index)
        if context is None or context.project is None or function in context.foreign:
            return None
        param = next(
            (
                p
                for p in (*function.params.params, *function.params.kwonly_params)
                if p.name.value == name
            ),
            function,
        )
        for call in context.project.calls_from_other_modules(context, function, param):
            arg = keyword(call, name) or positional(call, position)
            if arg is None:
                continue
            origin = self._alone(context.foreign[call]).of_expression(arg.value, call)
            if origin is not None and origin.kind != FORWARDED:
                return origin
        return None

    def _alone(self, site: ForeignSite) -> Bf16Origins:
        """The analysis of a function of another module, by itself (its own scopes, no
        project: what it shows of its own values)."""
        root = next(s for s in site.module.body if isinstance(s, cst.FunctionDef))
        if root not in self._foreign:
            alone = ModuleIndex(site.module)
            self._foreign[root] = Bf16Origins(
                alone,
                self._aliases,
                ModuleConstants(alone),
                extra_families=self._extra_families,
                target=self.target,
                forwards=True,
            )
        return self._foreign[root]

    def _calls_of(self, function: cst.FunctionDef) -> list[cst.Call]:
        """Calls ``f(...)`` of a plain function; ``self.f(...)`` of a method, in its class;
        ``C(...)`` of class ``C``'s ``__init__``."""
        cls = self._index.enclosing_class(function.body)
        if cls is None:
            return self._index.calls_named(function.name.value)
        if function.name.value == "__init__":
            return self._index.calls_named(cls.name.value)
        return [
            call
            for call in self._index.calls_named("." + function.name.value)
            if dotted_name(call.func.value) == "self"  # type: ignore[attr-defined]  # calls_named(".m") holds attribute calls only
            and self._index.enclosing_class(call) is cls
        ]

    def _from_pretrained(self, call: cst.Call) -> Bf16Origin | None:
        dtype_arg = self.loading_dtype_arg(call)
        found = self._loaded_with(dtype_arg, dtype_arg.node) if dtype_arg is not None else None
        if found is not None:
            return found
        family = self.family_origin(self.checkpoint_arg(call))
        if family is None and self._forwards and self._forwarded_kwargs(call):
            return Bf16Origin(call, "", kind=FORWARDED)
        return family

    def _loaded_with(self, dtype_arg: DtypeArgument, node: cst.CSTNode) -> Bf16Origin | None:
        """A load with the dtype ``dtype_arg`` gives, reported at ``node``: the tracked dtype,
        or (fp16) a conditional or branch that picks it on some runs."""
        if self.dtype(dtype_arg.value) == self.target:
            return Bf16Origin(node, f"loaded as {DTYPE_WORDS[self.target]}")
        return self._conditional_dtype(node, dtype_arg.value, "loaded")

    def _constructs_own_class(self, call: cst.Call) -> bool:
        """``cls(...)`` in a classmethod: a builder (tevatron's ``EncoderModel.build``) that
        wraps the model it loaded in an object of its class, whose parameters include the
        model's (an ``nn.Module`` registers a module stored as an attribute)."""
        function = self._index.enclosing_function(call)
        params = function.params.params if function is not None else ()
        return (
            isinstance(call.func, cst.Name)
            and call.func.value == "cls"
            and bool(params)
            and params[0].name.value == "cls"
        )

    def _forwarded_kwargs(self, call: cst.Call) -> bool:
        """``call`` passes on its function's own ``**kwargs`` (tevatron's ``build(cls,
        model_args, train_args, **hf_kwargs)`` loading with ``from_pretrained(name,
        **hf_kwargs)``): the dtype is whatever the caller puts there."""
        function = self._index.enclosing_function(call)
        star = function.params.star_kwarg if function is not None else None
        return star is not None and any(
            arg.star == "**" and dotted_name(arg.value) == star.name.value for arg in call.args
        )

    def _caller_dtype(self, call: cst.Call) -> Bf16Origin | None:
        """The load a function of another module makes with the ``**kwargs`` that ``call``
        hands it: the dtype ``call`` passes by keyword or in a ``**dict``, reported at
        ``call`` (the function's load is the same on every call)."""
        dtype_arg = self.loading_dtype_arg(call)
        origin = self._loaded_with(dtype_arg, call) if dtype_arg is not None else None
        if origin is None:
            return None
        callee = self._index.module.code_for_node(call.func)
        return replace(origin, description=f"{origin.description} by `{callee}`")

    def checkpoint_arg(self, call: cst.Call) -> cst.BaseExpression | None:
        """The checkpoint a ``from_pretrained`` call loads (positional, or by keyword as
        transformers and Unsloth's ``FastLanguageModel`` spell it)."""
        for name in CHECKPOINT_KEYWORDS:
            found = keyword(call, name)
            if found is not None:
                return found.value
        first = positional(call, 0)
        return first.value if first is not None else None

    # -- bindings ----------------------------------------------------------------------------

    def _class_of(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self._index.enclosing_class(node)

    def _bind(self, target: cst.BaseExpression, origin: Bf16Origin | None, at: cst.CSTNode) -> None:
        name = dotted_name(target)
        if name is None:
            return
        if name.startswith("self."):
            scope = self._class_of(at)
        else:
            scope = self._index.enclosing_function(at)
        self._bindings.setdefault((scope, name), []).append((self._index.order[at], at, origin))

    def _bind_part_cast(self, cast: cst.Call, origin: Bf16Origin | None) -> None:
        """``model[0].half()``, ``model.encoder.half()``: the models holding the part now hold
        fp16 parameters (an fp32 part cast, ``model.head.float()``, ends that)."""
        method = cast.func.attr.value  # type: ignore[attr-defined]  # callers pass `<part>.<cast>(...)` calls
        if method == "to" and self.cast_dtype(cast) is None:
            return  # `.to(device)` leaves the dtype as it was
        if origin is not None:
            code = self._index.module.code_for_node(cast)
            origin = Bf16Origin(cast, f"cast to float16 in part (`{code}`)", kind="cast")
        node = cast.func.value  # type: ignore[attr-defined]  # callers pass `<part>.<cast>(...)` calls
        while isinstance(node, cst.Attribute | cst.Subscript):
            node = node.value
            name = dotted_name(node)
            if name is not None and name != "self":
                self._bind(node, origin, cast)

    def _collect(self) -> None:
        events: list[cst.CSTNode] = list(self._index.nodes(cst.Assign))
        # In-place casts of a module as statements: `model.to(torch.bfloat16)`, `model.half()`.
        events += [
            call
            for call in self._index.nodes(cst.Call)
            if isinstance(self._index.parent.get(call), cst.Expr)
            and isinstance(call.func, cst.Attribute)
        ]
        events.sort(key=self._index.order.__getitem__)
        for node in events:
            if isinstance(node, cst.Call):
                func = node.func
                if func.attr.value in _IN_PLACE_CASTS:  # type: ignore[attr-defined]  # events keeps only attribute calls
                    # nn.Module casts in place: `model.half()` makes `model` itself fp16.
                    origin = self.of_expression(node, node)
                    self._bind(func.value, origin, node)  # type: ignore[attr-defined]  # events keeps only attribute calls
                    if self.target == FP16:
                        self._bind_part_cast(node, origin)
                continue
            value = node.value  # type: ignore[attr-defined]  # the other events are cst.Assign nodes
            for target in (t.target for t in node.targets):  # type: ignore[attr-defined]  # the other events are cst.Assign nodes
                if isinstance(target, cst.Tuple | cst.List) and isinstance(value, cst.Call):
                    name = dotted_name(value.func)
                    if name is not None and last_part(name) == "prepare":
                        # model, optimizer = accelerator.prepare(model, optimizer)
                        for element, arg in zip(target.elements, value.args, strict=False):
                            self._bind(element.value, self.of_expression(arg.value, node), node)
                    elif name is not None and last_part(name) == "from_pretrained":
                        # Unsloth: model, tokenizer = FastLanguageModel.from_pretrained(...)
                        if target.elements:
                            origin = self.of_expression(value, node)
                            self._bind(target.elements[0].value, origin, node)
                    else:
                        # model, tokenizer = load_model_and_tokenizer(...)
                        for position, element in enumerate(target.elements):
                            self._bind(element.value, self.returned(value, position), node)
                    continue
                self._bind(target, self.of_expression(value, node), node)
