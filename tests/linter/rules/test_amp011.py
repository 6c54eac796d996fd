"""AMP011 scaler-state-not-checkpointed: saves and resumes without the scaler, the fix, examples."""

from __future__ import annotations

import runpy
import textwrap
from pathlib import Path

from rule_runner import run_rule, run_rule_related

from linter.api import fix_source, lint_paths, lint_source
from linter.rules import ScalerStateNotCheckpointed

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"

SAVE = 'torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, "last.pt")\n'


def lines(source: str) -> list[int]:
    found = run_rule(ScalerStateNotCheckpointed, textwrap.dedent(source))
    return [line for line, _col, _msg in found]


def fixed(source: str) -> str:
    return fix_source(
        textwrap.dedent(source), rules=(ScalerStateNotCheckpointed,), unsafe_fixes=True
    ).text


def test_a_save_in_a_file_without_a_scaler_is_not_reported() -> None:
    assert lines(SAVE) == []


def test_a_scaler_stepped_but_created_elsewhere_still_counts() -> None:
    source = f"""\
    def step(scaler, loss, optimizer):
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    {SAVE}"""
    assert lines(source) == [5]


def test_the_save_points_back_at_the_scaler() -> None:
    source = f'import torch\nscaler = torch.amp.GradScaler("cuda")\n{SAVE}'
    assert run_rule_related(ScalerStateNotCheckpointed, source) == [
        (3, [(2, "the GradScaler this file trains through")])
    ]


def test_the_messages_say_what_to_add() -> None:
    source = (
        'scaler = torch.amp.GradScaler("cuda")\n'
        f"{SAVE}"
        'optimizer.load_state_dict(ckpt["optimizer"])\n'
    )
    save, load = (message for _line, _col, message in run_rule(ScalerStateNotCheckpointed, source))
    assert save.startswith("this resume checkpoint saves the model's and the optimizer's state")
    assert '`"scaler": scaler.state_dict()`' in save
    assert load.startswith("this resume loads the optimizer's state")
    assert '`scaler.load_state_dict(checkpoint["scaler"])`' in load


def test_the_fix_adds_the_scaler_to_a_one_line_literal() -> None:
    source = f'scaler = torch.amp.GradScaler("cuda")\n{SAVE}'
    assert fixed(source).splitlines()[1] == (
        'torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), '
        '"scaler": scaler.state_dict()}, "last.pt")'
    )


def test_the_fix_keeps_a_multi_line_literals_layout_inside_a_method() -> None:
    source = """\
    class Trainer:
        def __init__(self):
            self.scaler = torch.amp.GradScaler("cuda")

        def save(self, path):
            torch.save(
                {
                    "model": self.model.state_dict(),
                    "optimizer": self.optimizer.state_dict(),
                },
                path,
            )
    """
    expected = textwrap.dedent(source).replace(
        '"optimizer": self.optimizer.state_dict(),\n',
        '"optimizer": self.optimizer.state_dict(),\n'
        '                "scaler": self.scaler.state_dict(),\n',
    )
    assert fixed(source) == expected


def test_the_fix_leaves_each_comment_on_its_own_line() -> None:
    # yolov9's train_triple.py: the added element copied the comment of the line before the
    # last one (`'git': GIT_INFO,  # {remote, branch, commit} ...`) onto the last one.
    source = """\
    def train(model, optimizer, last, loader):
        scaler = torch.amp.GradScaler("cuda")
        for epoch in range(3):
            for batch in loader:
                scaler.scale(model(batch)).backward()
                scaler.step(optimizer)
                scaler.update()
            ckpt = {'model': model.state_dict(),
                    'optimizer': optimizer.state_dict(),
                    'git': GIT_INFO,  # {remote, branch, commit} if a git repo
                    'date': datetime.now().isoformat()}
            torch.save(ckpt, last)
    """
    expected = textwrap.dedent(source).replace(
        "'date': datetime.now().isoformat()}",
        "'date': datetime.now().isoformat(),\n                \"scaler\": scaler.state_dict()}",
    )
    assert fixed(source) == expected


def test_the_fix_keeps_the_last_elements_comment_on_the_last_element() -> None:
    source = """\
    scaler = torch.amp.GradScaler("cuda")
    torch.save(
        {
            "model": model.state_dict(),  # the weights
            "optimizer": optimizer.state_dict(),  # its moments
        },
        path,
    )
    """
    expected = textwrap.dedent(source).replace(
        '"optimizer": optimizer.state_dict(),  # its moments\n',
        '"optimizer": optimizer.state_dict(),  # its moments\n'
        '        "scaler": scaler.state_dict(),\n',
    )
    assert fixed(source) == expected


def test_the_fix_keeps_comment_lines_between_the_elements_where_they_were() -> None:
    source = """\
    def train(model, optimizer, last):
        scaler = torch.amp.GradScaler("cuda")
        for epoch in range(3):
            torch.save({
                "model": model.state_dict(),
                # the optimizer, for resuming
                "optimizer": optimizer.state_dict()  # its moments
            }, last)
    """
    expected = textwrap.dedent(source).replace(
        '"optimizer": optimizer.state_dict()  # its moments\n',
        '"optimizer": optimizer.state_dict(),  # its moments\n'
        '            "scaler": scaler.state_dict()\n',
    )
    assert fixed(source) == expected


def test_the_fix_uses_a_scaler_parameter_of_the_saving_function() -> None:
    source = """\
    def save(model, optimizer, grad_scaler, path):
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, path)


    grad_scaler = torch.amp.GradScaler("cuda")
    """
    assert '"scaler": grad_scaler.state_dict()}' in fixed(source)


def test_no_fix_when_no_scaler_or_two_are_in_reach() -> None:
    unreachable = """\
    def train(model, optimizer, loader):
        scaler = torch.amp.GradScaler("cuda")
        for batch in loader:
            step(model, optimizer, scaler, batch)


    def save(model, optimizer, path):
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, path)
    """
    two = (
        f'scaler_a = torch.amp.GradScaler("cuda")\nscaler_b = torch.amp.GradScaler("cuda")\n{SAVE}'
    )
    for source in (unreachable, two):
        [diagnostic] = lint_source(textwrap.dedent(source), rules=(ScalerStateNotCheckpointed,))
        assert diagnostic.fix is None


def test_a_resume_that_restores_the_scaler_anywhere_in_the_file_is_not_reported() -> None:
    source = """\
    scaler = torch.amp.GradScaler("cuda")


    def load_model(ckpt):
        optimizer.load_state_dict(ckpt["optimizer"])


    def load_amp(ckpt):
        scaler.load_state_dict(ckpt["scaler"])
    """
    assert lines(source) == []


def test_a_settings_switch_named_amp_restores_nothing() -> None:
    # XMem's shape: `config["amp"]` turns the scaler on; the resume never restores it.
    source = """\
    class Trainer:
        def __init__(self, config, model):
            self.config = config
            self.optimizer = torch.optim.AdamW(model.parameters())
            if config["amp"]:
                self.scaler = torch.cuda.amp.GradScaler()

        def load_checkpoint(self, path):
            checkpoint = torch.load(path, map_location="cpu")
            optimizer = checkpoint["optimizer"]
            self.optimizer.load_state_dict(optimizer)
            return checkpoint["it"]
    """
    assert lines(source) == [11]
    renamed = source.replace('config["amp"]', 'params["enable_amp"]')
    assert lines(renamed) == [11]


def test_an_amp_entry_read_from_the_loaded_checkpoint_is_a_restore() -> None:
    source = """\
    scaler = torch.amp.GradScaler("cuda")


    def resume(path):
        checkpoint = torch.load(path, map_location="cpu")
        optimizer.load_state_dict(checkpoint["optimizer"])
        restore_amp(checkpoint["amp"])
    """
    assert lines(source) == []


def test_the_bad_example_resumes_at_the_initial_scale_and_skips_again() -> None:
    saved, resumed_at, skipped = runpy.run_path(str(EXAMPLES / "resume_without_scaler_state.py"))[
        "main"
    ]()
    assert resumed_at == 2.0**24 > saved
    good_saved, good_resumed_at, good_skipped = runpy.run_path(
        str(EXAMPLES / "resume_with_scaler_state.py")
    )["main"]()
    assert good_resumed_at == good_saved == saved
    assert skipped > good_skipped


def test_the_good_example_is_clean_with_every_rule() -> None:
    path = EXAMPLES / "resume_with_scaler_state.py"
    assert lint_source(path.read_text(encoding="utf-8"), str(path), select=["ALL"]) == []


def test_a_scaler_confined_to_a_per_epoch_function_has_no_state_to_keep() -> None:
    source = """\
    class Trainer:
        def _train_epoch(self, loader):
            scaler = torch.amp.GradScaler("cuda")  # starts over every epoch
            for batch in loader:
                scaler.scale(self.model(batch)).backward()
                scaler.step(self.optimizer)
                scaler.update()

        def _save_checkpoint(self, path):
            torch.save(
                {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict()}, path
            )
    """
    assert lines(source) == []
    # ...but one the function hands on, stores or returns may outlive it.
    for escape in ("self.scaler = scaler", "helper(scaler)", "return scaler"):
        escaped = source.replace("# starts over every epoch", f"\n            {escape}")
        assert lines(escaped) == [11], escape


def test_a_checkpoint_passed_as_torch_saves_obj_keyword_is_read_like_the_first_argument() -> None:
    # InternVideo's VLN trainer: `torch.save(obj={...}, f=...)`.
    scaler = 'import torch\nscaler = torch.amp.GradScaler("cuda")\n'
    state = '{"model": model.state_dict(), "optimizer": optimizer.state_dict()}'
    assert lines(f'{scaler}torch.save(obj={state}, f="last.pt")\n') == [3]
    assert lines(f'{scaler}torch.save(f="last.pt", obj={state})\n') == [3]
    kept = state.replace("}", ', "scaler": scaler.state_dict()}')
    assert lines(f'{scaler}torch.save(obj={kept}, f="last.pt")\n') == []
    assert "scaler.state_dict()" in fixed(f'{scaler}torch.save(obj={state}, f="last.pt")\n')


HELPER_SAVES = """\
def {helper}(path, epoch, net, opt{extra}):
    state = {{"epoch": epoch, "model": net.state_dict(), "optimizer": opt.state_dict()}}
    torch.save(state, path)


def train(model, loader, optimizer, epochs):
    scaler = torch.amp.GradScaler("cuda")
    for epoch in range(epochs):
        for batch in loader:
            scaler.scale(model(batch)).backward()
            scaler.step(optimizer)
            scaler.update()
        {helper}("last.pt", epoch, model, optimizer{passed})
"""


def test_a_save_helper_of_this_module_called_where_the_scaler_lives_is_reported() -> None:
    # Class 7 of issue 42: the scaler is confined to `train`, which saves through a helper of
    # its own module; whatever the helper's name, its save is reported once, the call related.
    for helper in ("save_checkpoint", "dump_state"):
        source = HELPER_SAVES.format(helper=helper, extra="", passed="")
        ((line, _col, message),) = run_rule(ScalerStateNotCheckpointed, source)
        assert line == 3
        assert f"lives where `{helper}()` is called" in message
        assert "pass it the scaler" in message
        twice = source + f'        {helper}("best.pt", epoch, model, optimizer)\n'
        assert lines(twice) == [3]
    source = HELPER_SAVES.format(helper="save_checkpoint", extra="", passed="")
    assert run_rule_related(ScalerStateNotCheckpointed, source) == [
        (
            3,
            [
                (13, "called here, where the scaler lives"),
                (7, "the GradScaler this file trains through"),
            ],
        )
    ]


def test_a_save_helper_handed_the_scaler_is_judged_inside_the_helper() -> None:
    kept = HELPER_SAVES.format(helper="save_checkpoint", extra=", scaler", passed=", scaler")
    assert lines(kept) == [3]  # handed it, and still does not save it
    saved = kept.replace("opt.state_dict()}}", 'opt.state_dict(), "scaler": scaler.state_dict()}}')
    saved = saved.replace("opt.state_dict()}", 'opt.state_dict(), "scaler": scaler.state_dict()}')
    assert lines(saved) == []


def test_a_save_helper_called_only_outside_the_scalers_function_is_not_reported() -> None:
    source = HELPER_SAVES.format(helper="save_checkpoint", extra="", passed="")
    source = (
        source.replace('        save_checkpoint("last.pt", epoch, model, optimizer)\n', "")
        + '\n\ndef export(model, optimizer):\n    save_checkpoint("x.pt", 0, model, optimizer)\n'
    )
    assert lines(source) == []


def test_a_save_method_called_from_the_method_that_holds_the_scaler_is_reported() -> None:
    source = """\
    class Trainer:
        def _save(self, path):
            torch.save(
                {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict()}, path
            )

        def fit(self, loader):
            scaler = torch.amp.GradScaler("cuda")
            for batch in loader:
                scaler.scale(self.model(batch)).backward()
                scaler.step(self.optimizer)
                scaler.update()
            self._save("last.pt")
    """
    assert lines(source) == [3]


FOLDER_CHECKPOINT = """\
import os


def train(model, loader, optimizer, scheduler, output_dir):
    scaler = torch.amp.GradScaler("cuda")
    for batch in loader:
        scaler.scale(model(batch)).backward()
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()
    model.save_pretrained(output_dir)
    torch.save(optimizer.state_dict(), os.path.join(output_dir, "optimizer.pt"))
    torch.save(scheduler.state_dict(), os.path.join(output_dir, "scheduler.pt"))
"""


def test_a_checkpoint_written_as_a_folder_of_files_is_a_resume_checkpoint() -> None:
    # simpletransformers' save_model: the weights through save_pretrained, then optimizer.pt and
    # scheduler.pt, as the Hugging Face Trainer writes a checkpoint folder, and no scaler.pt.
    ((line, _col, message),) = run_rule(ScalerStateNotCheckpointed, FOLDER_CHECKPOINT)
    assert line == 12
    assert '"scaler.pt"' in message
    weights = FOLDER_CHECKPOINT.replace(
        "model.save_pretrained(output_dir)",
        'torch.save(model.state_dict(), os.path.join(output_dir, "weights.bin"))',
    )
    assert lines(weights) == [12]
    # SimCSE's `_save_checkpoint` override: the Hugging Face Trainer's `self.save_model(out)`.
    trainer = FOLDER_CHECKPOINT.replace(
        "model.save_pretrained(output_dir)", "trainer.save_model(output_dir)"
    )
    assert lines(trainer) == [12]


def test_a_folder_checkpoint_with_the_scalers_file_or_without_the_model_is_not_reported() -> None:
    kept = FOLDER_CHECKPOINT + (
        '    torch.save(scaler.state_dict(), os.path.join(output_dir, "scaler.pt"))\n'
    )
    assert lines(kept) == []
    optimizer_only = FOLDER_CHECKPOINT.replace("    model.save_pretrained(output_dir)\n", "")
    assert lines(optimizer_only) == []


def test_a_checkpoint_saved_twice_is_reported_at_each_save() -> None:
    # LlamaGen: the same dict saved locally, then to the cloud; the first save does not make
    # what the second writes unknown.
    source = """\
    scaler = torch.amp.GradScaler("cuda")
    checkpoint = {"model": model.state_dict(), "optimizer": optimizer.state_dict()}
    if not args.no_local_save:
        torch.save(checkpoint, local_path)
    torch.save(checkpoint, cloud_path)
    """
    assert lines(source) == [4, 5]
    handed = source.replace("torch.save(checkpoint, local_path)", "upload(checkpoint)")
    assert lines(handed) == []  # handed to a function that may add anything


def test_a_helper_of_another_module_that_saves_twice_is_reported_once_per_call(
    tmp_path: Path,
) -> None:
    # splade's shape: the base trainer's `save_checkpoint` writes `last.tar`, then `best.tar`.
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "utils.py").write_text(
        textwrap.dedent(
            """\
            import torch


            def save_checkpoint(model, optimizer, path, is_best):
                state = {"model": model.state_dict(), "optimizer": optimizer.state_dict()}
                torch.save(state, path + "/last.tar")
                if is_best:
                    torch.save(state, path + "/best.tar")
            """
        )
    )
    (tmp_path / "train.py").write_text(
        textwrap.dedent(
            """\
            import torch

            from utils import save_checkpoint


            def main(model, loader, optimizer, path):
                scaler = torch.amp.GradScaler("cuda")
                for batch in loader:
                    scaler.scale(model(batch)).backward()
                    scaler.step(optimizer)
                    scaler.update()
                save_checkpoint(model, optimizer, path, is_best=True)
            """
        )
    )
    result = lint_paths([str(tmp_path)], select=["AMP011"], jobs=1)
    assert [(Path(d.path).name, d.line) for d in result.diagnostics] == [("train.py", 12)]


STATE_ON_THE_MODEL = """\
import torch


class Trainer:
    def __init__(self, net, corpus):
        self.net = net
        self.corpus = corpus

    def fit(self, out, epochs, keep_optimizer=True):
        self.opt = torch.optim.SGD(self.net.parameters(), lr=0.1)
        if getattr(self.net, "opt_state", None) is not None:
            self.opt.load_state_dict(self.net.opt_state)
        scaler = torch.cuda.amp.GradScaler()
        for epoch in range(epochs):
            for batch in self.corpus:
                with torch.autocast("cuda", dtype=torch.float16):
                    loss = self.net.forward_loss(batch)
                scaler.scale(loss).backward()
                scaler.step(self.opt)
                scaler.update()
                self.opt.zero_grad()
            self._persist(out / "best.pt", keep_optimizer)

    def _persist(self, path, keep_optimizer=False):
        if keep_optimizer:
            self.net.opt_state = self.opt.state_dict()
        self.net.save(path)
"""


def test_optimizer_state_carried_on_a_model_that_saves_itself_is_a_checkpoint() -> None:
    # flair's trainer: the optimizer's state rides on the model into `model.save(path)`, and a
    # later run loads it back from the model's attribute; the scaler's state rides nowhere.
    found = run_rule(ScalerStateNotCheckpointed, STATE_ON_THE_MODEL)
    assert [line for line, _c, _m in found] == [12, 27]
    assert "resume loads the optimizer's state" in found[0][2]
    assert "`model.scaler_state_dict = scaler.state_dict()`" in found[1][2]


def test_a_model_that_carries_the_scalers_state_too_or_carries_no_optimizer_is_quiet() -> None:
    kept = STATE_ON_THE_MODEL.replace(
        "            self.net.opt_state = self.opt.state_dict()\n",
        "            self.net.opt_state = self.opt.state_dict()\n"
        "            self.net.scaler_state = self.scaler.state_dict()\n",
    ).replace(
        "        scaler = torch.cuda.amp.GradScaler()",
        "        self.scaler = scaler = torch.cuda.amp.GradScaler()",
    )
    assert kept != STATE_ON_THE_MODEL
    assert lines(kept.replace("self.opt.load_state_dict(self.net.opt_state)", "pass")) == []
    # Only the weights: an export, and the optimizer's state read from nothing saved.
    weights = STATE_ON_THE_MODEL.replace(
        "            self.net.opt_state = self.opt.state_dict()\n",
        "            self.net.epochs_done = 1\n",
    )
    assert lines(weights) == []
    # An attribute named for the optimizer that holds the optimizer object, not its state
    # (a trainer's `self.optimizer = ...` before `self._maybe_log_save_evaluate(...)`).
    handle = STATE_ON_THE_MODEL.replace(
        "            self.net.opt_state = self.opt.state_dict()\n",
        "            self.net.optimizer = self.opt\n",
    )
    assert handle != STATE_ON_THE_MODEL
    assert lines(handle) == []
