"""Values a script declares for its settings: argparse flags and dataclass-style fields.

``parser.add_argument("--base_model", default="google/gemma-3-1b-it")`` makes ``args.base_model``
that checkpoint unless the user says otherwise; ``choices=["no", "fp16", "bf16"]`` says which
values a run may take. Hugging Face scripts declare the same through dataclass fields
(``model_name_or_path: str = field(default="...")``) read by ``HfArgumentParser``.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from linter.model.syntax import ModuleIndex, argument_dest, dotted_name


@dataclass(frozen=True, slots=True)
class Setting:
    """One declared setting."""

    #: The flag as the user types it (``--mixed_precision``), or the field name.
    flag: str
    #: The default value's expression, if any.
    default: cst.BaseExpression | None
    #: The allowed string values, when the declaration lists them.
    choices: tuple[str, ...] | None
    #: The ``add_argument(...)`` call or the field that declares it.
    declaration: cst.CSTNode | None = None


def _keyword(call: cst.Call, name: str) -> cst.BaseExpression | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value
    return None


def _choices(node: cst.BaseExpression | None) -> tuple[str, ...] | None:
    if not isinstance(node, cst.List | cst.Tuple | cst.Set):
        return None
    values = []
    for element in node.elements:
        value = element.value
        if not isinstance(value, cst.SimpleString) or not isinstance(value.evaluated_value, str):
            return None
        values.append(value.evaluated_value)
    return tuple(values)


def _flag_text(call: cst.Call) -> str | None:
    for arg in call.args:
        value = arg.value
        if arg.keyword is None and isinstance(value, cst.SimpleString):
            text = value.evaluated_value
            if isinstance(text, str) and text.startswith("--"):
                return text
    return None


class DeclaredSettings:
    """The module's argparse flags and class-level field defaults, by attribute name.

    A name declared more than once (two parsers, two dataclasses) with different defaults is
    left out: which one a given ``args`` holds is not known statically.
    """

    def __init__(self, index: ModuleIndex) -> None:
        found: dict[str, list[Setting]] = {}
        for call in index.nodes(cst.Call):
            func = call.func
            if not isinstance(func, cst.Attribute) or func.attr.value != "add_argument":
                continue
            dest = argument_dest(call)
            if dest is None:
                continue
            flag = _flag_text(call) or dest
            default = _keyword(call, "default")
            action = _keyword(call, "action")
            if default is None and isinstance(action, cst.SimpleString):
                if action.evaluated_value == "store_true":
                    default = cst.Name("False")
                elif action.evaluated_value == "store_false":
                    default = cst.Name("True")
            choices = _choices(_keyword(call, "choices"))
            found.setdefault(dest, []).append(Setting(flag, default, choices, call))
        for node in index.nodes(cst.AnnAssign):
            if index.enclosing_function(node) is not None:
                continue
            if not isinstance(index.parent.get(index.parent.get(node)), cst.IndentedBlock):  # type: ignore[arg-type]  # parent.get(None) is None, a node with no parent
                continue
            name = dotted_name(node.target)
            value = node.value
            if name is None or "." in name or value is None:
                continue
            if isinstance(value, cst.Call) and dotted_name(value.func) in (
                "field",
                "dataclasses.field",
            ):
                value = _keyword(value, "default")
            found.setdefault(name, []).append(Setting(name, value, None, node))
        #: attribute name -> its one declaration.
        self.settings: dict[str, Setting] = {}
        for name, settings in found.items():
            texts = {_code(s.default) for s in settings}
            if len(texts) == 1:
                self.settings[name] = settings[0]

    def of(self, node: cst.BaseExpression) -> Setting | None:
        """The setting ``args.name`` (any receiver but ``self``) reads, if declared here."""
        name = dotted_name(node)
        if name is None or "." not in name or name.startswith("self."):
            return None
        return self.settings.get(name.rpartition(".")[2])


def _code(node: cst.BaseExpression | None) -> str:
    return "" if node is None else cst.Module([]).code_for_node(node)
