"""amp-lint: static checks for fp16 mixed-precision (AMP) pitfalls in PyTorch training code.

The linter never imports torch and never imports, executes or unpickles the code it reads.
"""

from linter._diagnostic import Diagnostic, RelatedLocation
from linter._rule import Example, Finding, ModuleContext, Rule, RuleOption

__version__ = "0.1.0"

__all__ = [
    "Diagnostic",
    "Example",
    "Finding",
    "ModuleContext",
    "RelatedLocation",
    "Rule",
    "RuleOption",
    "__version__",
]
