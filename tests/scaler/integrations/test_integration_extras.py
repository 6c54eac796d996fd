"""Without its framework, an integration module fails on import with the extra to install."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys

import pytest


@pytest.mark.parametrize(
    ("integration", "missing", "extra"),
    [
        ("transformers", "transformers", "ampscale[transformers]"),
        ("transformers", "accelerate", "ampscale[transformers]"),
        ("accelerate", "accelerate", "ampscale[accelerate]"),
        ("lightning", "lightning", "ampscale[lightning]"),
    ],
)
def test_missing_framework_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, integration: str, missing: str, extra: str
) -> None:
    monkeypatch.setitem(sys.modules, missing, None)  # what `import missing` sees when absent
    monkeypatch.delitem(sys.modules, f"scaler.integrations.{integration}", raising=False)
    name = extra.removeprefix("ampscale")
    clone = re.escape("." + name)
    expected = rf"needs '{missing}'.*extra {re.escape(extra)}.*pip install '{clone}'"
    with pytest.raises(ImportError, match=expected):
        importlib.import_module(f"scaler.integrations.{integration}")


def test_importing_the_scaler_and_the_package_loads_no_framework() -> None:
    code = (
        "import sys, scaler, scaler.integrations; "
        "print(sorted({'transformers', 'accelerate', 'lightning'} & set(sys.modules)))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert result.stdout.strip() == "[]"
