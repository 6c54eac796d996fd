"""Syntax: what one module's code says, before any question of meaning or of other files.

Questions answered here: which nodes a module has and where (`module_index`, line numbers without
position metadata); what a dotted name means under the module's imports (`import_aliases`); what
binds a name (`bindings`); a call's arguments and the dtype it spells; which branch arms exclude
each other and what may run before what on one path (`path_facts`); ``# noqa`` comments as nodes;
version guards; callables reached through an alias.

May import: nothing of the model (the engine's own leaf modules: parsing, positions, noqa text).
A module is seen as a `ParsedModule`; the project appears only as `LibraryNames`.
"""

from __future__ import annotations

from linter.model.syntax._bindings import Bindings, bindings
from linter.model.syntax._call_arguments import (
    argument_for,
    keyword,
    parameter_position,
    positional,
    string_value,
)
from linter.model.syntax._callable_aliases import AliasCalls, alias_calls
from linter.model.syntax._dotted_names import (
    ImportAliases,
    dotted_name,
    import_aliases,
    last_part,
    words,
)
from linter.model.syntax._dtype_names import BF16, FP16, FP32, dtype_named, literal_dtype
from linter.model.syntax._line_numbers import (
    call_lines,
    column_of,
    function_source,
    line_numbers_cached,
    lines_aside,
)
from linter.model.syntax._module_index import (
    MAX_CALL_DEPTH,
    ModuleIndex,
    index_aside,
    module_index,
)
from linter.model.syntax._noqa_sites import NoqaSite, file_noqa_sites, noqa_sites
from linter.model.syntax._path_facts import Fact, Facts, PathFacts, argument_dest, path_facts
from linter.model.syntax._tree import children, code_children, descendants, walk
from linter.model.syntax._version_guards import CompatFallbacks

__all__ = [
    "BF16",
    "FP16",
    "FP32",
    "MAX_CALL_DEPTH",
    "AliasCalls",
    "Bindings",
    "CompatFallbacks",
    "Fact",
    "Facts",
    "ImportAliases",
    "ModuleIndex",
    "NoqaSite",
    "PathFacts",
    "alias_calls",
    "argument_dest",
    "argument_for",
    "bindings",
    "call_lines",
    "children",
    "code_children",
    "column_of",
    "descendants",
    "dotted_name",
    "dtype_named",
    "file_noqa_sites",
    "function_source",
    "import_aliases",
    "index_aside",
    "keyword",
    "last_part",
    "line_numbers_cached",
    "lines_aside",
    "literal_dtype",
    "module_index",
    "noqa_sites",
    "parameter_position",
    "path_facts",
    "positional",
    "string_value",
    "walk",
    "words",
]
