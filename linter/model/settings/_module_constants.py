"""Names a module binds once to a value, and what a run without an environment variable gets.

A model name, a checkpoint path or a precision string is often a constant
(``MODEL_NAME = "google/gemma-3-1b-it"``, ``checkpoint = os.getenv("MODEL", "...")``) or a flag's
declared default; the settings layer resolves such names so that the values above can read what
they hold.
"""

from __future__ import annotations

import libcst as cst

from linter.model.settings._command_line import DeclaredSettings
from linter.model.syntax import (
    ModuleIndex,
    dotted_name,
    keyword,
    parameter_position,
    positional,
    string_value,
)

__all__ = ["ModuleConstants"]


#: Environment lookups whose second argument is the value a run without the variable gets.
_ENVIRONMENT_LOOKUPS = frozenset({"os.getenv", "os.environ.get", "getenv", "environ.get"})


def _environment_default(node: cst.BaseExpression) -> cst.BaseExpression | None:
    """``"google/gemma-3-1b-it"`` of ``os.getenv("MODEL", "google/gemma-3-1b-it")``."""
    if not isinstance(node, cst.Call) or dotted_name(node.func) not in _ENVIRONMENT_LOOKUPS:
        return None
    default = keyword(node, "default") or positional(node, 1)
    if default is None or not isinstance(default.value, cst.SimpleString):
        return None
    return default.value


class ModuleConstants:
    """Names bound once to a value: ``MODEL_NAME = "google/..."`` at module level, or
    ``checkpoint = "google/mt5-small"`` inside the function that loads it.

    A function-local name counts only when that function assigns it exactly once and to a string
    literal (so a name rebound in a branch, or computed at run time, stays unresolved).
    """

    def __init__(self, index: ModuleIndex, settings: DeclaredSettings | None = None) -> None:
        self._index = index
        self._settings = settings or DeclaredSettings(index)
        self._passed: set[tuple[str, str]] | None = None
        self._resolving: set[cst.FunctionDef] = set()
        counts: dict[tuple[cst.CSTNode | None, str], int] = {}
        values: dict[tuple[cst.CSTNode | None, str], cst.BaseExpression] = {}
        any_values: dict[tuple[cst.CSTNode | None, str], cst.BaseExpression] = {}
        for node in index.nodes(cst.Assign):
            for target in node.targets:
                name = dotted_name(target.target)
                if name is None:
                    continue
                # Module-level names are counted over the whole module, as before.
                counts[(None, name)] = counts.get((None, name), 0) + 1
                value = node.value
                if isinstance(index.parent.get(index.parent.get(node)), cst.Module):  # type: ignore[arg-type]  # parent.get(None) is None, a node with no parent
                    values[(None, name)] = value
                    continue
                function = index.enclosing_function(node)
                if function is None:
                    continue
                key = (function, name)
                counts[key] = counts.get(key, 0) + 1
                any_values[key] = value
                if isinstance(value, cst.SimpleString | cst.ConcatenatedString) or (
                    _environment_default(value) is not None
                ):
                    values[key] = value
        #: (function or None for the module, name) -> value expression, for names bound once.
        self.values = {key: value for key, value in values.items() if counts[key] == 1}
        #: ...and for function-local names bound once to anything (a kwargs dict).
        self._bound_once = {**self.values}
        self._bound_once.update(
            (key, value) for key, value in any_values.items() if counts[key] == 1
        )

    def resolve(self, node: cst.BaseExpression) -> cst.BaseExpression:
        """The value a name or setting stands for (its literal, or the default of
        ``os.environ.get("MODEL", "google/...")``); ``node`` itself when unknown."""
        resolved = self._resolve(node)
        return _environment_default(resolved) or resolved

    def _resolve(self, node: cst.BaseExpression) -> cst.BaseExpression:
        if isinstance(node, cst.Name):
            function = self._index.enclosing_function(node)
            if function is not None and (function, node.value) in self.values:
                return self.values[(function, node.value)]
            if function is not None:
                default = self._parameter_default(function, node.value)
                if default is not None:
                    return default
                passed = self._passed_argument(function, node.value)
                if passed is not None:
                    return passed
            if (None, node.value) in self.values:
                return self.values[(None, node.value)]
        elif isinstance(node, cst.Attribute):
            setting = self._settings.of(node)
            if setting is not None and setting.default is not None:
                return setting.default
        return node

    def _passed_argument(self, function: cst.FunctionDef, name: str) -> cst.BaseExpression | None:
        """What this module's calls pass as parameter ``name`` when they all pass the same
        resolvable value (``Summarizer(args.model)`` for ``__init__(self, name)``)."""
        position = parameter_position(function, name)
        if position is None or function in self._resolving or len(self._resolving) >= 3:
            return None
        cls = self._index.enclosing_class(function.body)
        callee = cls.name.value if cls is not None and function.name.value == "__init__" else None
        if cls is None:
            callee = function.name.value
        if callee is None:
            return None
        self._resolving.add(function)
        try:
            values = set()
            found: cst.BaseExpression | None = None
            for call in self._index.nodes(cst.Call):
                if dotted_name(call.func) != callee:
                    continue
                arg = keyword(call, name) or positional(call, position)
                if arg is None:
                    continue
                resolved = self.resolve(arg.value)
                text = string_value(resolved)
                if text is None:
                    return None
                values.add(text)
                found = resolved
            return found if len(values) == 1 else None
        finally:
            self._resolving.discard(function)

    def bound_value(self, node: cst.BaseExpression) -> cst.BaseExpression | None:
        """The expression a name is bound to, when its function (or the module) binds it
        exactly once: ``model_kwargs`` of ``model_kwargs = dict(torch_dtype=...)``."""
        if not isinstance(node, cst.Name):
            return None
        function = self._index.enclosing_function(node)
        for key in ((function, node.value), (None, node.value)):
            if key in self._bound_once:
                return self._bound_once[key]
        return None

    def describe(self, node: cst.BaseExpression) -> str | None:
        """Where a default that `resolve` used was declared (``--base_model``, ``parameter
        `name```); None for a literal or a plain constant."""
        if isinstance(node, cst.Attribute):
            setting = self._settings.of(node)
            if setting is not None and setting.default is not None:
                return setting.flag if setting.flag.startswith("--") else f"`{setting.flag}`"
        if isinstance(node, cst.Name):
            function = self._index.enclosing_function(node)
            if (
                function is not None
                and (function, node.value) not in self.values
                and self._parameter_default(function, node.value) is not None
            ):
                return f"parameter `{node.value}`"
        return None

    def _parameter_default(self, function: cst.FunctionDef, name: str) -> cst.BaseExpression | None:
        """``def main(base_model="google/gemma-3-1b-it")``: the default, when no call in this
        module passes that parameter (else what it holds depends on the caller)."""
        params = function.params
        for param in (*params.params, *params.kwonly_params):
            if param.name.value != name or param.default is None:
                continue
            if (function.name.value, name) in self._passed_parameters():
                return None
            return param.default
        return None

    def _passed_parameters(self) -> set[tuple[str, str]]:
        """(function name, parameter) pairs some call of this module may pass a value to."""
        if self._passed is None:
            functions = {f.name.value: f for f in self._index.nodes(cst.FunctionDef)}
            passed: set[tuple[str, str]] = set()
            for call in self._index.nodes(cst.Call):
                func = call.func
                callee = func.value if isinstance(func, cst.Name) else None
                if isinstance(func, cst.Attribute):
                    callee = func.attr.value
                function = functions.get(callee)  # type: ignore[arg-type]  # get(None) is None: a call that is no name
                if function is None:
                    continue
                names = [
                    p.name.value for p in (*function.params.posonly_params, *function.params.params)
                ]
                if names and names[0] in ("self", "cls") and isinstance(func, cst.Attribute):
                    names = names[1:]
                for arg in call.args:
                    if arg.star:
                        passed.update((callee, n) for n in names)  # type: ignore[misc]  # callee is a str here: functions.get found it
                    elif arg.keyword is not None:
                        passed.add((callee, arg.keyword.value))  # type: ignore[arg-type]  # callee is a str here: functions.get found it
                positional_count = sum(1 for a in call.args if a.keyword is None and not a.star)
                passed.update((callee, n) for n in names[:positional_count])  # type: ignore[misc]  # callee is a str here: functions.get found it
            self._passed = passed
        return self._passed
