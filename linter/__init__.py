"""amp-lint: static checks for fp16 mixed-precision (AMP) pitfalls in PyTorch training code.

The linter never imports torch and never imports, executes or unpickles the code it reads.
"""

from linter._diagnostic import Diagnostic, FileError, RelatedLocation
from linter._engine import Change
from linter._fix import SAFE, UNSAFE, Edit, Fix, NodeFix
from linter._rule import Example, Finding, ModuleContext, Rule, RuleOption
from linter._version import __version__
from linter.api import FixedSource, LintError, LintResult, fix_source, lint_paths, lint_source
from linter.config import ConfigError, Settings, load_settings

__all__ = [
    "SAFE",
    "UNSAFE",
    "Change",
    "ConfigError",
    "Diagnostic",
    "Edit",
    "Example",
    "FileError",
    "Finding",
    "Fix",
    "FixedSource",
    "LintError",
    "LintResult",
    "ModuleContext",
    "NodeFix",
    "RelatedLocation",
    "Rule",
    "RuleOption",
    "Settings",
    "__version__",
    "fix_source",
    "lint_paths",
    "lint_source",
    "load_settings",
]
