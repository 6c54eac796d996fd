"""The rules through the real engine (`linter.api`): examples/, noqa, related locations."""

from __future__ import annotations

import json
from pathlib import Path

from linter.api import lint_paths, lint_source

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"

#: What `amp-lint examples/` must report, as the examples' docstrings describe.
EXPECTED_EXAMPLE_FINDINGS = {
    ("clip_before_unscale.py", 27, "AMP003"),
    ("bf16_autocast_with_grad_scaler.py", 32, "AMP010"),
    ("deepspeed_fp16_with_torch_amp.py", 33, "AMP014"),
    ("deepspeed_fp16_with_torch_amp.py", 36, "AMP014"),
    ("deprecated_cuda_amp_api.py", 16, "AMP004"),
    ("deprecated_cuda_amp_api.py", 42, "AMP004"),
    ("finetune_bf16_checkpoint_in_fp16.py", 30, "AMP002"),
    ("fp16_get_scale_every_step.py", 35, "AMP001"),
    ("fp16_get_scale_every_step.py", 39, "AMP001"),
    ("fp16_penalty_backward_without_scale.py", 31, "AMP006"),
    ("fp16_params_under_grad_scaler.py", 27, "AMP008"),
    ("grad_accumulation_loop.py", 32, "AMP001"),
    ("grad_norm_logged_before_unscale.py", 30, "AMP012"),
    ("grad_scaler_per_step.py", 21, "AMP009"),
    ("hf_trainer_fp16_on_bf16_checkpoint.py", 46, "AMP002"),
    ("lightning_scale_logging.py", 28, "AMP001"),
    ("optimizer_wrapper_reads_scale.py", 30, "AMP001"),
    ("optimizer_wrapper_reads_scale.py", 33, "AMP001"),
    ("optimizer_step_bypasses_scaler.py", 21, "AMP007"),
    ("resume_without_scaler_state.py", 41, "AMP011"),
    ("resume_without_scaler_state.py", 49, "AMP011"),
    ("scaler_update_per_epoch.py", 21, "AMP005"),
    ("unscale_in_accumulation_loop.py", 27, "AMP013"),
}


def test_examples_report_exactly_what_their_docstrings_say() -> None:
    result = lint_paths([EXAMPLES], jobs=1)
    assert not result.errors
    found = {(Path(d.path).name, d.line, d.code) for d in result.diagnostics}
    assert found == EXPECTED_EXAMPLE_FINDINGS


def test_amp002_diagnostic_carries_the_bf16_site_as_related_location() -> None:
    path = EXAMPLES / "finetune_bf16_checkpoint_in_fp16.py"
    diagnostics = lint_source(path.read_text(encoding="utf-8"), str(path))
    related = {(d.line, r.line, r.message) for d in diagnostics for r in d.related}
    assert related == {(30, 27, "loaded as bfloat16"), (30, 38, "fp16 autocast also applies fp16")}
    assert all(d.name == "fp16-amp-with-bf16-checkpoint" for d in diagnostics)


def test_noqa_silences_a_finding_on_its_line() -> None:
    source = (
        "import torch\n"
        "scaler = torch.amp.GradScaler('cuda')\n"
        "for batch in loader:\n"
        "    print(scaler.get_scale())\n"
        "    print(scaler.get_scale())  # noqa: AMP001\n"
    )
    assert [(d.line, d.column, d.code) for d in lint_source(source)] == [(4, 11, "AMP001")]


def test_the_real_cli_lists_explains_and_selects_by_prefix_every_rule(capsys) -> None:
    from linter.cli import main

    codes = [*(f"AMP{n:03d}" for n in range(1, 16)), "AMP100"]
    assert main(["--list-rules"]) == 0
    listed = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert [fields[0] for fields in listed] == codes
    # Only AMP015 is off by default, and the listing says so in a fourth column.
    assert [fields[0] for fields in listed if fields[3:] == ["off by default"]] == ["AMP015"]
    assert all(len(fields) == 3 for fields in listed if fields[0] != "AMP015")
    for code in codes:
        assert main(["--explain", code]) == 0
        assert f"({code})" in capsys.readouterr().out.splitlines()[0]
    # A prefix selects every rule it starts, those off by default too: AMP00 AMP001-AMP009,
    # AMP01 AMP010-AMP015 (AMP015's only finding is in its bad example).
    reported = {code for _name, _line, code in EXPECTED_EXAMPLE_FINDINGS} | {"AMP015"}
    for prefix, expected in (("AMP00", set(codes[:9])), ("AMP01", set(codes[9:15]))):
        main(["--no-cache", "--select", prefix, "--format", "json", str(EXAMPLES)])
        found = {d["code"] for d in json.loads(capsys.readouterr().out)}
        assert found == expected & reported
