"""Checkpoint and LR-scheduler pieces of the generated training programs, each knowing the
AMP011 and AMP015 findings it must get.

A piece is a list of source lines. A line that must be reported ends with a mark (`MARK` and the
code) that `TrainingProgram` strips and turns into an expected (code, line); the marks survive
the indenting and moving around that `training_programs` does. What each piece expects follows
from how it was drawn, as the rules' documentation says, never from running them:

- AMP011, in a module that trains through an enabled GradScaler: a save of a dict holding the
  model's and the optimizer's state and nothing that names the scaler's is reported at the save;
  a resume that loads the optimizer's state is reported when no resume of the module restores
  the scaler's (`RESUME_MARK`, settled once the whole program is drawn). Exports (no optimizer
  state), a ``**spread`` (content unknown) and framework-owned saves are not.
- AMP015: a scheduler stepped with no argument in a loop or function that steps the scaler is
  reported, unless a skip check holds it back, an unreadable (periodic) test guards it, or it is
  wrapped so that it holds itself back (`SkipAwareScheduler`, ``accelerator.prepare``); one
  stepped in an epoch loop is not.

The pieces train through a GradScaler of their own (`PIECES_SCALER`): the statements drawn
around them rebind ``scaler`` at random, and a name bound to a disabled GradScaler anywhere in
a module is no scaler to the rules, so what a piece expects would hang on its neighbours.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hypothesis import strategies as st

#: Codes whose findings the programs predict.
PREDICTED = ("AMP011", "AMP015")
#: Ends a line that must be reported; the code follows it.
MARK = "\x00"
#: The mark of an optimizer-state load, reported only when no resume restores the scaler.
RESUME_MARK = MARK + "AMP011-resume"
#: Marks a resume's restore of the scaler's state (not a finding: it settles `RESUME_MARK`).
SCALER_RESTORE_MARK = MARK + "restores-scaler"


@dataclass(frozen=True, slots=True)
class TrainingProgram:
    """A generated module and the findings of the `PREDICTED` rules it must get."""

    #: The module's text.
    source: str
    #: (code, 1-based line) of each finding of the `PREDICTED` rules.
    expected: frozenset[tuple[str, int]]

    @classmethod
    def from_lines(cls, lines: list[str], *, scaler_trains: bool = True) -> TrainingProgram:
        """Strip the marks; ``scaler_trains=False`` (every scaler disabled): nothing to keep."""
        restored = any(line.endswith(SCALER_RESTORE_MARK) for line in lines)
        text, expected = [], set()
        for number, line in enumerate(lines, start=1):
            code, _, mark = line.partition(MARK)
            text.append(code)
            if mark == RESUME_MARK.removeprefix(MARK):
                mark = "" if restored else "AMP011"
            if mark == "AMP011" and not scaler_trains:
                mark = ""
            if mark in PREDICTED:
                expected.add((mark, number))
        return cls("\n".join(text) + "\n", frozenset(expected))


def _indent(lines: list[str], depth: int = 1) -> list[str]:
    return ["    " * depth + line for line in lines]


# -- checkpoints (AMP011) ------------------------------------------------------------------------

#: Checkpoint entries (key, value template) by the state they hold; ``{m}``, ``{o}``, ``{s}``
#: are the model, the optimizer and the scaler where the piece is placed.
MODEL_ENTRIES = (
    ("model", "{m}.state_dict()"),
    ("state_dict", "{m}.module.state_dict()"),
    ("net", "unwrap({m}).state_dict()"),
)
OPTIMIZER_ENTRIES = (
    ("optimizer", "{o}.state_dict()"),
    ("optim", "{o}.state_dict()"),
    ("opt_state", "{o}.state_dict()"),
)
SCALER_ENTRIES = (
    ("scaler", "{s}.state_dict()"),
    ("grad_scaler", "{s}.state_dict()"),
    ("amp", "{s}.state_dict()"),
    ("loss_scale", "{s}.state_dict()"),
)
EXTRA_ENTRIES = (("epoch", "epoch"), ("step", "step"), ("config", "config"), ("best_acc", "acc"))
SAVERS = ("torch.save", "utils.save_on_master", "accelerator.save", "xm.save")
PATHS = ('"last.pt"', "path", 'f"{out_dir}/checkpoint_{epoch}.pth"')
#: Saves that the framework makes, with the scaler's state in them: never reported.
FRAMEWORK_SAVES = (
    'accelerator.save_state("checkpoints/")',
    'trainer.save_checkpoint("last.ckpt")',
    'model.save_pretrained("out")',
)
#: Exports: the weights alone, no optimizer state to resume from.
EXPORTS = ('torch.save(model.state_dict(), "weights.pt")', 'torch.save(model, "model.pt")')
#: Where a piece is placed: the lines before it, its depth, and the names it uses (model,
#: optimizer, scaler).
SITES = (
    ((), 0, ("model", "optimizer", "scaler")),
    (
        ("for epoch in range(epochs):", "    train_one_epoch(model, loader, optimizer, scaler)"),
        1,
        ("model", "optimizer", "scaler"),
    ),
    (("def end_of_epoch(epoch, path):",), 1, ("model", "optimizer", "scaler")),
    (
        ("class Checkpointer:", "    def write(self, epoch, path):"),
        2,
        ("self.model", "self.optimizer", "self.scaler"),
    ),
)
#: Statements that leave a checkpoint being built alone, drawn between its steps.
UNRELATED = ("step += 1", "acc = evaluate(model)", "pass", "log(epoch)")


@st.composite
def checkpoint_save(draw: st.DrawFn, names: tuple[str, str, str]) -> list[str]:
    """A save: of a dict literal (one line or several, perhaps with a ``**spread``), a
    ``dict(...)`` call, or a dict built up over statements; holding some of the model's, the
    optimizer's and the scaler's state."""
    m, o, s = names

    def entries(table: tuple[tuple[str, str], ...], often: bool) -> list[tuple[str, str]]:
        if draw(st.integers(0, 3)) < (1 if often else 2):
            return []
        key, value = draw(st.sampled_from(table))
        return [(key, value.format(m=m, o=o, s=s))]

    held = [
        *entries(MODEL_ENTRIES, often=True),
        *entries(OPTIMIZER_ENTRIES, often=True),
        *entries(SCALER_ENTRIES, often=False),
    ]
    held += [(k, v) for k, v in draw(st.lists(st.sampled_from(EXTRA_ENTRIES), max_size=2))]
    held = draw(st.permutations(held))
    keys = {key for key, _ in held}
    resume = bool(keys & {k for k, _ in MODEL_ENTRIES}) and bool(
        keys & {k for k, _ in OPTIMIZER_ENTRIES}
    )
    with_scaler = bool(keys & {k for k, _ in SCALER_ENTRIES})
    saver, path = draw(st.sampled_from(SAVERS)), draw(st.sampled_from(PATHS))
    form = draw(st.sampled_from(("literal", "lines", "spread", "dict", "built", "built")))
    mark = MARK + "AMP011" if resume and not with_scaler and form != "spread" else ""
    literal = ", ".join(f'"{k}": {v}' for k, v in held)
    if form == "literal":
        return [f"{saver}({{{literal}}}, {path}){mark}"]
    if form == "spread":
        spread = ", ".join([*(f'"{k}": {v}' for k, v in held), "**extra"])
        return [f"{saver}({{{spread}}}, {path})"]
    if form == "dict":
        return [f"{saver}(dict({', '.join(f'{k}={v}' for k, v in held)}), {path}){mark}"]
    if form == "lines":
        entries = [f'        "{k}": {v},' for k, v in held]
        return [f"{saver}({mark}", "    {", *entries, "    },", f"    {path},", ")"]
    # Built up: a literal with the first entries, then one statement per other entry; the
    # scaler's always by a statement of its own, perhaps only when there is a scaler.
    scaler_keys = {k for k, _ in SCALER_ENTRIES}
    rest = [(k, v) for k, v in held if k not in scaler_keys]
    first = draw(st.integers(0, len(rest)))
    opening = ", ".join(f'"{k}": {v}' for k, v in rest[:first])
    lines = [f"checkpoint = {{{opening}}}"]
    for key, value in [*rest[first:], *((k, v) for k, v in held if k in scaler_keys)]:
        lines += draw(st.lists(st.sampled_from(UNRELATED), max_size=1))
        statement = draw(
            st.sampled_from(
                (
                    f'checkpoint["{key}"] = {value}',
                    f"checkpoint.update({key}={value})",
                    f'checkpoint.update({{"{key}": {value}}})',
                )
            )
        )
        if key in scaler_keys and draw(st.booleans()):
            lines += [f"if {s} is not None:", f"    {statement}"]
        else:
            lines.append(statement)
    return [*lines, f"{saver}(checkpoint, {path}){mark}"]


@st.composite
def checkpoint_resume(draw: st.DrawFn, names: tuple[str, str, str]) -> list[str]:
    """A resume: load a checkpoint, restore the model's and the optimizer's state, and perhaps
    the scaler's."""
    m, o, s = names
    lines = ['ckpt = torch.load(path, map_location="cpu")', f'{m}.load_state_dict(ckpt["model"])']
    if draw(st.booleans()):
        lines += [f'{o}.load_state_dict(ckpt["optimizer"]){RESUME_MARK}']
    else:
        lines += [
            'optim_state = ckpt["optimizer"]',
            f"{o}.load_state_dict(optim_state){RESUME_MARK}",
        ]
    restore = draw(st.sampled_from(("none", "none", "plain", "checked", "other key")))
    if restore == "plain":
        lines.append(f'{s}.load_state_dict(ckpt["scaler"]){SCALER_RESTORE_MARK}')
    elif restore == "checked":
        lines += [
            'if "scaler" in ckpt:',
            f'    {s}.load_state_dict(ckpt["scaler"]){SCALER_RESTORE_MARK}',
        ]
    elif restore == "other key":
        lines.append(f'{s}.load_state_dict(ckpt["grad_scaler"]){SCALER_RESTORE_MARK}')
    return [*lines, 'start_epoch = ckpt["epoch"] + 1']


@st.composite
def checkpoint_piece(draw: st.DrawFn) -> list[str]:
    """A save, a resume, an export or a framework's save, at module level, in an epoch loop, in
    a function or in a method (``self.model``...)."""
    header, depth, names = draw(st.sampled_from(SITES))
    kind = draw(st.sampled_from(("save", "save", "resume", "other")))
    if kind == "save":
        body = draw(checkpoint_save(names))
    elif kind == "resume":
        body = draw(checkpoint_resume(names))
        if depth == 0:
            body = ["if args.resume:", *_indent(body)]
    else:
        body = [draw(st.sampled_from((*FRAMEWORK_SAVES, *EXPORTS)))]
    return [*header, *_indent(body, depth)]


# -- LR schedulers (AMP015) ----------------------------------------------------------------------

SCHEDULER_NAMES = ("scheduler", "lr_scheduler", "warmup_scheduler", "sched", "scheduler_g")
#: Right-hand sides that construct a scheduler; None: the name alone says it is one.
SCHEDULER_FACTORIES = (
    "torch.optim.lr_scheduler.StepLR(optimizer, step_size=10)",
    "get_linear_schedule_with_warmup(optimizer, 100, 10_000)",
    "torch.optim.lr_scheduler.OneCycleLR(optimizer, 1e-3, total_steps=1000)",
    None,
)
#: Rebindings after which the scheduler holds itself back on skipped steps; ``{n}`` its name.
SELF_HOLDING = (
    ("from scaler import SkipAwareScheduler", "{n} = SkipAwareScheduler({n}, scaler)"),
    ("import scaler as ampscale", "{n} = ampscale.SkipAwareScheduler({n}, scaler)"),
    ("{n} = accelerator.prepare({n})",),
)
#: Statements before a step that may leave the iteration early, under tests that say nothing
#: about a skipped step: the scheduler's step after them still runs on skipped steps.
EARLY_EXITS = (
    (),
    ("if batch is None:", "    continue"),
    ("if args.dry_run:", "    break"),
    ("if not is_logging_step:", "    log(loss.item())"),
)
#: Loops whose body runs once per step.
STEP_LOOPS = (
    "for step, batch in enumerate(loader):",
    "for i in range(num_steps):",
    "while step < max_steps:",
    "for batch in loader:",
)


@dataclass(frozen=True, slots=True)
class SchedulerHold:
    """What stands between an optimizer step and the scheduler's step after it."""

    #: Lines before the scaler's step.
    before_step: tuple[str, ...]
    #: The scaler's step.
    step: str
    #: Lines after ``scaler.update()``; ``{exit}`` is ``continue`` in a loop, ``return`` in a
    #: function.
    after_update: tuple[str, ...]
    #: The ``if`` header the scheduler's step sits under (``{n}``: its name), or None.
    guard: str | None
    #: Whether the scheduler's step is reported (nothing holds it back on a skipped step).
    reported: bool


_STEP = "scaler.step(optimizer)"
#: The holds: none, configuration tests (they hold nothing back), a periodic guard (unknown:
#: not reported), and skip checks.
HOLDS = (
    SchedulerHold((), _STEP, (), None, True),
    SchedulerHold((), _STEP, (), "if {n} is not None:", True),
    SchedulerHold((), _STEP, (), "if args.use_scheduler:", True),
    SchedulerHold((), _STEP, (), "if step % log_every == 0:", False),
    SchedulerHold((), _STEP, (), "if not scaler.step_skipped():", False),
    SchedulerHold(
        ("scale_before = scaler.get_scale()",),
        _STEP,
        (),
        "if scale_before <= scaler.get_scale():",
        False,
    ),
    SchedulerHold((), "stepped = scaler.step(optimizer)", (), "if stepped is not None:", False),
    SchedulerHold(
        ("scale_before = scaler.get_scale()",),
        _STEP,
        ("skipped = scaler.get_scale() < scale_before", "if skipped:", "    {exit}"),
        None,
        False,
    ),
)


def _scheduler_step(name: str, hold: SchedulerHold, *, wrapped: bool) -> list[str]:
    mark = MARK + "AMP015" if hold.reported and not wrapped else ""
    if hold.guard is None:
        return [f"{name}.step(){mark}"]
    return [hold.guard.format(n=name), f"    {name}.step(){mark}"]


@st.composite
def _optimizer_step(
    draw: st.DrawFn, name: str, wrapped: bool, exit_statement: str, first_allowed: bool
) -> list[str]:
    """A step's lines from the backward on: the scaler's step, the update and the scheduler's
    step with its hold; perhaps under a gradient-accumulation boundary."""
    hold = draw(st.sampled_from(HOLDS))
    after = [line.format(exit=exit_statement) for line in hold.after_update]
    scheduler = _scheduler_step(name, hold, wrapped=wrapped)
    stepping = [*hold.before_step, hold.step, "scaler.update()", *after]
    first = first_allowed and hold.reported and not hold.before_step and draw(st.booleans())
    if draw(st.booleans()):
        boundary = [*stepping, *scheduler, "optimizer.zero_grad()"]
        return [
            "scaler.scale(loss / accum_steps).backward()",
            "if (i + 1) % accum_steps == 0:",
            *_indent(boundary),
        ]
    if first:  # `while ...: scheduler.step(); <the step>`: still once per step
        return [*scheduler, "scaler.scale(loss).backward()", *stepping]
    return ["scaler.scale(loss).backward()", *stepping, *scheduler]


#: The names a trainer's method reads from ``self`` (`scheduler_piece`'s "method" place).
_SELF_OWNED = ("scaler", "optimizer", "model", "loader", "accelerator", *SCHEDULER_NAMES)
_ATTRIBUTES = re.compile(rf"(?<![\w.])({'|'.join(_SELF_OWNED)})\b")


def _on_self(line: str) -> str:
    """``scaler.step(optimizer)`` as a method says it: ``self.scaler.step(self.optimizer)``."""
    code, mark, rest = line.partition(MARK)
    return _ATTRIBUTES.sub(r"self.\1", code) + mark + rest


@st.composite
def scheduler_piece(draw: st.DrawFn, name: str, number: int) -> list[str]:
    """A scheduler (constructed, perhaps made to hold itself back) and where it is stepped: in a
    step loop (perhaps after an early exit under a test that is no skip check), in a function
    that steps, in a trainer's method, in the loop calling such a function, or per epoch."""
    lines = []
    factory = draw(st.sampled_from(SCHEDULER_FACTORIES))
    if factory is not None:
        lines.append(f"{name} = {factory}")
    wrapped = factory is not None and draw(st.integers(0, 3)) == 0
    if wrapped:
        lines += [line.format(n=name) for line in draw(st.sampled_from(SELF_HOLDING))]
    place = draw(st.sampled_from(("loop", "loop", "function", "method", "caller", "epoch")))
    if place == "method":  # a trainer's `optimizer_step`, on its own attributes
        imports = [line for line in lines if line.startswith(("import ", "from "))]
        setup = [_on_self(line) for line in lines if line not in imports]
        step = [_on_self(line) for line in draw(_optimizer_step(name, wrapped, "return", False))]
        return [
            *imports,
            f"class Trainer{number}:",
            "    def __init__(self, model, optimizer, scaler):",
            "        self.model, self.optimizer, self.scaler = model, optimizer, scaler",
            *_indent(setup or ["pass"], 2),
            "    def optimizer_step(self, loss):",
            *_indent(step, 2),
        ]
    if place == "loop":
        body = ["loss = model(batch).loss"]
        body += draw(st.sampled_from(EARLY_EXITS))
        body += draw(_optimizer_step(name, wrapped, "continue", True))
        loop = [draw(st.sampled_from(STEP_LOOPS)), *_indent(body)]
        if draw(st.booleans()):
            loop = ["for epoch in range(epochs):", *_indent(loop)]
        return [*lines, *loop]
    if place == "function":
        function = f"def apply_gradients_{number}(loss):"
        return [*lines, function, *_indent(draw(_optimizer_step(name, wrapped, "return", False)))]
    if place == "caller":
        hold = draw(st.sampled_from([h for h in HOLDS if h.step == _STEP and not h.before_step]))
        return [
            *lines,
            f"def apply_gradients_{number}(loss):",
            "    scaler.scale(loss).backward()",
            "    scaler.step(optimizer)",
            "    scaler.update()",
            draw(st.sampled_from(STEP_LOOPS)),
            "    loss = model(batch).loss",
            f"    apply_gradients_{number}(loss)",
            *_indent(_scheduler_step(name, hold, wrapped=wrapped)),
        ]
    # Per epoch: after the batch loop, never per step.
    return [
        *lines,
        "for epoch in range(epochs):",
        "    for batch in loader:",
        "        scaler.scale(model(batch).loss).backward()",
        "        scaler.step(optimizer)",
        "        scaler.update()",
        f"    {name}.step()",
    ]


#: The GradScaler the pieces train through: a name of their own, as the statements drawn around
#: them rebind ``scaler`` at random (to a disabled one, which makes it no scaler to the rules).
PIECES_SCALER = "amp_scaler"
#: ``scaler`` as code names it: not ``self.scaler``, a string key or ampscale's package.
_SCALER_WORD = re.compile(r"(?<![\w.\"'-])scaler\b(?![\"'])")


def _renamed(lines: list[str], scaler: str) -> list[str]:
    return [
        line
        if line.startswith(("from scaler ", "import scaler "))
        else _SCALER_WORD.sub(scaler, line)
        for line in lines
    ]


#: A second scheduler, wrapped so that it holds itself back, built before the piece's own: what
#: one scheduler is says nothing about another.
OTHER_SCHEDULER = (
    "from scaler import SkipAwareScheduler",
    "lr_scheduler = torch.optim.lr_scheduler.SWALR(optimizer, swa_lr=0.05)",
    "lr_scheduler = SkipAwareScheduler(lr_scheduler, scaler)",
)


@st.composite
def checkpoints_and_schedulers(draw: st.DrawFn) -> list[str]:
    """A GradScaler of their own (`PIECES_SCALER`), a scheduler piece (perhaps after
    `OTHER_SCHEDULER`) and one or two checkpoint pieces."""
    name = draw(st.sampled_from(SCHEDULER_NAMES))
    lines = [f'{PIECES_SCALER} = torch.amp.GradScaler("cuda")']
    if name != "lr_scheduler" and draw(st.booleans()):
        lines += OTHER_SCHEDULER
    lines += draw(scheduler_piece(name, 0))
    for _ in range(draw(st.integers(1, 2))):
        lines += draw(checkpoint_piece())
    return _renamed(lines, PIECES_SCALER)


#: The GradScalers of a program that never scales: every one disabled.
DISABLED_SCALERS = (
    'scaler = torch.amp.GradScaler("cuda", enabled=False)',
    "scaler = GradScaler(enabled=False)",
    "scaler = torch.cuda.amp.GradScaler(enabled=False)",
)


@st.composite
def disabled_scaler_program(draw: st.DrawFn) -> TrainingProgram:
    """A script whose only GradScaler is disabled, trained through it as the recipe says
    (a disabled scaler's methods pass through), with checkpoint pieces: it has no scaler state
    to keep, so none of them is reported."""
    lines = [
        "import torch",
        "from torch.amp import GradScaler",
        "model = Net().cuda()",
        "optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)",
        draw(st.sampled_from(DISABLED_SCALERS)),
        draw(st.sampled_from(STEP_LOOPS)),
        "    loss = model(batch).loss",
        "    scaler.scale(loss).backward()",
        "    scaler.step(optimizer)",
        "    scaler.update()",
        "    optimizer.zero_grad()",
    ]
    for _ in range(draw(st.integers(1, 3))):
        lines += draw(checkpoint_piece())
    return TrainingProgram.from_lines(lines, scaler_trains=False)
