"""Training arguments that Hugging Face's ``HfArgumentParser`` fills from the command line.

``parser = HfArgumentParser((ModelArguments, TrainingArguments))`` then
``model_args, training_args = parser.parse_args_into_dataclasses()`` binds ``training_args`` to
a ``TrainingArguments`` whose ``fp16`` is the ``--fp16`` flag (or the ``"fp16"`` key of the file
``parse_json_file`` reads). A Trainer handed that object trains through a GradScaler exactly on
the runs where ``training_args.fp16`` is true: a runtime switch, as ``TrainingArguments(
fp16=args.fp16)`` is, and the scripts that choose a load dtype by the same flag (tevatron's
``elif training_args.fp16: torch_dtype = torch.float16``) tie the two together.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from linter.model.syntax import ModuleIndex, dotted_name, last_part

#: Hugging Face argument classes with an ``fp16`` switch (transformers and TRL).
TRAINING_ARGUMENTS = frozenset(
    {
        "TrainingArguments",
        "Seq2SeqTrainingArguments",
        "SFTConfig",
        "DPOConfig",
        "ORPOConfig",
        "KTOConfig",
        "CPOConfig",
        "GRPOConfig",
        "RewardConfig",
    }
)
#: ``HfArgumentParser`` methods that return one object per dataclass it was given.
_PARSE_METHODS = frozenset(
    {"parse_args_into_dataclasses", "parse_json_file", "parse_yaml_file", "parse_dict"}
)


def is_training_arguments(name: str) -> bool:
    """A class name that spells Hugging Face's training arguments, or a project's subclass
    named for them (tevatron's ``TevatronTrainingArguments``)."""
    short = last_part(name)
    return short in TRAINING_ARGUMENTS or short.endswith("TrainingArguments")


@dataclass(frozen=True, slots=True)
class ParsedArguments:
    """A name bound to training arguments that a parser filled."""

    #: The statement that binds it (``model_args, training_args = parser.parse_...()``).
    binding: cst.Assign
    #: The bound name (``training_args``).
    name: str


def parsed_training_arguments(index: ModuleIndex) -> list[ParsedArguments]:
    """Each binding of training arguments by an ``HfArgumentParser`` parse in this module: the
    parser built in the same function (or at module level) or in the call itself, its
    dataclasses listed in order; the bound element is the one at the position of the training
    arguments' class."""
    parsers: dict[tuple[cst.CSTNode | None, str], list[str | None]] = {}
    parses: list[tuple[cst.Assign, cst.Call]] = []
    for assign in index.nodes(cst.Assign):
        value = assign.value
        if isinstance(value, cst.Subscript) and isinstance(value.value, cst.Call):
            value = value.value
        if not isinstance(value, cst.Call):
            continue
        classes = _parser_classes(value)
        if classes is not None and len(assign.targets) == 1:
            name = dotted_name(assign.targets[0].target)
            if name is not None:
                parsers[(index.enclosing_function(assign), name)] = classes
        elif isinstance(value.func, cst.Attribute) and value.func.attr.value in _PARSE_METHODS:
            parses.append((assign, value))
    found = []
    for assign, parse in parses:
        receiver = parse.func.value  # type: ignore[attr-defined]  # parses hold attribute calls
        classes = _parser_classes(receiver) if isinstance(receiver, cst.Call) else None
        name = dotted_name(receiver)
        if classes is None and name is not None:
            scope = index.enclosing_function(assign)
            classes = parsers.get((scope, name), parsers.get((None, name)))
        position = next(
            (i for i, c in enumerate(classes or ()) if c and is_training_arguments(c)), None
        )
        if position is not None and len(assign.targets) == 1:
            bound = _element(assign, position, len(classes or ()))
            if bound is not None:
                found.append(ParsedArguments(assign, bound))
    return found


def _parser_classes(call: cst.Call) -> list[str | None] | None:
    """The dataclass names an ``HfArgumentParser(...)`` call is given, in order; None for any
    other call."""
    name = dotted_name(call.func)
    if name is None or last_part(name) != "HfArgumentParser" or not call.args:
        return None
    first = call.args[0].value
    elements = (
        [e.value for e in first.elements] if isinstance(first, cst.Tuple | cst.List) else [first]
    )
    return [dotted_name(e) for e in elements]


def _element(assign: cst.Assign, position: int, count: int) -> str | None:
    """The name ``assign`` binds to the ``position``-th parsed object: an element of a tuple
    target, or the whole target of a ``parse(...)[position]`` read, or ``(args,) = ...``."""
    target = assign.targets[0].target
    if isinstance(assign.value, cst.Subscript):
        index = assign.value.slice[0].slice if len(assign.value.slice) == 1 else None
        value = index.value if isinstance(index, cst.Index) else None
        if isinstance(value, cst.Integer) and int(value.value) == position:
            return dotted_name(target)
        return None
    if isinstance(target, cst.Tuple | cst.List):
        elements = target.elements
        if len(elements) == count and not any(isinstance(e, cst.StarredElement) for e in elements):
            return dotted_name(elements[position].value)
    return None
