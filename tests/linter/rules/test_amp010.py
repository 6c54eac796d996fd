"""AMP010 grad-scaler-with-bf16-autocast: autocast dtypes, conditional scalers, messages."""

from __future__ import annotations

import runpy
import textwrap
from pathlib import Path

import pytest
from rule_runner import run_rule, run_rule_related

from linter.rules import GradScalerWithBf16Autocast, GradScalerWithFp16Params


def lines(source: str) -> list[int]:
    found = run_rule(GradScalerWithBf16Autocast, textwrap.dedent(source))
    return [line for line, _col, _msg in found]


def program(autocast: str, scaler: str = 'torch.amp.GradScaler("cuda")', setup: str = "") -> str:
    """Scaler on line 3 (plus the lines of ``setup``), the autocast in the loop below it."""
    return (
        f"import torch\n{setup}\nscaler = {scaler}\nfor batch in loader:\n"
        f"    with {autocast}:\n        loss = model(batch).loss\n"
        "    scaler.scale(loss).backward()\n    scaler.step(optimizer)\n    scaler.update()\n"
    )


def scaler_line(setup: str = "") -> int:
    return 3 + setup.count("\n")


@pytest.mark.parametrize(
    "autocast",
    [
        'torch.autocast("cuda", dtype=torch.bfloat16)',
        'torch.autocast(device_type="cuda", dtype=torch.bfloat16)',
        'torch.amp.autocast("cuda", torch.bfloat16)',
        "torch.cuda.amp.autocast(dtype=torch.bfloat16)",
        "torch.cuda.amp.autocast(True, torch.bfloat16)",
        "torch.cpu.amp.autocast()",
        'torch.autocast("cpu")',
        'torch.autocast(device_type="cpu", enabled=args.amp)',
        'torch.autocast("hpu")',
    ],
)
def test_bf16_autocast_spellings(autocast: str) -> None:
    assert lines(program(autocast)) == [scaler_line()]


@pytest.mark.parametrize(
    "setup",
    [
        "AMP_DTYPE = torch.bfloat16",
        "BF16 = torch.bfloat16\nAMP_DTYPE = BF16",
        "AMP_DTYPE: torch.dtype = torch.bfloat16",
        "AMP_DTYPE = torch.bfloat16 if fast else torch.bfloat16",
    ],
    ids=["constant", "chain", "annotated", "same-both-arms"],
)
def test_dtype_names_bound_only_to_bf16(setup: str) -> None:
    source = program('torch.autocast("cuda", dtype=AMP_DTYPE)', setup=setup)
    assert lines(source) == [scaler_line(setup)]


def test_dtype_held_by_a_self_attribute_set_once() -> None:
    source = """\
    import torch

    class Trainer:
        def __init__(self):
            self.amp_dtype = torch.bfloat16
            self.scaler = torch.amp.GradScaler("cuda")

        def step(self, batch):
            with torch.autocast("cuda", dtype=self.amp_dtype):
                loss = self.model(batch).loss
            self.scaler.scale(loss).backward()
    """
    assert lines(source) == [6]


def test_import_aliases() -> None:
    source = """\
    import torch as T
    from torch import autocast as ac
    from torch.amp import GradScaler as GS

    scaler = GS("cuda")
    with ac("cuda", dtype=T.bfloat16):
        loss = model(x)
    scaler.scale(loss).backward()
    """
    assert lines(source) == [5]


@pytest.mark.parametrize(
    ("autocast", "setup"),
    [
        ('torch.autocast("cuda", dtype=torch.float16)', ""),
        ('torch.autocast("cuda")', ""),
        ("torch.cuda.amp.autocast()", ""),
        ("torch.autocast(device.type)", ""),
        ('torch.autocast("xpu")', ""),
        ('torch.autocast("cuda", dtype=amp_dtype)', ""),
        ('torch.autocast("cuda", dtype=ptdtype)', 'ptdtype = {"bf16": torch.bfloat16}[args.dtype]'),
        ('torch.autocast("cuda", dtype=dt)', "dt = torch.bfloat16\ndt = pick(dt)"),
        ('torch.autocast("cuda", dtype=dt)', "for dt in dtypes:\n    pass"),
        ('torch.autocast("cuda", dtype=args.dtype)', ""),
        ('torch.autocast("cuda", **amp_kwargs)', ""),
        ("accelerator.autocast()", ""),
        ("maybe_autocast(model)", ""),
        ("self.autocast_smart_context_manager()", ""),
    ],
)
def test_autocasts_whose_dtype_the_file_does_not_show_are_not_bf16(autocast, setup) -> None:
    assert lines(program(autocast, setup=setup)) == []


def test_dtype_parameter_is_not_static() -> None:
    source = """\
    import torch

    def train(model, loader, amp_dtype=torch.bfloat16):
        scaler = torch.amp.GradScaler("cuda")
        for batch in loader:
            with torch.autocast("cuda", dtype=amp_dtype):
                loss = model(batch).loss
            scaler.scale(loss).backward()
    """
    assert lines(source) == []


def test_one_unknown_autocast_among_bf16_ones_is_enough_to_stay_silent() -> None:
    source = program('torch.autocast("cuda", dtype=torch.bfloat16)') + (
        "ctx = functools.partial(torch.autocast, device_type='cuda')\n"
    )
    assert lines(source) == []


def test_a_changed_default_autocast_dtype_makes_defaults_unknown() -> None:
    setup = 'torch.set_autocast_dtype("cpu", torch.float16)'
    assert lines(program('torch.autocast("cpu")', setup=setup)) == []


def test_a_disabled_autocast_does_not_count() -> None:
    source = program('torch.autocast("cuda", dtype=torch.bfloat16)') + (
        "with torch.autocast('cuda', enabled=False):\n    fp32_head(loss)\n"
    )
    assert lines(source) == [3]


def test_no_autocast_no_finding() -> None:
    assert lines("import torch\nscaler = torch.amp.GradScaler('cuda')\n") == []


@pytest.mark.parametrize(
    ("scaler", "reported"),
    [
        ('torch.amp.GradScaler("cuda", enabled=True)', True),
        ('torch.amp.GradScaler("cuda", enabled=args.amp)', True),
        ('torch.amp.GradScaler("cuda", enabled=use_bf16)', True),
        ('torch.amp.GradScaler("cuda", enabled=torch.cuda.is_available())', True),
        ('torch.amp.GradScaler("cuda", enabled=False)', False),
        ('torch.amp.GradScaler("cuda", enabled=args.fp16)', False),
        ('torch.amp.GradScaler("cuda", enabled=not args.bf16)', False),
        ('torch.amp.GradScaler("cuda", enabled=(dtype == "float16"))', False),
        ('torch.amp.GradScaler("cuda", enabled=amp_dtype == torch.float16)', False),
        ('torch.amp.GradScaler("cuda", enabled=cfg.use_grad_scaler)', False),
        ("torch.cuda.amp.GradScaler(2.0**16, 2.0, 0.5, 2000, use_fp16)", False),
        ('torch.amp.GradScaler("cuda", 2.0**16, 2.0, 0.5, 2000, False)', False),
        ("torch.amp.GradScaler(**scaler_kwargs)", False),
    ],
)
def test_enabled_switches(scaler: str, reported: bool) -> None:
    source = program('torch.autocast("cuda", dtype=torch.bfloat16)', scaler=scaler)
    assert lines(source) == ([3] if reported else [])


@pytest.mark.parametrize(
    ("branch", "reported"),
    [
        ("if args.fp16:", False),
        ("if amp_dtype == torch.float16:", False),
        ('if precision == "16-mixed":', False),
        ("if not args.bf16:", False),
        ("if args.bf16:", True),
        ("if torch.cuda.is_available():", True),
    ],
)
def test_scaler_created_under_a_branch(branch: str, reported: bool) -> None:
    source = f"""\
import torch

{branch}
    scaler = torch.amp.GradScaler("cuda")
with torch.autocast("cuda", dtype=torch.bfloat16):
    loss = model(x)
"""
    assert lines(source) == ([4] if reported else [])


def test_else_arm_of_a_bf16_switch_is_for_another_precision() -> None:
    source = """\
    import torch

    if args.bf16:
        scaler = None
    else:
        scaler = torch.amp.GradScaler("cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(x)
    """
    assert lines(source) == []


@pytest.mark.parametrize(
    ("value", "reported"),
    [
        ('torch.amp.GradScaler("cuda") if use_fp16 else None', False),
        ('None if args.bf16 else torch.amp.GradScaler("cuda")', False),
        ('torch.amp.GradScaler("cuda") if use_bfloat16 else None', True),
        ('args.fp16 and torch.amp.GradScaler("cuda")', False),
    ],
)
def test_scaler_chosen_in_an_expression(value: str, reported: bool) -> None:
    source = program('torch.autocast("cuda", dtype=torch.bfloat16)', scaler=value)
    assert lines(source) == ([3] if reported else [])


def test_scaler_used_only_under_an_fp16_branch() -> None:
    source = """\
    import torch

    scaler = torch.amp.GradScaler("cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(x)
    if amp_dtype == torch.float16:
        scaler.scale(loss).backward()
    """
    assert lines(source) == []


@pytest.mark.parametrize(
    "elsewhere",
    [
        "model = model.half()",
        "x = torch.zeros(3, dtype=torch.float16)",
        'args = TrainingArguments("out", fp16=use_fp16)',
        'trainer = L.Trainer(precision="16-mixed")',
    ],
)
def test_a_file_that_asks_for_fp16_another_way_is_not_reported(elsewhere: str) -> None:
    source = program('torch.autocast("cuda", dtype=torch.bfloat16)') + elsewhere + "\n"
    assert lines(source) == []


def test_nanogpt_shape_is_not_reported() -> None:
    source = """\
    import torch

    dtype = "bfloat16" if torch.cuda.is_bf16_supported() else "float16"
    ptdtype = {"bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
    ctx = torch.amp.autocast(device_type="cuda", dtype=ptdtype)
    scaler = torch.cuda.amp.GradScaler(enabled=(dtype == "float16"))
    """
    assert lines(source) == []


def test_message_and_related_autocasts() -> None:
    source = program('torch.autocast("cuda", dtype=torch.bfloat16)') + (
        "with torch.cpu.amp.autocast():\n    evaluate(model)\n"
    )
    [(_line, _col, message)] = run_rule(GradScalerWithBf16Autocast, source)
    assert message.startswith('`torch.amp.GradScaler("cuda")` scales the loss')
    assert "every autocast in this file runs in bf16 (line 5, 10)" in message
    assert "sync in every `scaler.step()`" in message
    assert run_rule_related(GradScalerWithBf16Autocast, source) == [
        (3, [(5, "bf16 autocast"), (10, "bf16 autocast")])
    ]


def test_files_without_an_autocast_are_not_parsed() -> None:
    assert not GradScalerWithBf16Autocast.wants("scaler = torch.amp.GradScaler('cuda')\n")
    assert GradScalerWithBf16Autocast.wants("GradScaler()\nwith torch.autocast('cpu'): pass\n")


EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def test_the_scaler_buys_nothing_under_bf16_and_costs_a_sync_per_step() -> None:
    # The evidence behind the rule, on the CPU: the same bf16 training with and without the
    # scaler ends at the same loss, and the scaler's step reads the found-inf flag on the host
    # (torch 2.13, non-fused SGD), a device sync per step on a GPU.
    torch = pytest.importorskip("torch")
    from scaler._sync_counter import SyncCounter

    scaled = runpy.run_path(str(EXAMPLES / "bf16_autocast_with_grad_scaler.py"))
    plain = runpy.run_path(str(EXAMPLES / "bf16_autocast_no_scaler.py"))
    assert scaled["train"](steps=10) == pytest.approx(plain["train"](steps=10), rel=1e-6)

    x = torch.randn(8, 32)
    y = x.sum(dim=1, keepdim=True)
    counts = []
    for module, extra in ((scaled, (torch.amp.GradScaler("cpu"),)), (plain, ())):
        model = module["make_model"]()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        with SyncCounter() as syncs:
            module["train_step"](model, optimizer, *extra, x, y)
        counts.append(syncs.count)
    assert counts[0] >= 1
    assert counts[1] == 0


# -- dtypes decided by shipped configs ----------------------------------------------------------

HYDRA_TRAIN = """\
import hydra
import torch


@hydra.main(config_path="conf", config_name="train", version_base=None)
def main(cfg):
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[cfg.precision.name]
    scaler = torch.amp.GradScaler("cuda")
    for batch in loader:
        with torch.autocast("cuda", dtype=amp_dtype):
            loss = model(batch).loss
        scaler.scale(loss).backward()
"""


def hydra_project(tmp_path: Path, options: dict[str, str]) -> Path:
    (tmp_path / "pyproject.toml").write_text("", encoding="utf-8")
    (tmp_path / "conf" / "precision").mkdir(parents=True)
    (tmp_path / "conf" / "train.yaml").write_text(
        "defaults:\n  - precision: bf16\n  - _self_\n", encoding="utf-8"
    )
    for name, value in options.items():
        path = tmp_path / "conf" / "precision" / f"{name}.yaml"
        path.write_text(f"name: {value}\n", encoding="utf-8")
    module = tmp_path / "train.py"
    module.write_text(HYDRA_TRAIN, encoding="utf-8")
    return module


def test_every_shipped_config_picking_bf16_is_a_verdict(tmp_path: Path) -> None:
    from linter.api import lint_paths

    module = hydra_project(tmp_path, {"bf16": "bf16", "bf16_long": "bf16"})
    (finding,) = lint_paths([module], jobs=1, select=["AMP010"]).diagnostics
    assert finding.line == 8
    assert "the dtype comes from `precision.name` and every shipped config picks bf16" in (
        finding.message
    )
    assert [(r.line, r.message) for r in finding.related] == [
        (10, "bf16 autocast"),
        (
            5,
            "loads conf/precision/bf16.yaml, conf/precision/bf16_long.yaml: `precision.name` is "
            "bf16 in each",
        ),
    ]


def test_one_shipped_fp16_option_keeps_the_scaler(tmp_path: Path) -> None:
    from linter.api import lint_paths

    module = hydra_project(tmp_path, {"bf16": "bf16", "v100": "fp16"})
    assert not lint_paths([module], jobs=1, select=["AMP010"]).diagnostics


def test_a_config_dtype_without_a_readable_config_is_unknown() -> None:
    assert lines(HYDRA_TRAIN) == []


def test_a_half_model_the_scaler_steps_beside_bf16_autocast_is_left_to_amp008() -> None:
    """The two rules' exclusions must not combine into silence: AMP008 owns this shape."""
    source = (
        "import torch\nmodel = Net().cuda().half()\n"
        "optimizer = torch.optim.AdamW(model.parameters())\n"
        + program('torch.autocast("cuda", dtype=torch.bfloat16)').removeprefix("import torch\n")
    )
    assert lines(source) == []
    assert [line for line, _c, _m in run_rule(GradScalerWithFp16Params, source)] == [2]


def test_a_dtype_bound_by_if_statements_on_a_flag_is_chosen_by_the_flag() -> None:
    # Open-Sora-Plan's VAE trainer: `precision = torch.bfloat16`, then `if args.mix_precision ==
    # "fp16": precision = torch.float16 elif ... "fp32": ...`, `--mix_precision` bf16 by default.
    source = """\
    import argparse
    import torch

    parser = argparse.ArgumentParser()
    parser.add_argument("--precision", default="bf16", choices=["fp16", "bf16", "fp32"])
    args = parser.parse_args()
    scaler = torch.amp.GradScaler("cuda")
    amp_dtype = torch.bfloat16
    if args.precision == "fp16":
        amp_dtype = torch.float16
    elif args.precision == "fp32":
        amp_dtype = torch.float32
    for batch in loader:
        with torch.autocast("cuda", dtype=amp_dtype):
            loss = model(batch).sum()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    """
    [(line, _col, message)] = run_rule(GradScalerWithBf16Autocast, textwrap.dedent(source))
    assert line == 7
    assert "chosen by a flag, bf16 by default" in message
    # With fp16 the default, only the runs that ask for bf16 scale needlessly.
    fp16_default = textwrap.dedent(source.replace('default="bf16"', 'default="fp16"'))
    [(line, _col, message)] = run_rule(GradScalerWithBf16Autocast, fp16_default)
    assert message.startswith("when run with --precision bf16, ")


GLUE_FACTORY = """\
import argparse

import torch


def train(args, model, loader, optimizer):
    use_mp = args.mixed_precision is not None
    scaler = (
        torch.amp.GradScaler("cuda", enabled=use_mp)
        if hasattr(torch.amp, "GradScaler")
        else torch.cuda.amp.GradScaler(enabled=use_mp)
    )
    mp_dtype = {
        "float16": torch.float16,
        "bfloat16": torch.bfloat16,
        None: torch.float32,  # we disable it anyway
    }[args.mixed_precision]
    for data in loader:
        with torch.autocast("cuda", enabled=args.mixed_precision is not None, dtype=mp_dtype):
            loss = model(data)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()


parser = argparse.ArgumentParser()
parser.add_argument("--mixed_precision", "--mp", default=None, choices=["float16", "bfloat16"])
"""


def test_a_table_with_an_entry_for_the_run_without_the_flag_still_picks_by_the_flag() -> None:
    # glue-factory's shape: `None: torch.float32` is the run with no --mp, autocast disabled.
    found = run_rule(GradScalerWithBf16Autocast, GLUE_FACTORY)
    assert [line for line, _c, _m in found] == [9]  # the fallback arm is the same scaler
    assert found[0][2].startswith("when run with --mixed_precision bfloat16, ")
    # A scaler on only for the fp16 choice is right on every run.
    fp16_only = GLUE_FACTORY.replace(
        "use_mp = args.mixed_precision is not None",
        'use_mp = args.mixed_precision == "float16"',
    )
    assert lines(fp16_only) == []
