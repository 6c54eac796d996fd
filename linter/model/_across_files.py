"""What each rule follows into the project's other files, as its docs page says it.

Data beside the model rather than in the rules: it describes which of the project's questions
(see `linter.model._project`) a rule's analyses ask, and the docs page of every rule shows its
entry under "Across files".
"""

from __future__ import annotations

#: Rule code -> what it follows across modules (Markdown, one paragraph).
ACROSS_FILES: dict[str, str] = {
    "AMP001": (
        "A read in a function whose per-step caller is in another module: a `train_step()` "
        "called in the batch loop of `main.py`, a subclass's step that a base class's loop calls "
        "through `self`, a method of a trainer object the script builds "
        "(`trainer = Trainer(...)`, then `trainer.train_step(batch)` in its loop)."
    ),
    "AMP002": (
        "A model that a loader or builder of another module returns loaded or cast as bf16 "
        "(`model = load_model(name)` with `from_pretrained(..., torch_dtype=torch.bfloat16)` "
        "in `loading.py`); the finding names that file's site."
    ),
    "AMP003": (
        "A clip in a helper of another module called between the scaled backward and the "
        "scaler step (`clip_gradients(model)` from `utils/grads.py`), and an `unscale_` there."
    ),
    "AMP004": (
        "Nothing yet: it reads each file's own imports and uses (a deprecated API is reported "
        "in the file that spells it)."
    ),
    "AMP005": (
        "The steps and updates of a function of another module called in the iteration (an "
        "`optimizer_step(opt, scaler)` helper that already updates)."
    ),
    "AMP006": (
        "A plain backward in a function of another module called before the scaler step (a "
        "guidance module's `latents.backward(gradient=grad)`), and its branches on the scaler."
    ),
    "AMP007": (
        "An `optimizer.step()` in a helper of another module called after a scaled backward."
    ),
    "AMP008": (
        "A half model that a builder of another module returns (`build_model(cfg)` ending in "
        "`.half()`); the finding names that file's cast."
    ),
    "AMP009": ("A GradScaler built in a function that a loop of another module calls per step."),
    "AMP010": (
        "An autocast dtype kept in a config module (`dtype=config.AMP_DTYPE` with "
        "`AMP_DTYPE = torch.bfloat16` in `config.py`)."
    ),
}
