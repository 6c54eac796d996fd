"""AMP004 deprecated-amp-api: what it flags, what it leaves alone, and its torch.amp fix."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from rule_runner import run_rule

from linter import fix_source, lint_source
from linter.rules import DeprecatedAmpApi


def lines(source: str) -> list[int]:
    return [line for line, _col, _msg in run_rule(DeprecatedAmpApi, textwrap.dedent(source))]


def fixed(source: str) -> str:
    result = fix_source(textwrap.dedent(source), select=["AMP004"])
    return result.text


@pytest.mark.parametrize(
    "source",
    [
        "import torch\ns = torch.cuda.amp.GradScaler()\n",
        "import torch\nwith torch.cpu.amp.autocast():\n    pass\n",
        "import torch as th\ns = th.cuda.amp.GradScaler()\n",
        "import torch.cuda.amp\ns = torch.cuda.amp.GradScaler()\n",
        "from torch import cuda\ns = cuda.amp.GradScaler()\n",
    ],
    ids=["torch", "cpu", "torch-alias", "submodule-import", "from-torch-import-cuda"],
)
def test_spelled_out_calls_are_reported_where_called(source: str) -> None:
    assert lines(source) == [2]


@pytest.mark.parametrize(
    "source",
    [
        "from torch.cuda.amp import autocast\n\nwith autocast():\n    pass\n",
        "from torch.cuda.amp import GradScaler as GS\n\ns = GS()\n",
        "import torch.cuda.amp as amp\n\ns = amp.GradScaler()\n",
        "from torch.cuda import amp\n\ns = amp.GradScaler()\n",
        "from torch.cpu.amp import autocast\n\nwith autocast():\n    pass\n",
        "from torch.cuda.amp import custom_fwd\n\n@custom_fwd\ndef f(ctx, x):\n    return x\n",
    ],
    ids=["from-import", "alias", "module-alias", "from-torch-cuda-import-amp", "cpu", "decorator"],
)
def test_imported_names_are_reported_once_at_the_import(source: str) -> None:
    assert lines(source) == [1]


def test_the_import_finding_lists_every_use() -> None:
    source = "from torch.cuda.amp import GradScaler, autocast\ns = GradScaler()\n"
    source += "with autocast():\n    pass\n"
    (diagnostic,) = lint_source(source, select=["AMP004"])
    assert [r.line for r in diagnostic.related] == [2, 3]


@pytest.mark.parametrize(
    "source",
    [
        "from my.cuda.amp import autocast\nwith autocast():\n    pass\n",
        "import my\ns = my.cuda.amp.GradScaler()\n",
        "def autocast():\n    pass\nwith autocast():\n    pass\n",
        # The import is hidden by a local definition where the call is made.
        "from torch.cuda.amp import autocast\n\ndef f(autocast):\n    with autocast():\n"
        "        pass\n",
        "import torch\nwith torch.amp.autocast('cuda'):\n    pass\n",
        "import torch\nwith torch.autocast('cuda'):\n    pass\n",
        # References are not uses: dynamo compares functions against the deprecated classes.
        "import torch\nif func is torch.cuda.amp.autocast:\n    pass\n",
        "import torch\nx: torch.cuda.amp.GradScaler = make()\n",
        # Other torch.cuda.amp names are not deprecated aliases of torch.amp ones.
        "import torch\nok = torch.cuda.amp.common.amp_definitely_not_available()\n",
    ],
    ids=[
        "lookalike-package",
        "lookalike-root",
        "local-function",
        "shadowed-by-parameter",
        "torch.amp",
        "torch.autocast",
        "identity-check",
        "annotation",
        "other-name",
    ],
)
def test_lookalikes_and_current_api_are_not_reported(source: str) -> None:
    assert lines(source) == []


@pytest.mark.parametrize(
    "source",
    [
        # accelerate: the deprecated call only runs on torch < 2.3.
        "import torch\nif is_torch_version('>=', '2.3'):\n    s = torch.amp.GradScaler('cuda')\n"
        "else:\n    s = torch.cuda.amp.GradScaler()\n",
        # lightning
        "import torch\ns = torch.amp.GradScaler(device=d) if NEW else "
        "torch.cuda.amp.GradScaler()\n",
        # timm
        "import torch\ntry:\n    s = torch.amp.GradScaler(device=d)\nexcept (AttributeError, "
        "TypeError):\n    s = torch.cuda.amp.GradScaler()\n",
        "if NEW_TORCH:\n    from torch.amp import GradScaler\nelse:\n"
        "    from torch.cuda.amp import GradScaler\ns = GradScaler()\n",
    ],
    ids=["if-else", "conditional-expression", "try-except", "import-fallback"],
)
def test_compatibility_fallbacks_beside_the_current_api_are_not_reported(source: str) -> None:
    assert lines(source) == []


def test_a_fallback_that_is_still_the_deprecated_api_is_reported() -> None:
    source = """\
    try:
        from torch.cuda.amp import autocast
    except ImportError:
        autocast = None
    with autocast():
        pass
    """
    assert lines(source) == [2]
    (diagnostic,) = lint_source(textwrap.dedent(source), select=["AMP004"])
    assert diagnostic.fix is None


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (
            "import torch\ns = torch.cuda.amp.GradScaler()\n",
            'import torch\ns = torch.amp.GradScaler("cuda")\n',
        ),
        (
            "import torch\ns = torch.cuda.amp.GradScaler(2.0**14, 2.0, enabled=args.fp16)\n",
            'import torch\ns = torch.amp.GradScaler("cuda", init_scale=2.0**14, '
            "growth_factor=2.0, enabled=args.fp16)\n",
        ),
        (
            "import torch\nwith torch.cuda.amp.autocast(False, torch.bfloat16):\n    pass\n",
            'import torch\nwith torch.amp.autocast("cuda", enabled=False, dtype=torch.bfloat16):'
            "\n    pass\n",
        ),
        (
            "import torch\nwith torch.cpu.amp.autocast(dtype=torch.bfloat16):\n    pass\n",
            'import torch\nwith torch.amp.autocast("cpu", dtype=torch.bfloat16):\n    pass\n',
        ),
        (
            "import torch as th\ns = th.cuda.amp.GradScaler(**cfg)\n",
            'import torch as th\ns = th.amp.GradScaler("cuda", **cfg)\n',
        ),
        (
            "from torch.cuda.amp import GradScaler, autocast\ns = GradScaler()\n"
            "with autocast(enabled=amp):\n    pass\n",
            'from torch.amp import GradScaler, autocast\ns = GradScaler("cuda")\n'
            'with autocast("cuda", enabled=amp):\n    pass\n',
        ),
        (
            "from torch.cuda.amp import autocast as ac\n\n@ac()\ndef forward(x):\n    return x\n",
            'from torch.amp import autocast as ac\n\n@ac("cuda")\ndef forward(x):\n    return x\n',
        ),
        (
            "import torch.cuda.amp as amp, os\ns = amp.GradScaler()\n",
            'import torch.amp as amp, os\ns = amp.GradScaler("cuda")\n',
        ),
        (
            "from torch.cuda import amp\ns = amp.GradScaler(65536.0)\n",
            'from torch import amp\ns = amp.GradScaler("cuda", init_scale=65536.0)\n',
        ),
        (
            "from torch.cuda.amp import GradScaler\ns = GradScaler(\n    init_scale=1024,\n"
            "    growth_interval=100,\n)\n",
            'from torch.amp import GradScaler\ns = GradScaler(\n    "cuda",\n    init_scale=1024,\n'
            "    growth_interval=100,\n)\n",
        ),
    ],
    ids=[
        "scaler",
        "scaler-positional",
        "autocast-positional",
        "cpu",
        "double-star",
        "from-import",
        "decorator-call",
        "module-alias",
        "from-torch-cuda-import-amp",
        "multi-line",
    ],
)
def test_fix_rewrites_to_torch_amp(before: str, after: str) -> None:
    assert fixed(before) == after


def test_fix_of_custom_fwd_and_custom_bwd_decorators() -> None:
    before = """\
    import torch
    from torch.cuda.amp import custom_bwd, custom_fwd


    class ScaledMatmul(torch.autograd.Function):
        @staticmethod
        @custom_fwd(cast_inputs=torch.float32)
        def forward(ctx, a, b):
            return a @ b

        @staticmethod
        @custom_bwd
        def backward(ctx, grad):
            return grad, grad


    plain = custom_fwd(lambda ctx, x: x)
    """
    after = """\
    import torch
    from torch.amp import custom_bwd, custom_fwd


    class ScaledMatmul(torch.autograd.Function):
        @staticmethod
        @custom_fwd(device_type="cuda", cast_inputs=torch.float32)
        def forward(ctx, a, b):
            return a @ b

        @staticmethod
        @custom_bwd(device_type="cuda")
        def backward(ctx, grad):
            return grad, grad


    plain = custom_fwd(lambda ctx, x: x, device_type="cuda")
    """
    assert fixed(before) == textwrap.dedent(after)


def test_spelled_out_decorator_gets_the_device_keyword() -> None:
    before = "import torch\n\n@torch.cuda.amp.custom_fwd\ndef forward(ctx, x):\n    return x\n"
    after = 'import torch\n\n@torch.amp.custom_fwd(device_type="cuda")\ndef forward(ctx, x):\n'
    assert fixed(before) == after + "    return x\n"


@pytest.mark.parametrize(
    "source",
    [
        "import torch\ns = torch.cuda.amp.GradScaler(*args)\n",
        "import torch\ns = torch.cuda.amp.GradScaler(1.0, 2.0, 0.5, 100, True, 'extra')\n",
        # A use that is not a call would keep pointing at a different class.
        "from torch.cuda.amp import GradScaler\ns = GradScaler()\n"
        "assert isinstance(s, GradScaler)\n",
        # Another name from the module that torch.amp does not have.
        "from torch.cuda.amp import GradScaler, common\ns = GradScaler()\n",
        # Re-exported (listed in __all__): other modules would get the new signature.
        "from torch.cuda.amp import autocast\n__all__ = ['autocast']\nwith autocast():\n    pass\n",
    ],
    ids=["star-args", "too-many-args", "reference", "other-name", "reexport"],
)
def test_no_fix_where_the_meaning_could_change(source: str) -> None:
    (diagnostic,) = lint_source(source, select=["AMP004"])
    assert diagnostic.fix is None


def test_no_fix_in_a_package_init_whose_names_other_modules_import() -> None:
    source = "from torch.cuda.amp import autocast\nwith autocast():\n    pass\n"
    (diagnostic,) = lint_source(source, "pkg/__init__.py", select=["AMP004"])
    assert diagnostic.fix is None


def test_autocast_fix_is_unsafe_where_the_default_dtype_is_changed() -> None:
    source = (
        "import torch\ntorch.set_autocast_dtype('cuda', torch.bfloat16)\n"
        "with torch.cuda.amp.autocast():\n    pass\n"
    )
    (diagnostic,) = lint_source(source, select=["AMP004"])
    assert diagnostic.fix is not None
    assert diagnostic.fix.applicability == "unsafe"
    assert lint_source(source, select=["AMP004"], fix=True) == source


def test_fix_is_safe_and_applied_by_plain_fix() -> None:
    (diagnostic,) = lint_source(
        "import torch\ns = torch.cuda.amp.GradScaler()\n", select=["AMP004"]
    )
    assert diagnostic.fix is not None
    assert diagnostic.fix.applicability == "safe"


def test_fixed_file_is_clean_and_a_second_fix_is_a_no_op() -> None:
    source = textwrap.dedent(
        """\
        import torch
        from torch.cuda.amp import GradScaler, autocast

        scaler = GradScaler()
        for x in loader:
            with autocast():
                loss = model(x)
            with torch.cuda.amp.autocast(enabled=False):
                extra = head(x)
        """
    )
    once = fix_source(source, select=["AMP004"])
    assert len(once.fixed) == 2
    assert not once.notes
    assert lint_source(once.text, select=["AMP004"]) == []
    assert fix_source(once.text, select=["AMP004"]).text == once.text


def test_noqa_on_the_import_keeps_it() -> None:
    source = "from torch.cuda.amp import autocast  # noqa: AMP004\nwith autocast():\n    pass\n"
    assert lint_source(source, select=["AMP004"]) == []
    assert lint_source(source, select=["AMP004"], fix=True) == source


def test_noqa_on_a_call_keeps_it() -> None:
    source = "import torch\ns = torch.cuda.amp.GradScaler()  # noqa: AMP004\n"
    assert lint_source(source, select=["AMP004"], fix=True) == source


def test_files_without_the_deprecated_namespaces_are_not_parsed() -> None:
    assert not DeprecatedAmpApi.wants("import torch\nscaler = torch.amp.GradScaler('cuda')\n")
    assert DeprecatedAmpApi.wants("from torch.cuda import amp\n")
    assert DeprecatedAmpApi.wants("torch.cpu.amp.autocast()")


def test_fixed_example_runs_on_cpu_without_deprecation_warnings(tmp_path) -> None:
    pytest.importorskip("torch")
    example = Path(__file__).resolve().parents[3] / "examples" / "deprecated_cuda_amp_api.py"
    result = fix_source(example.read_text(encoding="utf-8"), select=["AMP004"])
    assert len(result.fixed) == 2
    script = tmp_path / example.name
    script.write_text(result.text, encoding="utf-8")
    run = subprocess.run(
        [sys.executable, "-W", "error::FutureWarning", str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("eval loss")


# -- issue 20: old-torch branches, submodule spellings, names bound to the deprecated classes --


@pytest.mark.parametrize(
    "test",
    [
        "version.parse(torch.__version__) < version.parse('2.4')",
        "TORCH_VERSION < (1, 10)",
        "torch_ver <= '2.3'",
        "(2, 4) > installed_torch_version",
        "is_torch_version('<', '2.4')",
        "not is_torch_greater_or_equal('2.4')",
    ],
)
def test_the_old_torch_arm_of_a_version_test_is_not_reported(test: str) -> None:
    source = f"""\
    import torch
    if {test}:
        scaler = torch.cuda.amp.GradScaler()
    else:
        scaler = make_scaler()
    """
    assert lines(source) == []


@pytest.mark.parametrize(
    "test",
    ["version.parse(torch.__version__) >= version.parse('2.4')", "is_torch_version('>=', '2.4')"],
)
def test_the_new_torch_arm_of_a_version_test_is_reported(test: str) -> None:
    source = f"""\
    import torch
    if {test}:
        scaler = torch.cuda.amp.GradScaler()
    else:
        scaler = make_scaler()
    """
    assert lines(source) == [3]


def test_the_safe_fix_leaves_the_old_torch_branch_alone() -> None:
    source = """\
    import torch
    if TORCH_VERSION < (2, 4):
        scaler = torch.cuda.amp.GradScaler()
    else:
        scaler = torch.GradScaler("cuda")
    with torch.cuda.amp.autocast():
        pass
    """
    assert lines(source) == [6]
    after = fixed(source)
    assert "scaler = torch.cuda.amp.GradScaler()" in after
    assert 'with torch.amp.autocast("cuda"):' in after


def test_an_import_fallback_from_torch_is_not_reported() -> None:
    source = """\
    try:
        from torch import GradScaler
    except ImportError:
        from torch.cuda.amp import GradScaler
    scaler = GradScaler("cuda")
    """
    assert lines(source) == []


@pytest.mark.parametrize(
    ("source", "after"),
    [
        (
            "from torch.cuda.amp.grad_scaler import GradScaler\ns = GradScaler()\n",
            'from torch.amp import GradScaler\ns = GradScaler("cuda")\n',
        ),
        (
            "import torch as th\nwith th.cuda.amp.autocast_mode.autocast(True):\n    pass\n",
            'import torch as th\nwith th.amp.autocast("cuda", enabled=True):\n    pass\n',
        ),
        (
            "import torch\ns = torch.cpu.amp.grad_scaler.GradScaler()\n",
            'import torch\ns = torch.amp.GradScaler("cpu")\n',
        ),
    ],
)
def test_submodule_spellings_are_reported_and_fixed(source: str, after: str) -> None:
    assert len(lines(source)) == 1
    assert fixed(source) == after


@pytest.mark.parametrize(
    ("binding", "call"),
    [
        ("ac = torch.cuda.amp.autocast", "ac()"),
        ("amp_ctx = torch.cuda.amp.autocast if use_amp else contextlib.nullcontext", "amp_ctx()"),
        ("fp16 = functools.partial(torch.cuda.amp.autocast, dtype=torch.float16)", "fp16()"),
    ],
)
def test_a_name_bound_to_the_deprecated_class_is_reported_where_called(
    binding: str, call: str
) -> None:
    source = f"import contextlib, functools, torch\n{binding}\n\n\nwith {call}:\n    pass\n"
    assert lines(source) == [5]
    (diagnostic,) = lint_source(source, select=["AMP004"])
    assert f"called as `{call}`" in diagnostic.message
    assert "line 2" in diagnostic.message
    assert diagnostic.fix is None  # the binding and its calls would have to change together


def test_a_name_bound_to_the_deprecated_class_but_never_called_is_not_reported() -> None:
    assert lines("import torch\nLEGACY = torch.cuda.amp.autocast\nok = f is LEGACY\n") == []
