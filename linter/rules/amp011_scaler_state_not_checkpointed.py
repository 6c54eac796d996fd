"""AMP011 scaler-state-not-checkpointed."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import libcst as cst

from linter._fix import UNSAFE, NodeFix
from linter._fix_edits import with_dict_entry
from linter._rule import Example, Finding, ModuleContext, Rule
from linter.model.iterations import Kind, TrainingIterations, of_module
from linter.model.syntax import ModuleIndex, module_index
from linter.model.values import (
    CheckpointWrite,
    ScalerReceivers,
    checkpoint_helpers,
    checkpoints,
    confining_functions,
    readable_at,
)


class ScalerStateNotCheckpointed(Rule):
    """A resume checkpoint saved or loaded without the GradScaler's state.

    ## What it does
    In a file that trains through a GradScaler (it creates one that is not `enabled=False`, or
    steps through `scaler.step`/`scaler.scale(loss).backward()`), flags:

    - a **save** of a resume checkpoint — `torch.save` (or `save_on_master`,
      `accelerator.save`, a `save_checkpoint(state, ...)` helper) of a dict that holds the
      model's and the optimizer's `state_dict()` — with no entry for the scaler's state: no
      `scaler.state_dict()`, no key naming a scaler. The dict may be a literal, a `dict(...)`
      call, or a name built up in the same function (`ckpt = {...}`, `ckpt["epoch"] = epoch`,
      `ckpt.update(...)`) and then saved; a record of the file (a dataclass or `NamedTuple`
      built with keywords, `Snapshot(model_state=..., optimizer_state=...)`) counts as the dict
      of its fields, saved as it is or through `asdict(...)` / `._asdict()`; a checkpoint
      written as a folder of files (`torch.save(optimizer.state_dict(), ".../optimizer.pt")`
      in a function that saves the model's weights too, by `save_pretrained`, the Hugging Face
      Trainer's `save_model` or a `state_dict()`) is one, kept whole by a save of the scaler's
      state there; a model that saves itself (`self.model.save(path)`) after its function
      set the optimizer's state on it (flair's `self.model.optimizer_state_dict =
      self.optimizer.state_dict()`) saves those attributes with its weights, and keeps the
      scaler's only if that is set on it too; a save only a TPU/XLA branch runs
      (`if using_tpu: xm.save(...)`) is left out;
    - a **resume** that loads the optimizer's state (`optimizer.load_state_dict(...)` of a
      checkpoint's entry, or of a field of a record built from one, or of the attribute such a
      self-saving model carries it in: `self.model.optimizer_state_dict`) in a file that never
      restores the scaler's (no `scaler.load_state_dict(...)`, no read of a `"scaler"` key),
      once per resume function, whichever branches load it; a load only a TPU/XLA branch runs
      (`if is_torch_tpu_available():`) is left out, as no GradScaler scales there.

    Not reported: exports (the model's state alone), a disabled scaler, checkpoints whose
    content the file does not show (a `**spread`, the dict handed to another function before
    the save, unless only a branch that does not save hands it on), and frameworks that save
    the scaler themselves — Accelerate's `save_state`, Lightning's and the Hugging Face
    Trainer's checkpoints.

    A save helper in another module (`utils.save_checkpoint(model, optimizer, epoch)` called
    from the trainer that owns the scaler) is reported at the call in the trainer, with the
    helper's `torch.save` as a related location, once amp-lint reads the whole project; so is a
    helper that saves what it is handed (`misc.save_model(..., states=g_states)` with
    `torch.save(states, path)` there), judged by the dict the call hands it, whatever the
    helper is named, and once per call however many times the helper saves it. A
    helper of the same module (a function, or a method called as `self._save(...)`) that the
    function holding the scaler calls without handing it the scaler is reported once, at its
    save, with that call as a related location. A
    scaler wrapper object of another module's class that the trainer builds and calls
    (`loss_scaler = NativeScaler()`, then `loss_scaler(loss, optimizer, ...)`, whose
    `__call__` scales and steps) makes the trainer's file one that trains through a GradScaler:
    its checkpoints must hold `loss_scaler.state_dict()`.

    ## Why is this bad?
    The GradScaler's state is the scale it has learned (often far below the initial 65536 for
    large models) and its growth tracker. A checkpoint without it resumes at `init_scale`: the
    first steps after every restart overflow and are skipped until the scale has backed off
    again, the growth schedule restarts, and a run that was stable before the restart can
    diverge after it — the loss curve of a resumed run differs from one that never stopped.
    PyTorch's AMP examples save and load `scaler.state_dict()` with the model and optimizer.

    ## Example
    ```python
    scaler = torch.amp.GradScaler("cuda")
    ...
    torch.save(
        {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch},
        "last.pt",
    )
    ```

    ## Use instead
    ```python
    torch.save(
        {
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "scaler": scaler.state_dict(),
            "epoch": epoch,
        },
        "last.pt",
    )
    # and on resume: scaler.load_state_dict(checkpoint["scaler"])
    ```

    ## Fix safety
    When the checkpoint is a dict literal and one GradScaler is in reach of the save, the fix
    adds `"scaler": <scaler>.state_dict()` to it. It is unsafe: the checkpoint's format changes,
    and the code that loads it must restore the entry too.

    ## References
    - [huggingface/transformers#34053](https://github.com/huggingface/transformers/issues/34053):
      a run resumed from a checkpoint follows a different learning rate; the reproduction traces
      it to the GradScaler restarting at 65536 where the uninterrupted run had reached 256, so
      the resumed step overflows and is skipped. The Trainer itself had started saving the
      scaler in [PR #11663](https://github.com/huggingface/transformers/pull/11663), so that a
      resumed run matches a complete one
    - [ultralytics/ultralytics#22189](https://github.com/ultralytics/ultralytics/pull/22189),
      [facebookresearch/detectron2#3686](https://github.com/facebookresearch/detectron2/pull/3686),
      [mosaicml/composer#1376](https://github.com/mosaicml/composer/pull/1376): trainers that
      had to add the GradScaler's state to their checkpoints (or restore it at the right time)
      because resumed runs lost it
    - [allenai/tango#154](https://github.com/allenai/tango/issues/154),
      [pytorch/torchtitan#146](https://github.com/pytorch/torchtitan/issues/146),
      [facebookresearch/fairseq2#1346](https://github.com/facebookresearch/fairseq2/issues/1346):
      the scaler missing from the train state in other stacks;
      [facebookresearch/metaseq#3](https://github.com/facebookresearch/metaseq/issues/3): a
      dynamic loss scaler whose counters are not checkpointed makes the loss scale depend on
      when a run was restarted
    - PyTorch's [AMP examples](https://docs.pytorch.org/docs/stable/notes/amp_examples.html),
      "Saving/Resuming": save and load `scaler.state_dict()` with the model and optimizer
    """

    code = "AMP011"
    name = "scaler-state-not-checkpointed"
    summary = (
        "a resume checkpoint (model + optimizer state) is saved or loaded without the "
        "GradScaler's state"
    )
    # The file must train through a GradScaler itself, and every way it shows one names it
    # (`GradScaler(...)`, `scaler.step`, `self.grad_scaler`); the checkpoint may be written by a
    # helper of another module, so `state_dict` need not appear here.
    triggers = ("scaler", "Scaler")
    fix_availability = UNSAFE
    valid = (
        Example(
            """\
scaler = torch.amp.GradScaler("cuda")
torch.save(
    {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scaler": scaler.state_dict(),
    },
    "last.pt",
)
"""
        ),
        Example(
            """\
scaler = torch.amp.GradScaler("cuda")
torch.save(model.state_dict(), "weights.pt")  # an export: the weights alone
torch.save({"model": model.state_dict(), "config": config}, "model.pt")
"""
        ),
        Example(
            """\
scaler = torch.amp.GradScaler("cuda", enabled=False)  # never scales: no state to keep
torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, "last.pt")
"""
        ),
        Example(
            """\
def save(model, optimizer, scaler, epoch, path):
    checkpoint = {"model": model.state_dict(), "optimizer": optimizer.state_dict()}
    if scaler is not None:
        checkpoint["scaler"] = scaler.state_dict()
    checkpoint["epoch"] = epoch
    torch.save(checkpoint, path)


scaler = torch.amp.GradScaler("cuda")
"""
        ),
        Example(
            """\
accelerator = Accelerator(mixed_precision="fp16")
model, optimizer = accelerator.prepare(model, optimizer)
accelerator.save_state("checkpoints/")  # saves the scaler's state itself
"""
        ),
        Example(
            """\
scaler = torch.amp.GradScaler("cuda")
checkpoint = torch.load("last.pt")
model.load_state_dict(checkpoint["model"])
optimizer.load_state_dict(checkpoint["optimizer"])
scaler.load_state_dict(checkpoint["scaler"])
"""
        ),
        Example(
            """\
scaler = torch.amp.GradScaler("cuda")
torch.save(  # what `extra` holds is not known here
    {"model": model.state_dict(), "optimizer": optimizer.state_dict(), **extra},
    "last.pt",
)
"""
        ),
        Example(
            """\
@dataclass
class Snapshot:
    model_state: dict
    optimizer_state: dict
    scaler_state: dict


scaler = torch.amp.GradScaler("cuda")
snapshot = Snapshot(
    model_state=model.state_dict(),
    optimizer_state=optimizer.state_dict(),
    scaler_state=scaler.state_dict(),
)
torch.save(asdict(snapshot), "snapshot.pt")
"""
        ),
    )
    invalid = (
        Example(
            """\
scaler = torch.amp.GradScaler("cuda")
for epoch in range(epochs):
    train_one_epoch(model, loader, optimizer, scaler)
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, "last.pt")
""",
            (4,),
        ),
        Example(
            """\
def train(model, loader, optimizer, epochs, path):
    scaler = torch.amp.GradScaler("cuda")
    for epoch in range(epochs):
        for batch in loader:
            scaler.scale(model(batch).loss).backward()
            scaler.step(optimizer)
            scaler.update()
        checkpoint = {
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
        }
        checkpoint["epoch"] = epoch
        torch.save(checkpoint, path)
""",
            (13,),
        ),
        Example(
            """\
class Trainer:
    def __init__(self, model, optimizer):
        self.model, self.optimizer = model, optimizer
        self.scaler = torch.amp.GradScaler("cuda")

    def save_checkpoint(self, path, step):
        torch.save(
            {
                "step": step,
                "state_dict": self.model.state_dict(),
                "optimizer": self.optimizer.state_dict(),
            },
            path,
        )
""",
            (7,),
        ),
        Example(
            """\
scaler = torch.amp.GradScaler("cuda")
if args.resume:
    checkpoint = torch.load(args.resume, map_location="cpu")
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    start_epoch = checkpoint["epoch"] + 1
""",
            (5,),
        ),
        Example(
            """\
def train_one_epoch(model, loader, optimizer, scaler, epoch, output_dir):
    for images, targets in loader:
        with torch.autocast("cuda", dtype=torch.float16):
            loss = criterion(model(images), targets)
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    utils.save_on_master(
        dict(model=model.state_dict(), optimizer=optimizer.state_dict(), epoch=epoch),
        f"{output_dir}/checkpoint.pth",
    )
""",
            (9,),
        ),
        Example(
            """\
@dataclass
class Snapshot:
    model_state: dict
    optimizer_state: dict
    finished_epoch: int


class Trainer:
    def __init__(self, model, optimizer):
        self.model, self.optimizer = model, optimizer
        self.scaler = torch.amp.GradScaler("cuda")

    def load_snapshot(self, path):
        snapshot = Snapshot(**torch.load(path))
        self.model.load_state_dict(snapshot.model_state)
        self.optimizer.load_state_dict(snapshot.optimizer_state)

    def save_snapshot(self, epoch, path):
        snapshot = Snapshot(
            model_state=self.model.state_dict(),
            optimizer_state=self.optimizer.state_dict(),
            finished_epoch=epoch,
        )
        snapshot = asdict(snapshot)
        if path.startswith("s3://"):
            upload(snapshot, path)
        else:
            torch.save(snapshot, path)
""",
            (16, 28),
        ),
        Example(
            """\
class Trainer:
    def __init__(self, model, optimizer):
        self.model, self.optimizer = model, optimizer
        self.scaler = torch.amp.GradScaler("cuda")

    def resume(self, path):
        if is_torch_tpu_available():  # no GradScaler on TPU
            state = torch.load(path, map_location="cpu")
            self.optimizer.load_state_dict(state)
        else:  # one resume, one report
            self.optimizer.load_state_dict(torch.load(path, map_location=self.device))
""",
            (11,),
        ),
        Example(
            """\
def save_checkpoint(state, is_best, filename="checkpoint.pth.tar"):
    torch.save(state, filename)


scaler = torch.amp.GradScaler("cuda")
save_checkpoint(
    {"epoch": epoch + 1, "state_dict": model.state_dict(), "optimizer": optimizer.state_dict()},
    is_best,
)
""",
            (6,),
        ),
    )

    def check(self, context: ModuleContext) -> Iterable[Finding]:
        index = module_index(context)
        iterations = of_module(context)
        receivers = iterations.receivers
        constructors = [  # a factory's `return GradScaler(...)` trains nothing here
            call
            for call in index.nodes(cst.Call)
            if receivers.is_constructor_call(call)
            and not isinstance(index.parent.get(call), cst.Return)
        ]
        scaled = iterations.events_where(
            lambda e: e.kind in (Kind.SCALER_STEP, Kind.SCALED_BACKWARD)
        )
        if not constructors and not scaled:
            return
        if (
            not constructors
            and any(receivers.is_constructor_call(n) for n in context.foreign)
            and all(e.call in context.foreign for e in scaled)
        ):
            # The scaler is built and used in a function of another module this one calls (a
            # `train_one_epoch` that makes its own, a `train()` an HPO script calls): it lives
            # and is checkpointed (or not) there, and that module's own lint says so. One this
            # module steps (`model.grad_scaler`, built by the model's class) is this one's.
            return
        found = checkpoints(index, receivers, iterations.is_optimizer)
        trainer = ((constructors[0] if constructors else scaled[0].call), _TRAINER)
        helpers = checkpoint_helpers(context, index, iterations.is_optimizer)
        writes = [*found.writes, *(w for helper in helpers for w in found.writes_in(helper))]
        owners = confining_functions(index, constructors) if constructors else None
        if owners is not None and any(
            index.enclosing_function(e.call) not in owners for e in scaled
        ):
            owners = None  # another scaler steps outside them

        def home(node: cst.CSTNode) -> cst.CSTNode | None:
            # A save in a helper of another module runs where the helper is called.
            site = context.foreign.get(node)
            return index.enclosing_function(site.via if site is not None else node)

        called: set[cst.CSTNode] = set()  # where a save was reported
        for write in writes:
            if owners is not None and home(write.call) not in owners:
                # The scaler lives in one call of another function: nothing to keep, unless
                # that function calls this one to save (a helper of this module, handed the
                # model and optimizer): the save runs there, so it is judged at that call.
                yield from _helper_save(context, write, owners, iterations, trainer)
                continue
            site = context.foreign.get(write.call)
            if site is not None and _hands_a_scaler(site.via, receivers):
                continue  # `save_checkpoint(..., scaler=scaler)`: the helper is given it
            if not write.holds_scaler:
                local = write.call not in context.foreign
                # One finding per call: a helper that saves again (`last.tar`, then
                # `best.tar`), or a saver by name (`save_model_c(states, ...)`) whose body the
                # project shows too.
                at = write.call if site is None else site.via
                if at in called:
                    continue
                called.add(at)
                yield Finding(
                    write.call,
                    "this resume checkpoint saves the model's and the optimizer's state but not "
                    "the GradScaler's: a resumed run restarts from the initial scale and "
                    f"overflows until it backs off again; add {write.remedy}",
                    related=(trainer,),
                    fix=_fix(write, index, receivers) if local else None,
                )
        if found.restores_a_scaler() or any(found.restores_a_scaler(h) for h in helpers):
            return
        loads = [*found.optimizer_loads(), *(c for h in helpers for c in found.optimizer_loads(h))]
        resumes: set[cst.CSTNode | None] = set()
        for load in found.resume_loads(loads):
            resume = home(load)
            if (owners is not None and resume not in owners) or resume in resumes:
                continue  # a helper of another module loads twice in one resume (vits: G, D)
            resumes.add(resume)
            yield Finding(
                load,
                "this resume loads the optimizer's state but the GradScaler's is never loaded: "
                "the resumed run restarts from the initial scale; also call "
                '`scaler.load_state_dict(checkpoint["scaler"])`',
                related=(trainer,),
            )


#: How a finding names the scaler it is about.
_TRAINER = "the GradScaler this file trains through"


def _helper_save(
    context: ModuleContext,
    write: CheckpointWrite,
    owners: set[cst.CSTNode],
    iterations: TrainingIterations,
    trainer: tuple[cst.CSTNode, str],
) -> Iterator[Finding]:
    """``write`` in a function of this module (``save_checkpoint(path, epoch, model,
    optimizer)``, ``self.save_model(...)``) that the functions holding the scaler call without
    handing it a scaler: one finding at the save, the first such call related."""
    helper = module_index(context).enclosing_function(write.call)
    if write.holds_scaler or write.call in context.foreign or helper is None:
        return
    calls = [
        call
        for call in iterations.calls_of(helper, owners)
        if not _hands_a_scaler(call, iterations.receivers)
    ]
    if calls:
        yield Finding(
            write.call,
            "this resume checkpoint saves the model's and the optimizer's state but not the "
            f"GradScaler's, which lives where `{helper.name.value}()` is called: a resumed run "
            "restarts from the initial scale and overflows until it backs off again; pass it "
            f"the scaler and add {write.remedy}",
            related=((calls[0], "called here, where the scaler lives"), trainer),
        )


def _hands_a_scaler(call: cst.CSTNode, receivers: ScalerReceivers) -> bool:
    """The call passes a GradScaler (``scaler=train_state.scaler``, ``save(model, scaler)``)."""
    return isinstance(call, cst.Call) and any(
        (arg.keyword is not None and "scaler" in arg.keyword.value.lower())
        or receivers.looks_like(arg.value)
        for arg in call.args
    )


def _fix(write: CheckpointWrite, index: ModuleIndex, receivers: ScalerReceivers) -> NodeFix | None:
    """Add ``"scaler": <scaler>.state_dict()`` to the literal, when one scaler is in reach: a
    proven one bound where the save can read it, or a scaler parameter of the saving function."""
    literal = write.literal
    if literal is None or not literal.elements:
        return None
    function = index.enclosing_function(write.call)
    params = {p.name.value for p in function.params.params} if function is not None else set()
    reachable = sorted(
        {name for name in receivers.proven if readable_at(name, write.call, index)}
        | {name for name in params if receivers.looks_like(cst.Name(name))}
    )
    if len(reachable) != 1:
        return None
    replacement = with_dict_entry(literal, '"scaler"', f"{reachable[0]}.state_dict()", index)
    return NodeFix(f'add "scaler": {reachable[0]}.state_dict()', ((literal, replacement),), UNSAFE)
