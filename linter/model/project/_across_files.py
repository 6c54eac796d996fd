"""What each rule follows into the project's other files, as its docs page says it.

Data beside the model rather than in the rules: it describes which of the project's questions
(see `linter.model.project._project`) a rule's analyses ask, and the docs page of every rule shows
its
entry under "Across files".
"""

from __future__ import annotations

#: Rule code -> what it follows across modules (Markdown, one paragraph).
ACROSS_FILES: dict[str, str] = {
    "AMP001": (
        "A read in a function whose per-step caller is in another module: a `train_step()` "
        "called in the batch loop of `main.py`, a subclass's step that a base class's loop calls "
        "through `self`, a method of a trainer object the script builds "
        "(`trainer = Trainer(...)`, then `trainer.train_step(batch)` in its loop), a helper "
        "called from a function of another module that is one training step by itself (a "
        "model's `optimize_parameters` that steps the GradScaler, whoever calls it). A "
        '`loss_scaler.state_dict()["scale"]` read on a parameter that every caller, in other '
        "modules, hands an object of one project class that builds a GradScaler and defines "
        "`state_dict` (BEiT's and LaBraM's `NativeScalerWithGradNormCount`, built in the "
        "training script and passed to `train_one_epoch` in `engine.py`); a caller that binds "
        "the name to `None` on other runs (a DeepSpeed branch) still agrees."
    ),
    "AMP002": (
        "A model that a loader or builder of another module returns loaded or cast as bf16 "
        "(`model = load_model(name)` with `from_pretrained(..., torch_dtype=torch.bfloat16)` "
        "in `loading.py`); a model another module loads as bf16 and passes to the function "
        "that trains it (`train(model, data)` called from `run_sft.py`); an fp16 autocast "
        "context or `functools.partial(torch.autocast, ...)` built in another module and "
        "entered here (`from amp_utils import autocast_ctx`, `with autocast_ctx:`). The finding "
        "names the other file's site."
    ),
    "AMP003": (
        "A clip in a helper of another module called between the scaled backward and the "
        "scaler step (`clip_gradients(model)` from `utils/grads.py`), and an `unscale_` there. "
        "A clip threshold multiplied by the loss scale through a parameter: what the call of "
        "such a helper passes (`scale=self.scaler.get_scale()`), or what callers in other "
        "modules pass to the function that clips here. "
        "A clip in the method of a model a registry builds (`MODELS[cfg.arch](cfg)`), when "
        "every project class defining that method clips alike. "
        "A GradScaler held in a global of another module (`from .amp_state import grad_sc`) or "
        "set by a base class defined there (`self.amp = GradScaler()` in `trainer_base.py`) "
        "is a scaler here, whatever its name."
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
        "guidance module's `latents.backward(gradient=grad)`), and its branches on the scaler; "
        "also through an object handed to the trainer's constructor "
        "(`self.guidance.train_step(...)`, where the callers pass `StableDiffusion(...)`), or "
        "one of unknown class whose candidate classes all backpropagate alike."
    ),
    "AMP007": (
        "An `optimizer.step()` in a helper of another module called after a scaled backward; "
        "a scaler that a base class of another module sets (`self.amp = GradScaler()` in "
        "`trainer_base.py`, `self.amp.scale(loss).backward()` in the subclass)."
    ),
    "AMP008": (
        "A half model that a builder of another module returns (`build_model(cfg)` ending in "
        "`.half()`); the finding names that file's cast. An optimizer over an fp16 model "
        "handed to a training function of another module that steps it through a GradScaler "
        "it builds (`train(model, loader, optimizer)` with `scaler.step(optimizer)` in "
        "`train_utils.py`): the finding is at the cast or load, and names that file's scaler. "
        "A class method of another module that loads with the `**kwargs` it is given "
        "(`DenseModel.build(model_args, training_args, torch_dtype=dtype)`): the dtype is the "
        "one this call passes, and the finding is at the call."
    ),
    "AMP009": ("A GradScaler built in a function that a loop of another module calls per step."),
    "AMP010": (
        "An autocast dtype kept in a config module (`dtype=config.AMP_DTYPE` with "
        "`AMP_DTYPE = torch.bfloat16` in `config.py`); an autocast context or factory built in "
        "another module (`from amp_utils import autocast_ctx`), with the dtype that module "
        "gives it."
    ),
    "AMP011": (
        "A save or load helper of another module, judged with what the call passes: "
        "`save_checkpoint(out_dir, epoch, model, optimizer, lr_scheduler)` in `utils.py` that "
        "builds the dict from its parameters, a model class's `save_checkpoint` reached "
        "through a package's re-export, a helper handed the dict the caller built. The "
        "helper may arrive through `from data_utils.utils import *` (the module's public "
        "names). The finding is at the call, naming the helper's save or load."
    ),
    "AMP014": (
        "An engine that a helper of another module builds and returns (`engine, optimizer = "
        "build_engine(model, args)` with `deepspeed.initialize(..., config=DS_CONFIG)` and a "
        'bf16 or fp16 dict in `engine_utils.py`; an `Accelerator(mixed_precision="fp16")` '
        "a helper returns), placed at the call. A setting that module reads from a config "
        "file is not followed through the helper."
    ),
    "AMP015": (
        "A scaler step made by an object its callers in other modules hand the function: "
        "`loss_scaler(loss, optimizer)` in `engine.py`, where every caller passes a "
        "`NativeScaler()` whose `__call__` (in `util/misc.py`) steps the GradScaler; the "
        "scheduler stepped after it in the same loop is reported there."
    ),
}
