"""Where a script's own path expressions point, read from CPython's tree without running them.

Research scripts put their repository on ``sys.path`` by a path built from their own file:
``os.path.dirname(os.path.dirname(os.path.abspath(__file__)))``, ``Path(__file__).resolve()
.parents[1]``, ``os.path.join(os.path.dirname(__file__), "..")``, ``osp.join(__file__,
*([".."] * 2))``, often through a name (``ROOT_DIR = ...``, then ``sys.path.append(ROOT_DIR)``).
Such a path is known without knowing where the script lies: it is relative to the script's own
folder. That folder is where the script's imports start (`linter.model.project._imports`) and,
when above the script, the root of its project (`linter.model.project._roots`).

Anything else (a path read from the environment, a literal relative to wherever the command is
run) is not anchored on the file: unknown.
"""

from __future__ import annotations

import ast
import posixpath
from collections.abc import Mapping

__all__ = ["anchored_folder", "single_bindings"]

#: Stands for the script's own file in a path relative to its folder (no name holds a NUL).
_FILE = "\0file"

#: Calls (by the last part of their dotted name) that give back the path they are handed, as
#: far as the folder it names goes: ``os.path.abspath(p)``, ``str(p)``, ``Path(p)``...
_SAME_PATH_CALLS = frozenset(
    {
        "abspath",
        "realpath",
        "normpath",
        "expanduser",
        "fspath",
        "str",
        "Path",
        "PurePath",
        "PosixPath",
        "WindowsPath",
    }
)
#: Methods of a ``pathlib`` path that give back the same folder: ``p.resolve()``.
_SAME_PATH_METHODS = frozenset({"resolve", "absolute", "expanduser"})
#: How many ``..`` a ``[".."] * n`` may spell before it is taken for something else.
_MOST_REPEATS = 64
#: How many names deep a path may be followed (``ROOT = dirname(BASE)``, ``BASE = ...``).
_MOST_NAMES = 16


def single_bindings(assignments: list[ast.Assign]) -> dict[str, ast.expr]:
    """Names that ``assignments`` (every assignment of a module) bind exactly once, each with
    the value bound: a name bound twice (or by unpacking) could be either, so it is left out."""
    counts: dict[str, int] = {}
    values: dict[str, ast.expr] = {}
    for assignment in assignments:
        for target in assignment.targets:
            for name in ast.walk(target):
                if isinstance(name, ast.Name):
                    counts[name.id] = counts.get(name.id, 0) + 1
            if isinstance(target, ast.Name):
                values[target.id] = assignment.value
    return {name: value for name, value in values.items() if counts[name] == 1}


def anchored_folder(node: ast.expr, bindings: Mapping[str, ast.expr]) -> str | None:
    """The folder ``node`` names, relative to the script's own folder (``"."``, ``".."``,
    ``"../lib"``, POSIX separators), when it is a path built from ``__file__``; None otherwise,
    or when it names the file itself."""
    found = _path(node, bindings, 0)
    if found is None:
        return None
    folder = posixpath.normpath(found)
    return None if _FILE in folder else folder


def _path(node: ast.expr, bindings: Mapping[str, ast.expr], depth: int) -> str | None:
    """``node``'s path relative to the script's folder, `_FILE` standing for the file."""
    if depth > _MOST_NAMES:
        return None
    if isinstance(node, ast.Name):
        if node.id == "__file__":
            return _FILE
        bound = bindings.get(node.id)
        return _path(bound, bindings, depth + 1) if bound is not None else None
    if isinstance(node, ast.Attribute) and node.attr == "parent":
        return _parent(_path(node.value, bindings, depth))
    if isinstance(node, ast.Subscript):
        return _parents(node, bindings, depth)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        return _joined(_path(node.left, bindings, depth), [node.right])
    if isinstance(node, ast.Call):
        return _called(node, bindings, depth)
    return None


def _called(call: ast.Call, bindings: Mapping[str, ast.expr], depth: int) -> str | None:
    if call.keywords:
        return None
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if isinstance(func, ast.Attribute) and not call.args:
        # ``p.resolve()``: a method of the path itself.
        if name in _SAME_PATH_METHODS:
            return _path(func.value, bindings, depth)
        return None
    if not call.args:
        return None
    if isinstance(func, ast.Attribute) and name == "joinpath":
        return _joined(_path(func.value, bindings, depth), call.args)
    head = call.args[0]
    first = None if isinstance(head, ast.Starred) else _path(head, bindings, depth)
    if name in _SAME_PATH_CALLS and len(call.args) == 1:
        return first
    if name == "dirname" and len(call.args) == 1:
        return _parent(first)
    if name == "join":
        return _joined(first, call.args[1:])
    return None


def _parent(path: str | None) -> str | None:
    return None if path is None else posixpath.normpath(posixpath.join(path, ".."))


def _parents(node: ast.Subscript, bindings: Mapping[str, ast.expr], depth: int) -> str | None:
    """``p.parents[n]``: ``n + 1`` folders up from ``p``."""
    value, index = node.value, node.slice
    if not (isinstance(value, ast.Attribute) and value.attr == "parents"):
        return None
    if not (isinstance(index, ast.Constant) and type(index.value) is int and index.value >= 0):
        return None
    found = _path(value.value, bindings, depth)
    for _ in range(index.value + 1):
        found = _parent(found)
    return found


def _joined(path: str | None, parts: list[ast.expr]) -> str | None:
    """``path`` joined with literal ``parts`` (``".."``, ``"lib"``, ``*([".."] * 2)``)."""
    if path is None:
        return None
    words: list[str] = []
    for part in parts:
        spelled = _spelled(part)
        if spelled is None:
            return None
        words.extend(spelled)
    if any(posixpath.isabs(word) or "\\" in word for word in words):
        return None
    return posixpath.normpath(posixpath.join(path, *words)) if words else path


def _spelled(part: ast.expr) -> list[str] | None:
    """The literal path parts ``part`` spells: a string, or a starred list of strings,
    possibly repeated (``*([".."] * 2)``)."""
    if isinstance(part, ast.Constant):
        return [part.value] if isinstance(part.value, str) else None
    if not isinstance(part, ast.Starred):
        return None
    value, times = part.value, 1
    if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Mult):
        count = value.right
        if not (isinstance(count, ast.Constant) and type(count.value) is int):
            return None
        value, times = value.left, count.value
        if not 0 <= times <= _MOST_REPEATS:
            return None
    if not isinstance(value, ast.List | ast.Tuple):
        return None
    words = [item.value for item in value.elts if isinstance(item, ast.Constant)]
    if len(words) != len(value.elts) or not all(isinstance(word, str) for word in words):
        return None
    return [str(word) for word in words] * times
