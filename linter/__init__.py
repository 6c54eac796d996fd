"""amp-lint: static checks for fp16 mixed-precision (AMP) pitfalls in PyTorch training code.

The linter never imports torch and never imports, executes or unpickles the code it reads.
"""

from linter._diagnostic import Diagnostic, FileError, RelatedLocation
from linter._rule import Example, Finding, ModuleContext, Rule, RuleOption
from linter._version import __version__
from linter.api import LintError, LintResult, lint_paths, lint_source
from linter.config import ConfigError, Settings, load_settings

__all__ = [
    "ConfigError",
    "Diagnostic",
    "Example",
    "FileError",
    "Finding",
    "LintError",
    "LintResult",
    "ModuleContext",
    "RelatedLocation",
    "Rule",
    "RuleOption",
    "Settings",
    "__version__",
    "lint_paths",
    "lint_source",
    "load_settings",
]
