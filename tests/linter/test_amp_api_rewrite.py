"""The rewrite of deprecated ``torch.cuda.amp`` uses into ``torch.amp`` (`linter._amp_api_rewrite`),
applied as the engine applies node replacements."""

from __future__ import annotations

import textwrap

import libcst as cst

from linter._amp_api_rewrite import direct_fix, import_fix
from linter._fix import SAFE, UNSAFE, Edit, NodeFix, apply_edits
from linter._rule import ModuleContext
from linter.model.syntax._bindings import bindings
from linter.model.syntax._dotted_names import ImportAliases
from linter.model.syntax._module_index import ModuleIndex, module_index
from linter.model.values._deprecated_amp_api import Use, deprecated_uses


def _applied(context: ModuleContext, fix: NodeFix) -> str:
    edits = []
    for old, new in fix.replacements:
        where = context.position(old)
        start, end = where.start, where.end
        text = context.module.code_for_node(new)
        edits.append(Edit(start.line, start.column + 1, end.line, end.column + 1, text))
    return apply_edits(context.source, sorted(edits))


def _context(source: str) -> ModuleContext:
    source = textwrap.dedent(source)
    return ModuleContext("t.py", source, cst.parse_module(source))


def _uses(
    context: ModuleContext,
) -> tuple[ModuleIndex, list[cst.Import | cst.ImportFrom], list[Use]]:
    index = module_index(context)
    statements: list[cst.Import | cst.ImportFrom] = [
        *index.nodes(cst.Import),
        *index.nodes(cst.ImportFrom),
    ]
    return index, statements, deprecated_uses(context.module, ImportAliases(statements), index)


def test_a_spelled_out_call_takes_the_device_first_and_keywords_for_positional_arguments() -> None:
    context = _context("import torch\nscaler = torch.cuda.amp.GradScaler(2.0**14, enabled=amp)\n")
    _index, _statements, (use,) = _uses(context)
    fix = direct_fix(use, SAFE)
    assert fix is not None
    assert _applied(context, fix) == (
        'import torch\nscaler = torch.amp.GradScaler("cuda", init_scale=2.0**14, enabled=amp)\n'
    )


def test_autocast_keeps_the_given_applicability_a_scaler_is_always_safe() -> None:
    context = _context("import torch\nwith torch.cuda.amp.autocast(False):\n    pass\n")
    _index, _statements, (use,) = _uses(context)
    fix = direct_fix(use, UNSAFE)
    assert fix is not None
    assert fix.applicability == UNSAFE
    assert 'torch.amp.autocast("cuda", enabled=False)' in _applied(context, fix)
    context = _context("import torch\ns = torch.cuda.amp.GradScaler()\n")
    _index, _statements, (use,) = _uses(context)
    fix = direct_fix(use, UNSAFE)
    assert fix is not None
    assert fix.applicability == SAFE


def test_a_splat_cannot_be_mapped_so_no_fix() -> None:
    context = _context("import torch\ns = torch.cuda.amp.GradScaler(*args)\n")
    _index, _statements, (use,) = _uses(context)
    assert direct_fix(use, SAFE) is None


def test_an_import_and_every_use_change_together_and_a_bare_decorator_gets_the_device() -> None:
    context = _context(
        """\
        from torch.cuda.amp import autocast, custom_fwd

        @custom_fwd
        def forward(ctx, x):
            with autocast(True):
                return x
        """
    )
    index, (statement,), uses = _uses(context)
    fix = import_fix(statement, uses, bindings(index), SAFE)
    assert fix is not None
    assert _applied(context, fix) == textwrap.dedent(
        """\
        from torch.amp import autocast, custom_fwd

        @custom_fwd(device_type="cuda")
        def forward(ctx, x):
            with autocast("cuda", enabled=True):
                return x
        """
    )


def test_no_import_fix_when_the_name_is_bound_twice_or_used_without_a_call() -> None:
    twice = _context(
        """\
        try:
            from torch.cuda.amp import autocast
        except ImportError:
            autocast = None
        with autocast():
            pass
        """
    )
    index, statements, uses = _uses(twice)
    (from_import,) = [s for s in statements if isinstance(s, cst.ImportFrom)]
    assert import_fix(from_import, uses, bindings(index), SAFE) is None
    checked = _context(
        "from torch.cuda.amp import GradScaler\nok = isinstance(s, GradScaler)\nGradScaler()\n"
    )
    index, (statement,), uses = _uses(checked)
    assert import_fix(statement, uses, bindings(index), SAFE) is None
