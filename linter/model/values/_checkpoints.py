"""Resume checkpoints a module writes and reads: which state they hold, and the GradScaler's.

A *resume checkpoint* holds both the model's and the optimizer's state: it exists to continue
training, unlike an export of the weights alone. Training through a GradScaler, it must hold the
scaler's state too (`scaler.state_dict()`: the scale, the growth tracker), or a resumed run starts
again from `init_scale` (65536) and overflows until the scale has come back down.

What this module reads, per module:

- **writes**: a call of a saver (``torch.save``, ``save_on_master``, ``accelerator.save``,
  ``xm.save``, a ``save_checkpoint(state, ...)`` helper: a callee whose name says ``save``) whose
  first argument is a dict literal, a ``dict(...)`` call, or a name bound to one in the same
  function and then filled in (``ckpt["scaler"] = ...``, ``ckpt.update({...})``);
  a checkpoint written as a folder of files (``torch.save(optimizer.state_dict(),
  os.path.join(output_dir, "optimizer.pt"))`` in a function that saves the model's weights
  too, ``save_pretrained`` or a ``state_dict()``) is one, whose scaler entry is a save of the
  scaler's state in the same function;
  A checkpointer object built with the objects it checkpoints (fvcore's and detectron2's
  ``Checkpointer(model, save_dir, optimizer=optimizer, scheduler=scheduler)``: the model, then
  each keyword an entry of every checkpoint it saves and resumes from) is a write too;
- its **entries**: (key, value) pairs; a ``**spread``, an ``update(other)``, the dict handed to
  another call before the save, or two bindings make the content unknown, and unknown checkpoints
  are not reported;
- **state**: a literal value (``"optimizer": None``) holds none; a ``.state_dict()`` call on
  an optimizer (`TrainingIterations.is_optimizer`) or under an ``optim...`` key is the
  optimizer's; another ``.state_dict()`` (``model.state_dict()``, ``unwrap(model).state_dict()``)
  or a ``model``/``state_dict`` key is the model's; a scaler's ``state_dict()``, a scaler itself,
  or a key naming one (``scaler``, ``grad_scaler``, ``amp``) is the scaler's;
- **reads**: ``<optimizer>.load_state_dict(...)``, and whether the module ever restores a scaler
  (``<scaler>.load_state_dict(...)`` or a read of a ``"scaler"`` key).

Frameworks that save the scaler themselves (Accelerate's ``save_state``, Lightning's and the HF
Trainer's checkpoints) write no dict of optimizer state in user code, so they never appear here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TypeVar

import libcst as cst

from linter.model.syntax import (
    ModuleIndex,
    argument_for,
    descendants,
    dotted_name,
    last_part,
    path_facts,
    walk,
)
from linter.model.values._scaler_receivers import ScalerReceivers

_Node = TypeVar("_Node", bound=cst.CSTNode)

#: Callee names that save an object to a file (``torch.save``, ``save_on_master``,
#: ``atomic_save``...; not the hooks around a save, ``before_save``), and the savers of other
#: things that take no state dict (``save_pretrained``, ``save_state``).
SAVER_NAME = re.compile(r"^(?!(before|after|on|pre|post)_)(\w+_)?save(_\w+)?$", re.IGNORECASE)
NOT_A_STATE_SAVER = frozenset(
    {"save_pretrained", "save_state", "save_model", "save_hyperparameters"}
)
#: Calls that write a model's weights into a folder (``model.save_pretrained(out)``, the Hugging
#: Face Trainer's ``self.save_model(out)``): the model's part of a folder checkpoint.
_MODEL_SAVERS = frozenset({"save_pretrained", "save_model"})
#: Callee names of checkpointer classes built with the objects they checkpoint (fvcore's
#: ``Checkpointer``, detectron2's ``DetectionCheckpointer``, ``FSDPCheckpointer``...).
CHECKPOINTER_NAME = re.compile(r"^\w*Checkpointer$")
#: How a finding says to add the scaler's state to a saved dict, a checkpointer, a folder
#: checkpoint and an object that saves itself.
ADD_AN_ENTRY = '`"scaler": scaler.state_dict()` (and load it on resume)'
SAVE_BESIDE = (
    '`torch.save(scaler.state_dict(), ...)` beside it, to a "scaler.pt" of the same folder '
    "(and load it on resume)"
)
REGISTER_IT = (
    "the scaler to the checkpointer (`Checkpointer(..., scaler=scaler)`): it saves and "
    "restores it with the rest"
)
SET_ON_IT = (
    "the scaler's state to the saved object, beside the optimizer's "
    "(`model.scaler_state_dict = scaler.state_dict()`), and restore it on resume"
)
#: Keys that say which state an entry holds.
OPTIMIZER_KEY = re.compile(r"optim", re.IGNORECASE)
MODEL_KEY = re.compile(r"model|state_dict|net|weights|params", re.IGNORECASE)
SCALER_KEY = re.compile(r"scaler|(^|_)amp($|_)", re.IGNORECASE)
#: Keys and owners of a learning-rate scheduler's state: neither the model's nor the optimizer's.
SCHEDULER_KEY = re.compile(r"sched", re.IGNORECASE)
#: Callees that read a checkpoint file: ``torch.load``, ``load_checkpoint``, ``load_file``.
#: An ``if`` test that picks the TPU/XLA path (``is_torch_tpu_available()``, ``args.use_xla``).
_XLA_TEST = re.compile(r"tpu|xla", re.IGNORECASE)
LOADER_NAME = re.compile(r"^(load|load_\w*|\w*_load)$", re.IGNORECASE)
#: Callee names that restore state from a checkpoint (``load_checkpoint``, ``resume``).
RESTORER_NAME = re.compile(r"load|resume|restore", re.IGNORECASE)

#: (key text or None, value) of one checkpoint entry.
Entry = tuple[str | None, cst.BaseExpression]


@dataclass(frozen=True, slots=True)
class CheckpointWrite:
    """A saved resume checkpoint (model and optimizer state together)."""

    #: The saver call, e.g. ``torch.save(ckpt, path)``.
    call: cst.Call
    #: The dict literal saved (or the one the saved name was bound to), when it is a literal: the
    #: place a fix adds the scaler's entry.
    literal: cst.Dict | None
    #: The optimizer's state in it (a ``state_dict()`` call or the entry's value).
    optimizer_state: cst.BaseExpression
    #: Whether it holds a GradScaler's state.
    holds_scaler: bool
    #: What to add so that it does (`ADD_AN_ENTRY`, or `REGISTER_IT` for a checkpointer).
    remedy: str = ADD_AN_ENTRY


class Checkpoints:
    """The resume checkpoints of one module (see the module docstring)."""

    def __init__(
        self,
        index: ModuleIndex,
        receivers: ScalerReceivers,
        is_optimizer: Callable[[str], bool],
    ) -> None:
        self._index = index
        self._receivers = receivers
        self._is_optimizer = is_optimizer
        self._carried_keys: frozenset[str] | None = None
        #: Every resume checkpoint written in the module, in source order.
        self.writes: list[CheckpointWrite] = self.writes_in(None)

    def writes_in(self, root: cst.FunctionDef | None) -> list[CheckpointWrite]:
        """The resume checkpoints written in ``root`` (a function, perhaps one of another
        module grafted under a call here; None: the whole module), in source order, leaving out
        the saves only a TPU/XLA branch runs (``if using_tpu: xm.save(...)``): no GradScaler
        scales there."""
        return [
            write
            for call in self._calls(root)
            if (write := self._write(call) or self._checkpointer(call)) is not None
            and not self._on_xla_branch(call)
        ]

    def _calls(self, root: cst.CSTNode | None) -> list[cst.Call]:
        if root is None:
            return self._index.nodes(cst.Call)
        return [node for node in descendants(root) if isinstance(node, cst.Call)]

    def _write(self, call: cst.Call) -> CheckpointWrite | None:
        if not self._saves(call) or not call.args:
            return None
        # `torch.save(obj=..., f=...)` names what `torch.save(state, path)` passes first.
        saved = next((a for a in call.args if a.keyword is None or a.keyword.value == "obj"), None)
        if saved is None:
            return None
        found = self._entries(saved.value, call)
        if found is None:
            return self._folder_write(call, saved.value) or self._object_save(call)
        literal, entries = found
        optimizer = next((v for k, v in entries if self._optimizer_state(k, v)), None)
        has_model = any(self._model_state(k, v) for k, v in entries)
        if optimizer is None or not has_model:
            return None
        holds = any(self._scaler_state(k, v) for k, v in entries)
        return CheckpointWrite(call, literal, optimizer, holds)

    def _folder_write(self, call: cst.Call, saved: cst.BaseExpression) -> CheckpointWrite | None:
        """A checkpoint saved as a folder of files (``optimizer.pt``, ``scheduler.pt`` beside
        the model's weights, as the Hugging Face Trainer writes them): the optimizer's state
        saved on its own, by a function that also saves a model's state (``save_pretrained``,
        ``save_model``, or a saver of a ``state_dict()``); the scaler's is kept if the function
        saves it too."""
        function = self._index.enclosing_function(call)
        if function is None or not self._optimizer_state(None, saved):
            return None
        holds_model = holds_scaler = False
        for other in self._calls(function):
            name = last_part(dotted_name(other.func) or "")
            if name in _MODEL_SAVERS:
                holds_model = True
            elif other is not call and SAVER_NAME.search(name) and other.args:
                value = other.args[0].value
                holds_scaler |= self._scaler_state(None, value)
                holds_model |= self._model_state(None, value)
        if not holds_model:
            return None
        return CheckpointWrite(call, None, saved, holds_scaler, SAVE_BESIDE)

    def _object_save(self, call: cst.Call) -> CheckpointWrite | None:
        """An object that saves itself (``self.model.save(model_file)``) after its function set
        the optimizer's state on it (flair's ``self.model.optimizer_state_dict =
        self.optimizer.state_dict()``): its weights and those attributes are the checkpoint,
        which keeps the scaler's state only if it is set on the object too."""
        entries = self._carried(call)
        # The attribute's value says it: `self.optimizer = ...` holds the optimizer, not state.
        optimizer = next((v for _k, v in entries if self._optimizer_state(None, v)), None)
        if optimizer is None:
            return None
        holds = any(self._scaler_state(k, v) for k, v in entries)
        return CheckpointWrite(call, None, optimizer, holds, SET_ON_IT)

    def _carried(self, save: cst.Call) -> list[Entry]:
        """(attribute, value) of each ``obj.attribute = value`` before ``obj.save(...)`` in
        the function of that save."""
        func = save.func
        owner = dotted_name(func.value) if isinstance(func, cst.Attribute) else None
        function = self._index.enclosing_function(save)
        if owner is None or function is None:
            return []
        order = self._index.order
        return [
            (target.attr.value, assign.value)
            for assign in _under(function, self._index, cst.Assign)
            if order[assign] < order[save]
            for t in assign.targets
            if isinstance(target := t.target, cst.Attribute) and dotted_name(target.value) == owner
        ]

    def _carried_optimizer_attributes(self) -> frozenset[str]:
        """Attributes an object of this module carries the optimizer's state in to its own
        save (see `_object_save`): reading one back into an optimizer is a resume."""
        if self._carried_keys is None:
            self._carried_keys = frozenset(
                key
                for call in self._index.nodes(cst.Call)
                if _method(call) is not None and self._saves(call)
                for key, value in self._carried(call)
                if key is not None and self._optimizer_state(None, value)
            )
        return self._carried_keys

    def _checkpointer(self, call: cst.Call) -> CheckpointWrite | None:
        """``Checkpointer(model, save_dir, optimizer=optimizer)``: the model (its first
        argument) and the keywords' objects are what every checkpoint it saves holds."""
        name = dotted_name(call.func)
        if name is None or not CHECKPOINTER_NAME.search(last_part(name)) or not call.args:
            return None
        first = call.args[0]
        entries = [] if first.keyword is not None else [("model", first.value)]
        entries += [(a.keyword.value, a.value) for a in call.args if a.keyword is not None]
        optimizer = next(
            (v for k, v in entries if k != "model" and self._optimizer_state(k, v)), None
        )
        if optimizer is None or not any(self._model_state(k, v) for k, v in entries):
            return None
        holds = any(self._scaler_state(k, v) for k, v in entries)
        return CheckpointWrite(call, None, optimizer, holds, REGISTER_IT)

    # -- what the saved mapping holds ----------------------------------------------------------

    def _entries(
        self, value: cst.BaseExpression, save: cst.Call
    ) -> tuple[cst.Dict | None, list[Entry]] | None:
        """(the literal, its entries) of the mapping ``value`` denotes; None when unknown."""
        if isinstance(value, cst.Dict):
            entries = _literal_entries(value)
            return None if entries is None else (value, entries)
        if isinstance(value, cst.Call):
            callee = dotted_name(value.func)
            if callee == "dict" or (callee is not None and last_part(callee) in self._records()):
                # `dict(k=v)`, or a record (`Snapshot(model_state=..., optimizer_state=...)`, a
                # dataclass or NamedTuple of this module) whose fields are its keywords.
                entries = _keyword_entries(value)
                return None if entries is None else (None, entries)
            record = _record_as_dict(value)
            # `asdict(snapshot)` / `snapshot._asdict()`: the fields the record was built with.
            return None if record is None else self._built_up(record, value)
        if isinstance(value, cst.Name):
            found = self._built_up(value.value, save)
            if found is None:
                handed = self._handed_in(value.value, save)
                if handed is not None:
                    return self._entries(*handed)
            return found
        return None

    def _handed_in(self, name: str, save: cst.Call) -> tuple[cst.BaseExpression, cst.Call] | None:
        """What the call a helper is grafted under passes as the helper's parameter ``name``
        (``misc.save_model(..., states=g_states)`` with ``torch.save(states, path)`` in the
        helper), and that call: the helper saves what its caller hands it."""
        function = self._index.enclosing_function(save)
        call = self._index.parent.get(function) if function is not None else None
        if not isinstance(function, cst.FunctionDef) or not isinstance(call, cst.Call):
            return None
        value = argument_for(call, function, name)
        return None if value is None else (value, call)

    def _records(self) -> frozenset[str]:
        """The module's record classes: ``@dataclass`` classes and ``NamedTuple`` subclasses."""
        return self._index.shared("checkpoints.records", lambda: _record_classes(self._index))

    def _built_up(self, name: str, save: cst.Call) -> tuple[cst.Dict | None, list[Entry]] | None:
        """``ckpt = {...}; ckpt["k"] = v; ckpt.update(k=v); save(ckpt, ...)`` in one function."""
        index = self._index
        scope = index.enclosing_function(save) or index.module
        around = set(index.ancestors(save))  # `ckpt = asdict(ckpt)` binds after it reads
        bindings = [
            assign
            for assign in _under(scope, index, cst.Assign)
            if any(dotted_name(t.target) == name for t in assign.targets)
            and index.order[assign] < index.order[save]
            and assign not in around
        ]
        if not bindings:
            return None
        binding = bindings[-1]  # the nearest before the save (``checkpoint = torch.load(...)``
        # earlier in the function is another checkpoint)
        found = self._entries(binding.value, save)
        if found is None or isinstance(binding.value, cst.Name):
            return None
        literal, entries = found
        between = [
            node
            for kind in (cst.Assign, cst.Call)
            for node in _under(scope, index, kind)
            if index.order[binding] < index.order[node] < index.order[save] and node not in around
        ]
        for node in between:
            if isinstance(node, cst.Assign):
                for target in node.targets:
                    key = _subscript_key(target.target, name)
                    if key is not None:
                        entries.append((key, node.value))
            elif isinstance(node, cst.Call) and node is not save and _mentions(node, name):
                if _record_as_dict(node) == name:
                    continue  # `asdict(ckpt)` reads it
                if self._saves(node):
                    continue  # an earlier save of it (a local copy, then the cloud's) reads it
                if not (
                    isinstance(node.func, cst.Attribute) and dotted_name(node.func.value) == name
                ):
                    if path_facts(index).in_exclusive_arms(node, save):
                        continue  # handed on where this save never runs (`if s3: upload(ckpt)`)
                    return None  # handed to another function: it may add anything
                if node.func.attr.value != "update":
                    continue
                more = _update_entries(node)
                if more is None:
                    return None
                entries.extend(more)
        return literal, entries

    def _saves(self, call: cst.Call) -> bool:
        """``call`` writes its first argument to a file (``torch.save(ckpt, path)``): it reads
        the mapping, never changes it."""
        name = last_part(dotted_name(call.func) or "")
        return bool(SAVER_NAME.search(name)) and name not in NOT_A_STATE_SAVER

    def _optimizer_state(self, key: str | None, value: cst.BaseExpression) -> bool:
        if _is_literal(value):
            return False  # `"optimizer": None`: an export that keeps the key, not the state
        if key is not None and OPTIMIZER_KEY.search(key):
            return True
        return any(self._is_optimizer(owner) for owner in _state_owners(value))

    def _model_state(self, key: str | None, value: cst.BaseExpression) -> bool:
        if key is not None and (
            OPTIMIZER_KEY.search(key) or SCALER_KEY.search(key) or SCHEDULER_KEY.search(key)
        ):
            return False
        if key is not None and MODEL_KEY.search(key):
            return True
        return any(
            not self._is_optimizer(owner)
            and not self._receivers.looks_like(_expr(owner))
            and not SCHEDULER_KEY.search(last_part(owner))
            for owner in _state_owners(value)
        )

    def _scaler_state(self, key: str | None, value: cst.BaseExpression) -> bool:
        if key is not None and SCALER_KEY.search(key):
            return True
        return any(
            isinstance(node, cst.Name | cst.Attribute) and self._receivers.looks_like(node)
            for node in walk(value)
        )

    # -- resumes -------------------------------------------------------------------------------

    def optimizer_loads(self, root: cst.FunctionDef | None = None) -> Iterator[cst.Call]:
        """``<optimizer>.load_state_dict(...)`` calls in ``root`` (None: the module) that
        restore a checkpoint: their argument is read from one (see `reads_a_checkpoint`)."""
        for call in self._calls(root):
            if _method(call) == "load_state_dict" and call.args:
                owner = dotted_name(call.func.value)  # type: ignore[attr-defined]
                if (
                    owner is not None
                    and self._is_optimizer(owner)
                    and self.reads_a_checkpoint(call.args[0].value, call)
                ):
                    yield call

    def resume_loads(self, loads: Iterable[cst.Call]) -> list[cst.Call]:
        """The first of ``loads`` in each function (a resume is one, whatever branches it
        loads the optimizer in), leaving out the loads only a TPU/XLA branch runs
        (``if is_torch_tpu_available():``): no GradScaler scales there."""
        kept: dict[cst.CSTNode | None, cst.Call] = {}
        for load in loads:
            if not self._on_xla_branch(load):
                kept.setdefault(self._index.enclosing_function(load), load)
        return list(kept.values())

    def _on_xla_branch(self, node: cst.CSTNode) -> bool:
        index = self._index
        child = node
        for ancestor in index.ancestors(node):
            if (
                isinstance(ancestor, cst.If)
                and child is ancestor.body
                and _XLA_TEST.search(index.module.code_for_node(ancestor.test))
            ):
                return True
            child = ancestor
        return False

    def reads_a_checkpoint(self, value: cst.BaseExpression, at: cst.CSTNode) -> bool:
        """``value`` comes out of a loaded file: ``ckpt["optimizer"]``, ``torch.load(...)``, or a
        name bound to one of those earlier in the same function. Not a parameter passed on (an
        optimizer wrapper's ``load_state_dict(state_dict)``) nor a state moved between devices
        (``optimizer.load_state_dict(move_to_device(optimizer.state_dict()))``)."""
        if isinstance(value, cst.Subscript):
            return any(
                isinstance(e.slice, cst.Index) and _key_text(e.slice.value) is not None
                for e in value.slice
            )
        if isinstance(value, cst.Call):
            callee = dotted_name(value.func)
            if callee is not None and last_part(callee) in self._records():
                # `Snapshot(**torch.load(path))`: a record of the loaded checkpoint's entries.
                return any(self.reads_a_checkpoint(arg.value, at) for arg in value.args)
            return callee is not None and LOADER_NAME.search(last_part(callee)) is not None
        if isinstance(value, cst.Attribute) and value.attr.value in (
            self._carried_optimizer_attributes()
        ):
            # `self.model.optimizer_state_dict`: the state the object's save carried, back from
            # the file it was loaded from.
            return True
        if isinstance(value, cst.Attribute) and isinstance(value.value, cst.Name):
            # `snapshot.optimizer_state` of a record (or namespace) read from a checkpoint.
            return self.reads_a_checkpoint(value.value, at)
        if not isinstance(value, cst.Name):
            return False
        index = self._index
        scope = index.enclosing_function(at) or index.module
        bindings = [
            assign
            for assign in _under(scope, index, cst.Assign)
            if any(dotted_name(t.target) == value.value for t in assign.targets)
            and index.order[assign] < index.order[at]
        ]
        return bool(bindings) and self.reads_a_checkpoint(bindings[-1].value, bindings[-1])

    def restores_a_scaler(self, root: cst.FunctionDef | None = None) -> bool:
        """``root`` (None: the module) loads a scaler's state, reads a scaler's checkpoint key
        (not one it assigns: that is a save being built), or hands a scaler to a loader it does
        not show (``resume(path, model, scaler)``)."""
        for call in self._calls(root):
            method = _method(call)
            receiver = call.func.value if isinstance(call.func, cst.Attribute) else None
            if (
                method == "load_state_dict"
                and receiver is not None
                and self._receivers.looks_like(receiver)
            ):
                return True
            callee = dotted_name(call.func) or ""
            if RESTORER_NAME.search(last_part(callee)) and any(
                self._receivers.looks_like(arg.value) for arg in call.args
            ):
                return True
        nodes = list(self._index.nodes(cst.Subscript) if root is None else descendants(root))
        assigns = self._index.nodes(cst.Assign) if root is None else nodes
        # `checkpoint["scaler"] = scaler.state_dict()` writes the key of a save, it reads nothing.
        written = {
            target
            for a in assigns
            if isinstance(a, cst.Assign)
            for t in a.targets
            for target in _assigned(t.target)
        }
        for node in nodes:
            if isinstance(node, cst.Subscript) and node not in written:
                for element in node.slice:
                    key = _key_text(getattr(element.slice, "value", None))
                    if key is not None and self._reads_scaler_key(key, node):
                        return True
        return False

    def _reads_scaler_key(self, key: str, read: cst.Subscript) -> bool:
        """``read`` takes a scaler's entry out of a checkpoint. A key that names a scaler
        (``ckpt["scaler"]``) says so wherever it is read; ``"amp"`` is also what settings call
        the switch (``config["amp"]``, ``params["enable_amp"]``), so it counts only when read
        from a loaded file (apex's ``checkpoint["amp"]``)."""
        if not SCALER_KEY.search(key):
            return False
        return "scaler" in key.lower() or self.reads_a_checkpoint(read.value, read)


def confining_functions(
    index: ModuleIndex, constructors: list[cst.Call]
) -> set[cst.CSTNode] | None:
    """The functions that hold every GradScaler of the module as a plain local that never
    leaves them (``scaler = GradScaler()`` used only through its own methods: not stored on
    ``self``, returned or handed to a call), or None when one may outlive its function.

    A scaler confined to a per-epoch function (``def _train_epoch(): scaler = GradScaler()``)
    starts over every epoch: a checkpoint written elsewhere has no scaler state to keep.
    """
    owners: set[cst.CSTNode] = set()
    for constructor in constructors:
        assign = index.parent.get(constructor)
        function = index.enclosing_function(constructor)
        if not isinstance(assign, cst.Assign) or function is None or len(assign.targets) != 1:
            return None
        target = assign.targets[0].target
        if not isinstance(target, cst.Name):
            return None
        name = target.value
        for node in descendants(function):
            if isinstance(node, cst.Call) and any(
                isinstance(arg.value, cst.Name) and arg.value.value == name for arg in node.args
            ):
                return None  # handed on: it may be saved there
            if (
                isinstance(node, cst.Return)
                and node.value is not None
                and _mentions_name(node.value, name)
            ):
                return None
            if (
                isinstance(node, cst.Assign)
                and node is not assign
                and _mentions_name(node.value, name)
            ):
                return None  # aliased or stored (`self.scaler = scaler`)
        owners.add(function)
    return owners


def readable_at(name: str, save: cst.Call, index: ModuleIndex) -> bool:
    """``name`` can be read where ``save`` runs: bound in its function or at module level, or
    an attribute of ``self`` in a method of the class that assigns it."""
    function = index.enclosing_function(save)
    for assign in index.nodes(cst.Assign):
        if not any(dotted_name(t.target) == name for t in assign.targets):
            continue
        where = index.enclosing_function(assign)
        if name.startswith("self."):
            if index.enclosing_class(assign) is not None and index.enclosing_class(
                assign
            ) is index.enclosing_class(save):
                return True
        elif where is None or where is function:
            return True
    return function is not None and any(
        param.name.value == name for param in function.params.params
    )


def _record_classes(index: ModuleIndex) -> frozenset[str]:
    records = set()
    for node in index.nodes(cst.ClassDef):
        decorators = [
            dotted_name(d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator)
            for d in node.decorators
        ]
        bases = [dotted_name(base.value) for base in node.bases if base.keyword is None]
        if any(name and last_part(name) == "dataclass" for name in decorators) or any(
            name and last_part(name) == "NamedTuple" for name in bases
        ):
            records.add(node.name.value)
    return frozenset(records)


def _record_as_dict(call: cst.Call) -> str | None:
    """``x`` of ``asdict(x)`` (``dataclasses.asdict``) or ``x._asdict()``."""
    callee = dotted_name(call.func)
    if callee is None:
        return None
    if last_part(callee) == "asdict" and len(call.args) == 1 and call.args[0].keyword is None:
        argument = call.args[0].value
        return argument.value if isinstance(argument, cst.Name) else None
    if last_part(callee) == "_asdict" and not call.args and isinstance(call.func, cst.Attribute):
        owner = call.func.value
        return owner.value if isinstance(owner, cst.Name) else None
    return None


def _assigned(target: cst.BaseExpression) -> Iterator[cst.BaseExpression]:
    """What an assignment target binds: itself, or each element of a tuple or list target."""
    if isinstance(target, cst.Tuple | cst.List):
        for element in target.elements:
            yield from _assigned(element.value)
    else:
        yield target


def _mentions_name(node: cst.CSTNode, name: str) -> bool:
    return any(isinstance(n, cst.Name) and n.value == name for n in walk(node))


def _literal_entries(value: cst.Dict) -> list[Entry] | None:
    entries: list[Entry] = []
    for element in value.elements:
        if not isinstance(element, cst.DictElement):
            return None  # **spread: unknown content
        entries.append((_key_text(element.key), element.value))
    return entries


def _keyword_entries(call: cst.Call) -> list[Entry] | None:
    if any(arg.keyword is None for arg in call.args):
        return None
    return [(arg.keyword.value, arg.value) for arg in call.args if arg.keyword is not None]


def _update_entries(call: cst.Call) -> list[Entry] | None:
    if len(call.args) == 1 and call.args[0].keyword is None:
        value = call.args[0].value
        return _literal_entries(value) if isinstance(value, cst.Dict) else None
    return _keyword_entries(call)


def _is_literal(value: cst.BaseExpression) -> bool:
    """``None``, ``True``, a number or a string: a value that holds no state."""
    if isinstance(value, cst.Name):
        return value.value in {"None", "True", "False"}
    return isinstance(value, cst.SimpleString | cst.ConcatenatedString | cst.Integer | cst.Float)


def _key_text(key: cst.BaseExpression | None) -> str | None:
    if isinstance(key, cst.SimpleString):
        text = key.evaluated_value
        return text if isinstance(text, str) else None
    return None


def _subscript_key(target: cst.BaseExpression, name: str) -> str | None:
    """``"k"`` of ``name["k"]``; ``""`` for a key that is not a string literal."""
    if not (isinstance(target, cst.Subscript) and dotted_name(target.value) == name):
        return None
    element = target.slice[0].slice
    return (_key_text(element.value) if isinstance(element, cst.Index) else None) or ""


def _state_owners(value: cst.BaseExpression) -> Iterator[str]:
    """Dotted text of what ``.state_dict()`` is called on in ``value``; ``<call>`` for
    ``unwrap(model).state_dict()``."""
    for node in walk(value):
        if (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Attribute)
            and node.func.attr.value == "state_dict"
        ):
            yield dotted_name(node.func.value) or "<call>"


def _expr(dotted: str) -> cst.BaseExpression:
    return cst.parse_expression(dotted) if dotted != "<call>" else cst.Name("_")


def _mentions(call: cst.Call, name: str) -> bool:
    """``call`` reads the variable ``name``: not a method or keyword spelled the same
    (``state_dict = {"model": model.state_dict()}`` names a dict that ``.state_dict()`` does not
    read)."""
    nodes = list(walk(call))
    spellings = {n.attr for n in nodes if isinstance(n, cst.Attribute)}
    spellings |= {n.keyword for n in nodes if isinstance(n, cst.Arg) and n.keyword is not None}
    return any(isinstance(n, cst.Name) and n.value == name and n not in spellings for n in nodes)


def _under(scope: cst.CSTNode, index: ModuleIndex, kind: type[_Node]) -> Iterator[_Node]:
    """Nodes of ``kind`` directly in ``scope`` (not in functions nested in it); a function
    grafted from another module is walked, as the index does not collect its nodes."""
    own = index.shared("checkpoints.own_functions", lambda: set(index.nodes(cst.FunctionDef)))
    if scope is index.module or scope in own:  # the module's own code: its nodes, grouped once
        by_scope = index.shared(("checkpoints.by_scope", kind), lambda: _by_scope(index, kind))
        yield from by_scope.get(scope, ())
        return
    for node in descendants(scope):
        if isinstance(node, kind) and (index.enclosing_function(node) or index.module) is scope:
            yield node


def _by_scope(index: ModuleIndex, kind: type[_Node]) -> dict[cst.CSTNode, list[_Node]]:
    """The index's nodes of ``kind`` by the function directly holding them (or the module)."""
    found: dict[cst.CSTNode, list[_Node]] = {}
    for node in index.nodes(kind):
        found.setdefault(index.enclosing_function(node) or index.module, []).append(node)
    return found


def _method(call: cst.Call) -> str | None:
    return call.func.attr.value if isinstance(call.func, cst.Attribute) else None


def checkpoints(
    index: ModuleIndex, receivers: ScalerReceivers, is_optimizer: Callable[[str], bool]
) -> Checkpoints:
    """The module's `Checkpoints`, built once and shared."""
    return index.shared(Checkpoints, lambda: Checkpoints(index, receivers, is_optimizer))
