"""The multi-module fixtures with real config files (DeepSpeed JSON, TrainingArguments JSON,
Hydra / accelerate / Lightning CLI YAML): ``tests/linter/test_projects.py`` lints each as a
folder and file by file; this checks that every kind of config has a positive and a negative."""

from __future__ import annotations

from pathlib import Path

PROJECTS = Path(__file__).resolve().parents[1] / "fixtures" / "projects"
#: The config kinds, as the fixture folders name them.
KINDS = (
    "deepspeed_json",
    "training_arguments_json",
    "accelerate_yaml",
    "lightning_cli_yaml",
    "hydra_yaml",
)


def test_there_are_config_fixtures_of_every_kind() -> None:
    names = {path.name for path in PROJECTS.iterdir() if path.is_dir()}
    for kind in KINDS:
        assert any(f"_pos_{kind}" in name for name in names), kind
        assert any(f"_neg_{kind}" in name for name in names), kind
