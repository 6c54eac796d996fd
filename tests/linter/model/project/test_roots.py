"""Where a file's project starts: from the evidence in and around the file, never from the folder
the command runs in (`linter.model.project._roots`)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from linter.model.project import ROOT_MARKERS, RootFinder


@pytest.fixture
def place(tmp_path: Path) -> Path:
    """A folder with no project marker at or above it."""
    folder = tmp_path / "place"
    folder.mkdir()
    for above in (folder, *folder.parents):
        assert not any((above / marker).exists() for marker in ROOT_MARKERS), above
    return folder


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def root_of(path: Path, bound: Path | None = None) -> Path:
    return Path(RootFinder().root_of(str(path), str(bound) if bound else None).folder)


def test_the_root_is_the_nearest_folder_with_a_marker(place: Path) -> None:
    write(place, {"repo/pyproject.toml": "", "repo/src/pkg/mod.py": ""})
    assert root_of(place / "repo/src/pkg/mod.py") == place / "repo"


def test_roots_found_together_look_in_each_folder_once(place: Path) -> None:
    # Two projects side by side, one nested in a folder of the other: each folder's answer is
    # the nearest marker's, whichever folder was asked about first. (Before, a file with no
    # marker above it fell back to the folder asked, here `place`: now it is its own folder.)
    for folder in ("repo/tools", "repo/sub/pkg", "other/x"):
        (place / folder).mkdir(parents=True)
    (place / "repo" / ".git").mkdir()
    (place / "repo" / "sub" / "setup.py").write_text("", encoding="utf-8")
    finder = RootFinder()
    folders = ("repo/sub/pkg", "repo/tools", "other/x", "repo/sub")
    found = [finder.root_of(str(place / folder / "m.py"), str(place)).folder for folder in folders]
    assert found == [
        str(place / "repo" / "sub"),
        str(place / "repo"),
        str(place / "other" / "x"),
        str(place / "repo" / "sub"),
    ]
    assert found == [RootFinder().root_of(str(place / f / "m.py")).folder for f in folders]


def test_without_evidence_the_root_is_the_files_own_folder_not_the_current_one(
    place: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(place, {"a/b.py": "import torch\n"})
    monkeypatch.chdir(place)
    assert root_of(place / "a/b.py") == place / "a"


@pytest.mark.parametrize(
    "spelling",
    [
        "sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))",
        "sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))",
        "sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..'))",
        "sys.path.append(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))",
        "sys.path.append(str(Path(__file__).parent.parent))",
        "sys.path.append(str(Path(__file__).resolve().parents[1]))",
        "sys.path.insert(0, str(pathlib.Path(__file__).absolute().parents[1]))",
        "sys.path.insert(0, osp.abspath(osp.join(__file__, *(['..'] * 2))))",
        "ROOT = Path(__file__).resolve().parents[1]\nif str(ROOT) not in sys.path:\n"
        "    sys.path.append(str(ROOT))",
        "BASE = os.path.dirname(os.path.abspath(__file__))\nROOT_DIR = os.path.dirname(BASE)\n"
        "sys.path.append(ROOT_DIR)",
    ],
)
def test_a_script_that_puts_the_folder_above_on_its_path_belongs_there(
    place: Path, spelling: str
) -> None:
    write(place, {"repo/tools/train.py": f"import os, sys\n{spelling}\nfrom lib import utils\n"})
    found = RootFinder().root_of(str(place / "repo/tools/train.py"))
    assert Path(found.folder) == place / "repo"
    assert "sys.path" in found.evidence


def test_a_path_below_the_script_or_from_the_environment_is_no_root(place: Path) -> None:
    write(
        place,
        {
            "repo/tools/train.py": "import os, sys\n"
            "sys.path.append(os.path.join(os.path.dirname(__file__), 'vendor'))\n"
            "sys.path.append(os.environ['EXTRA'])\n"
            "sys.path.append(os.getcwd())\n"
        },
    )
    assert root_of(place / "repo/tools/train.py") == place / "repo/tools"


def test_a_script_path_is_not_bounded_by_the_folder_asked(place: Path) -> None:
    write(
        place,
        {
            "repo/tools/train.py": "import os, sys\nsys.path.append(os.path.dirname(\n"
            "    os.path.dirname(os.path.abspath(__file__))))\n"
        },
    )
    tools = place / "repo/tools"
    assert root_of(tools / "train.py", tools) == place / "repo"


def test_the_root_is_the_top_of_the_package_chain(place: Path) -> None:
    write(
        place, {"repo/pkg/__init__.py": "", "repo/pkg/sub/__init__.py": "", "repo/pkg/sub/m.py": ""}
    )
    assert root_of(place / "repo/pkg/sub/m.py") == place / "repo"


def test_a_folder_inside_a_package_is_part_of_it(place: Path) -> None:
    write(place, {"repo/pkg/__init__.py": "", "repo/pkg/data/m.py": ""})
    assert root_of(place / "repo/pkg/data/m.py") == place / "repo"


def test_a_namespace_package_a_script_above_imports_belongs_to_the_scripts_folder(
    place: Path,
) -> None:
    write(
        place,
        {
            "repo/train.py": "from models.net import Net\n",
            "repo/models/net.py": "class Net: ...\n",
            "repo/unused/m.py": "x = 1\n",
        },
    )
    assert root_of(place / "repo/models/net.py") == place / "repo"
    assert root_of(place / "repo/unused/m.py") == place / "repo/unused"
    assert root_of(place / "repo/train.py") == place / "repo"


def test_a_namespace_package_imported_by_its_dotted_path_from_further_up(place: Path) -> None:
    # `models/` holds files of its own that do not import `backbones`: the script at the top
    # imports `models.backbones.resnet`, and that settles it.
    write(
        place,
        {
            "repo/train.py": "from models.backbones.resnet import ResNet\n",
            "repo/models/build.py": "import torch\n",
            "repo/models/backbones/resnet.py": "class ResNet: ...\n",
        },
    )
    assert root_of(place / "repo/models/backbones/resnet.py") == place / "repo"


@pytest.mark.parametrize(
    "line",
    [
        "from lib.utils import f",  # a module beside the script's folder
        "import lib.utils",
        "from scripts.common import g",  # its own folder, by its name from the root
    ],
)
def test_a_folder_whose_files_import_from_the_folder_above_belongs_there(
    place: Path, line: str
) -> None:
    write(
        place,
        {
            "repo/scripts/run.py": f"{line}\n",
            "repo/scripts/common.py": "def g(): ...\n",
            "repo/lib/utils.py": "def f(): ...\n",
        },
    )
    assert root_of(place / "repo/scripts/run.py") == place / "repo"
    assert root_of(place / "repo/scripts/common.py") == place / "repo"


def test_a_library_clone_or_the_standard_library_above_is_no_evidence(place: Path) -> None:
    write(
        place,
        {
            "code/proj/train.py": "import torch\nimport logging\n",
            "code/torch/setup.py": "",
            "code/torch/__init__.py": "",
            "code/logging/__init__.py": "",
        },
    )
    assert root_of(place / "code/proj/train.py") == place / "code/proj"


def test_the_folder_asked_bounds_the_package_chain_and_the_imports(place: Path) -> None:
    write(
        place,
        {
            "repo/train.py": "from models.net import Net\n",
            "repo/models/net.py": "class Net: ...\n",
            "repo/pkg/__init__.py": "",
            "repo/pkg/m.py": "",
        },
    )
    models = place / "repo/models"
    assert root_of(models / "net.py", models) == models
    assert root_of(place / "repo/pkg/m.py", place / "repo/pkg") == place / "repo/pkg"
    assert root_of(models / "net.py", place) == place / "repo"


def test_a_folder_name_that_cannot_be_imported_ends_the_search(place: Path) -> None:
    write(place, {"train.py": "from my_repo.models.net import Net\n", "my-repo/models/net.py": ""})
    assert root_of(place / "my-repo/models/net.py") == place / "my-repo/models"


def test_only_the_files_directly_in_the_folders_above_are_read(place: Path) -> None:
    write(
        place,
        {
            "home/notes.py": "import json\n",
            "home/other/big/m.py": "import json\n",
            "home/proj/train.py": "from models.net import Net\n",
            "home/proj/models/net.py": "class Net: ...\n",
        },
    )
    finder = RootFinder()
    assert finder.root_of(str(place / "home/proj/models/net.py")).folder == str(place / "home/proj")
    outside = {Path(p) for p in finder.files_read} - set((place / "home/proj").rglob("*.py"))
    assert all(path.parent in (place / "home/proj").parents for path in outside), outside
    assert place / "home/other/big/m.py" not in outside


def test_a_file_that_cannot_be_read_or_parsed_is_no_evidence(place: Path) -> None:
    write(place, {"repo/tools/train.py": "import sys\nsys.path.append(\n"})
    (place / "repo/tools/latin.py").write_bytes(b"# \xff\n" + b"import sys\n")
    assert root_of(place / "repo/tools/train.py") == place / "repo/tools"
    assert root_of(place / "repo/tools/latin.py") == place / "repo/tools"
    assert root_of(place / "repo/tools/gone.py") == place / "repo/tools"
    assert os.path.isdir(place / "repo/tools")


def test_tests_beside_a_src_layout_belong_to_the_repository(place: Path) -> None:
    write(
        place,
        {
            "repo/tests/test_engine.py": "from trainer.engine import train_step\n",
            "repo/src/trainer/__init__.py": "",
            "repo/src/trainer/engine.py": "def train_step(): ...\n",
        },
    )
    assert root_of(place / "repo/tests/test_engine.py") == place / "repo"


def test_a_second_run_finds_the_roots_without_reading_a_file(
    place: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(
        place,
        {
            "repo/tools/train.py": "import os, sys\n"
            "sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))\n",
            "repo/train.py": "from models.net import Net\n",
            "repo/models/net.py": "class Net: ...\n",
        },
    )
    # Files written a moment ago could change again unseen within the clock's granularity, and
    # are not kept; here the tree is taken for one long unchanged.
    monkeypatch.setattr("linter.model.project._roots._RACY_NS", 0)
    files = ["repo/tools/train.py", "repo/models/net.py"]
    cold = RootFinder(str(tmp_path / "cache"), "code")
    expected = [cold.root_of(str(place / name)).folder for name in files]
    cold.save()

    def unread(data: bytes) -> None:
        raise AssertionError("read again")

    monkeypatch.setattr("linter.model.project._roots._read_evidence", unread)
    warm = RootFinder(str(tmp_path / "cache"), "code")
    assert [warm.root_of(str(place / name)).folder for name in files] == expected
    assert expected == [str(place / "repo")] * 2
    # Another linter's code reads for itself.
    with pytest.raises(AssertionError, match="read again"):
        RootFinder(str(tmp_path / "cache"), "other code").root_of(str(place / files[0]))
