"""Uses of the deprecated ``torch.cuda.amp`` API (`linter.model.values._deprecated_amp_api`)."""

from __future__ import annotations

import textwrap

import libcst as cst

from linter._rule import ModuleContext
from linter.model.syntax._dotted_names import ImportAliases
from linter.model.syntax._module_index import module_index
from linter.model.values._deprecated_amp_api import (
    DEPRECATED,
    deprecated_imports,
    deprecated_uses,
    head_name,
    new_spelling,
)


def uses(source: str) -> list[tuple[int, str, bool]]:
    """(line, qualified name, whether it warns) per use."""
    source = textwrap.dedent(source)
    context = ModuleContext("t.py", source, cst.parse_module(source))
    index = module_index(context)
    aliases = ImportAliases(index.nodes(cst.Import) + index.nodes(cst.ImportFrom))
    return [
        (context.position(use.site).start.line, use.qualified, use.invoked)
        for use in deprecated_uses(context.module, aliases, index)
    ]


def test_the_table_holds_the_defining_submodules_with_the_same_replacement() -> None:
    assert (
        DEPRECATED["torch.cuda.amp.grad_scaler.GradScaler"]
        == (DEPRECATED["torch.cuda.amp.GradScaler"])
    )
    assert new_spelling("torch.cpu.amp.autocast") == 'torch.amp.autocast("cpu", ...)'
    assert new_spelling("torch.cuda.amp.custom_fwd") == ('torch.amp.custom_fwd(device_type="cuda")')


def test_uses_resolve_through_imports_and_plain_references_do_not_warn() -> None:
    assert uses(
        """
        import torch
        import torch.cuda.amp as amp
        from torch.cuda.amp import autocast as ac
        scaler = torch.cuda.amp.GradScaler()
        with ac():
            pass
        if func is torch.cuda.amp.autocast:
            pass
        s = amp.GradScaler(enabled=False)
        """
    ) == [
        (5, "torch.cuda.amp.GradScaler", True),
        (6, "torch.cuda.amp.autocast", True),
        (8, "torch.cuda.amp.autocast", False),
        (10, "torch.cuda.amp.GradScaler", True),
    ]


def test_a_look_alike_and_the_current_api_are_no_uses() -> None:
    assert (
        uses(
            """
        import torch
        from my.cuda.amp import autocast
        with autocast():
            pass
        scaler = torch.amp.GradScaler("cuda")
        """
        )
        == []
    )


def test_a_name_bound_to_a_deprecated_class_warns_where_it_is_called() -> None:
    assert uses(
        """
        import torch
        amp_autocast = torch.cuda.amp.autocast
        with amp_autocast():
            pass
        """
    ) == [(4, "torch.cuda.amp.autocast", True)]


def test_deprecated_imports_name_what_each_import_binds() -> None:
    def imported(text: str) -> tuple[str, ...]:
        statement = cst.ensure_type(cst.parse_statement(text), cst.SimpleStatementLine).body[0]
        assert isinstance(statement, cst.Import | cst.ImportFrom)
        return deprecated_imports(statement)

    assert imported("from torch.cuda.amp import GradScaler, autocast") == (
        "torch.cuda.amp.GradScaler",
        "torch.cuda.amp.autocast",
    )
    assert imported("import torch.cuda.amp as amp") == ("torch.cuda.amp",)
    assert imported("from torch.cuda import amp") == ("torch.cuda.amp",)
    assert imported("import torch.cuda.amp") == ()  # binds `torch`, reported at its uses
    assert imported("from torch.amp import GradScaler") == ()
    assert head_name(cst.parse_expression("th.cuda.amp.autocast")).value == "th"
