"""Static import resolution: which project file an import names, never importing anything."""

from __future__ import annotations

from pathlib import Path

import pytest

from linter.model.project._imports import ImportTarget, ModuleFiles


def project(tmp_path: Path, files: list[str]) -> ModuleFiles:
    for name in files:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("", encoding="utf-8")
    return ModuleFiles(str(tmp_path), [str(tmp_path / f) for f in files if f.endswith(".py")])


def test_a_script_imports_a_module_of_its_own_folder(tmp_path: Path) -> None:
    files = project(tmp_path, ["tools/train.py", "tools/engine.py", "engine.py"])
    found = files.resolve(str(tmp_path / "tools/train.py"), "engine")
    assert found == ImportTarget(str(tmp_path / "tools/engine.py"))


def test_the_root_is_searched_after_the_script_folder(tmp_path: Path) -> None:
    files = project(tmp_path, ["tools/train.py", "models/__init__.py", "models/vit.py"])
    found = files.resolve(str(tmp_path / "tools/train.py"), "models.vit", name="build")
    assert found == ImportTarget(str(tmp_path / "models/vit.py"), "build")


def test_from_a_package_import_a_submodule(tmp_path: Path) -> None:
    files = project(tmp_path, ["train.py", "utils/__init__.py", "utils/grads.py"])
    found = files.resolve(str(tmp_path / "train.py"), "utils", name="grads")
    assert found == ImportTarget(str(tmp_path / "utils/grads.py"))


def test_from_a_package_import_a_name_of_its_init(tmp_path: Path) -> None:
    files = project(tmp_path, ["train.py", "utils/__init__.py", "utils/grads.py"])
    found = files.resolve(str(tmp_path / "train.py"), "utils", name="clip")
    assert found == ImportTarget(str(tmp_path / "utils/__init__.py"), "clip")


def test_a_namespace_package_without_init(tmp_path: Path) -> None:
    files = project(tmp_path, ["train.py", "ns/engine.py"])
    found = files.resolve(str(tmp_path / "train.py"), "ns.engine", name="step")
    assert found == ImportTarget(str(tmp_path / "ns/engine.py"), "step")


def test_a_src_layout(tmp_path: Path) -> None:
    files = project(tmp_path, ["scripts/run.py", "src/pkg/__init__.py", "src/pkg/loop.py"])
    found = files.resolve(str(tmp_path / "scripts/run.py"), "pkg.loop", name="fit")
    assert found == ImportTarget(str(tmp_path / "src/pkg/loop.py"), "fit")


@pytest.mark.parametrize(
    ("level", "module", "name", "expected"),
    [
        (1, "", "engine", "pkg/sub/engine.py"),
        (1, "engine", "train", "pkg/sub/engine.py"),
        (2, "models", "build", "pkg/models.py"),
        (2, "", "models", "pkg/models.py"),
    ],
)
def test_relative_imports(
    tmp_path: Path, level: int, module: str, name: str, expected: str
) -> None:
    files = project(
        tmp_path,
        [
            "pkg/__init__.py",
            "pkg/models.py",
            "pkg/sub/__init__.py",
            "pkg/sub/engine.py",
            "pkg/sub/trainer.py",
        ],
    )
    found = files.resolve(str(tmp_path / "pkg/sub/trainer.py"), module, level, name)
    assert found is not None
    assert found.path == str(tmp_path / expected)


def test_a_package_module_imports_its_package_by_absolute_name(tmp_path: Path) -> None:
    files = project(tmp_path, ["lib/pkg/__init__.py", "lib/pkg/a.py", "lib/pkg/b.py"])
    found = files.resolve(str(tmp_path / "lib/pkg/b.py"), "pkg.a", name="f")
    assert found == ImportTarget(str(tmp_path / "lib/pkg/a.py"), "f")


def test_a_literal_sys_path_insert_is_searched(tmp_path: Path) -> None:
    files = project(tmp_path, ["scripts/train.py", "third/lib/helpers.py"])
    importer = str(tmp_path / "scripts/train.py")
    assert files.resolve(importer, "helpers") is None
    found = files.resolve(importer, "helpers", extra_roots=["../third/lib"])
    assert found == ImportTarget(str(tmp_path / "third/lib/helpers.py"))


@pytest.mark.parametrize("module", ["torch", "torch.amp", "enginee", "models.missing"])
def test_what_is_not_a_project_file_is_unknown(tmp_path: Path, module: str) -> None:
    files = project(tmp_path, ["train.py", "engine.py", "models/__init__.py"])
    assert files.resolve(str(tmp_path / "train.py"), module) is None


def test_a_namespace_package_holding_only_packages(tmp_path: Path) -> None:
    # `ns` holds no file of its own: its name is known from the paths below it all the same.
    files = project(tmp_path, ["train.py", "ns/models/vit.py"])
    found = files.resolve(str(tmp_path / "train.py"), "ns.models.vit", name="build")
    assert found == ImportTarget(str(tmp_path / "ns/models/vit.py"), "build")
    found = files.resolve(str(tmp_path / "train.py"), "ns.models", name="vit")
    assert found == ImportTarget(str(tmp_path / "ns/models/vit.py"))
