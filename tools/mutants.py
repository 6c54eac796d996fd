"""Mutation check: each named one-line bug must make the tests that claim to catch it fail.

A test suite is only as good as the bugs it catches. Each entry of `MUTATIONS` is a deliberate
bug — a file, an exact piece of its text, what to put instead — and the test node ids that must
catch it. Every mutation is applied in turn to a scratch copy of the repository (the working tree
is never edited), only the named tests are run against it, and each named node id must have at
least one failing test case. Before any mutation the named tests run once on the unmutated copy
and must pass, so a mutation is never "caught" by a test that fails anyway.

Run it with ``python tools/mutants.py`` (``--jobs N`` scratch copies in parallel, ``-k TEXT`` to
pick mutations by name) or ``tox -e mutants``. Prints caught/survived per mutation; exits 1 on
any survivor, 2 when the table itself is wrong (text not found, or a test failing unmutated).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ElementTree
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: What the scratch copy leaves out: environments, caches, build output, git.
IGNORED = shutil.ignore_patterns(
    ".git", ".venv", "venv", ".tox", "_build", "__pycache__", ".hypothesis", ".pytest_cache",
    ".ruff_cache", ".amp_lint_cache", "*.egg-info", "build", "dist",
)  # fmt: skip
#: Seconds one mutation's tests may run; a mutation that hangs them counts as caught.
TIMEOUT_S = 600


@dataclass(frozen=True, slots=True)
class Mutation:
    """One deliberate bug and the tests that must catch it."""

    #: Short name, printed in the report.
    name: str
    #: File to mutate, relative to the repository root.
    path: str
    #: Exact text to replace; must occur exactly once in the file.
    original: str
    #: What replaces it.
    replacement: str
    #: pytest node ids; each must have a failing case under the mutation.
    tests: tuple[str, ...]


SYNC = "tests/scaler/test_scaler_sync_contract.py"
COUNTER = "tests/scaler/test_sync_counter.py"
MONITORING = "tests/scaler/test_scaler_monitoring.py"
REPORTING = "tests/scaler/test_scaler_policy_reporting.py"
COLLAPSE = "tests/scaler/test_scaler_collapse.py"
CLI_EDGES = "tests/linter/test_cli_says_what_it_did.py"
SUMMARY = "tests/linter/test_report_summary.py"

MUTATIONS: tuple[Mutation, ...] = (
    # --- issue 15: host reads the sync contract must see, in each public call -------------
    Mutation(
        "update reads the scale with tolist()",
        "scaler/_grad_scaler.py",
        'state = self._require_state("update")',
        'state = self._require_state("update"); state.scale.tolist()',
        (f"{SYNC}::test_scale_unscale_update_never_sync",),
    ),
    Mutation(
        "scale() reads the scale with tolist()",
        "scaler/_grad_scaler.py",
        "            state = self._state or self._lazy_init(outputs.device)\n",
        "            state = self._state or self._lazy_init(outputs.device); state.scale.tolist()"
        "\n",
        (f"{SYNC}::test_scale_unscale_update_never_sync",),
    ),
    Mutation(
        "unscale_() copies the scale to the host with cpu()",
        "scaler/_grad_scaler.py",
        "        scale = state.scale\n        mirror = self._live_mirror()\n",
        "        scale = state.scale; scale.cpu()\n        mirror = self._live_mirror()\n",
        (f"{SYNC}::test_scale_unscale_update_never_sync",),
    ),
    Mutation(
        "fused step() reads the flag with numpy()",
        "scaler/_grad_scaler.py",
        "            optimizer.found_inf = found_inf\n",
        "            optimizer.found_inf = found_inf; found_inf.numpy()\n",
        (f"{SYNC}::test_fused_adam_steps_without_a_sync",),
    ),
    Mutation(
        "non-fused step() reads the flag twice",
        "scaler/_grad_scaler.py",
        "        found = bool(found_inf.item())\n        optimizer_state",
        "        found = bool(found_inf.item()); found_inf.tolist()\n        optimizer_state",
        (f"{SYNC}::test_non_fused_step_syncs_no_more_than_torch",),
    ),
    Mutation(
        "peek_scale() reads the scale tensor on the host path",
        "scaler/_grad_scaler.py",
        "                self._peek.reset(mirror.scale)\n",
        "                self._peek.reset(mirror.scale)\n            state.scale.tolist()\n",
        (
            f"{MONITORING}::test_peek_scale_reads_nothing_on_the_host_path_and_the_host_scale_once"
            "_on_cpu[host_path]",
        ),
    ),
    Mutation(
        "stats() reads the counters again",
        "scaler/_grad_scaler.py",
        'scale, counters = host["scale"], host["counters"]',
        'scale, counters = host["scale"], host["counters"]; self._state.counters.tolist()',
        (
            f"{MONITORING}::test_stats_is_one_packed_read_on_the_device_path_and_none_on_the_host"
            "_path",
        ),
    ),
    Mutation(
        "SyncCounter misses tolist()",
        "scaler/_sync_counter.py",
        "(torch.Tensor.tolist, torch.Tensor.numpy,",
        "(torch.Tensor.numpy,",
        (f"{COUNTER}::test_each_spelling_of_a_host_read_counts_once[tolist]",),
    ),
    Mutation(
        "SyncCounter misses data-dependent output shapes",
        "scaler/_sync_counter.py",
        "frozenset((torch.Tag.data_dependent_output, torch.Tag.dynamic_output_shape))",
        "frozenset((torch.Tag.data_dependent_output,))",
        (
            f"{COUNTER}::test_each_spelling_of_a_host_read_counts_once[nonzero]",
            f"{COUNTER}::test_each_spelling_of_a_host_read_counts_once[masked_select]",
        ),
    ),
    Mutation(
        "SyncCounter misses copies off a device",
        "scaler/_sync_counter.py",
        'return destination.type == "cpu" and source.type != "cpu"',
        "return False",
        (f"{COUNTER}::test_each_copy_off_a_device_counts_once[copy_-into-cpu]",),
    ),
    # --- issue 15: the below-one policy -------------------------------------------------------
    Mutation(
        "peek_scale() on the host path never marks an event reported",
        "scaler/_grad_scaler.py",
        "self._report_event(mirror.scale, mirror.event_pending(), mirror.mark_reported)",
        "self._report_event(mirror.scale, mirror.event_pending(), lambda: None)",
        (
            f"{MONITORING}::test_peek_scale_reports_a_scale_below_one[host_path]",
            f"{REPORTING}::test_each_reader_warns_once_at_the_callers_line[peek_scale-host_path]",
        ),
    ),
    Mutation(
        "no reader marks an event reported",
        "scaler/_grad_scaler.py",
        "            mark_reported()\n",
        "            pass\n",
        (
            f"{MONITORING}::test_peek_scale_reports_a_scale_below_one[device_path]",
            f"{REPORTING}::test_each_reader_warns_once_at_the_callers_line",
        ),
    ),
    Mutation(
        "a floor hit at exactly 1.0 is worded as below 1",
        "scaler/_policy.py",
        '"hit the min_scale floor" if scale >= 1.0',
        '"hit the min_scale floor" if scale > 1.0',
        (f"{REPORTING}::test_a_floor_hit_at_exactly_one_says_floor",),
    ),
    Mutation(
        "summed per-device found-inf flags not clamped on the fused path",
        "scaler/_grad_scaler.py",
        "return combined.clamp(max=1.0) if len(flags) > 1 else combined",
        "return combined",
        (f"{REPORTING}::test_fused_step_skips_when_several_devices_overflow",),
    ),
    Mutation(
        "a loaded hysteresis tracker above this scaler's hysteresis is kept",
        "scaler/_validation.py",
        "            hysteresis,\n        ),\n        STATS_KEY:",
        "            1 << 30,\n        ),\n        STATS_KEY:",
        (f"{REPORTING}::test_a_loaded_hysteresis_tracker_above_this_scalers_hysteresis_is_capped",),
    ),
    Mutation(
        "ScaleBelowOneWarning attributed to the library",
        "scaler/_user_warnings.py",
        "    level = 2  # 1 would be this function",
        "    level = 1",
        (
            f"{REPORTING}::test_each_reader_warns_once_at_the_callers_line",
            f"{REPORTING}::test_state_dict_warns_at_the_callers_line",
        ),
    ),
    Mutation(
        "warnings stop at the first scaler frame (a fixed stacklevel)",
        "scaler/_user_warnings.py",
        "    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):",
        "    while False:",
        (
            f"{REPORTING}::test_each_reader_warns_once_at_the_callers_line[get_scale-host_path]",
            f"{REPORTING}::test_future_warning_of_a_step_taking_grad_scaler_points_at_the_caller",
        ),
    ),
    Mutation(
        "the CUDA-unavailable warning points into the library",
        "scaler/_grad_scaler.py",
        '"GradScaler is enabled, but CUDA is not available.  Disabling.", stacklevel=2',
        '"GradScaler is enabled, but CUDA is not available.  Disabling.", stacklevel=1',
        (f"{REPORTING}::test_cuda_unavailable_warning_points_at_the_caller",),
    ),
    Mutation(
        "state_dict() raises under below_one='raise'",
        "scaler/_grad_scaler.py",
        '            if self._below_one == "warn":\n',
        '            if self._below_one != "ignore":\n',
        (f"{REPORTING}::test_raise_survives_saving_and_raises_at_the_next_reader",),
    ),
    Mutation(
        "a failed CUDA-graph capture falls back without a word",
        "scaler/_scale_update.py",
        "    state.update_graph = False\n    warn_at_caller(",
        "    state.update_graph = False\n    return\n    warn_at_caller(",
        (f"{REPORTING}::test_a_failed_cuda_graph_capture_is_said_once_at_the_callers_line",),
    ),
    # --- issue 15: collapse on the device path (fused Adam/AdamW) ------------------------------
    Mutation(
        "the device update forgets the floor",
        "scaler/_scale_update.py",
        "        self._before_clamp.copy_(scale)\n        scale.clamp_(min=floor, max=cap)\n"
        "        torch.neg(",
        "        self._before_clamp.copy_(scale)\n        scale.clamp_(max=cap)\n"
        "        torch.neg(",
        (
            f"{COLLAPSE}::test_fused_path_matches_torch_above_the_floor_and_stops_there",
            f"{COLLAPSE}::test_fused_path_keeps_params_finite_and_training_resumes",
        ),
    ),
    # --- issue 15: the linter's output and configuration ---------------------------------------
    Mutation(
        "'Found 2 error.'",
        "linter/report.py",
        """f"Found {total} error{'s' if total != 1 else ''}\"""",
        'f"Found {total} error"',
        (f"{CLI_EDGES}::test_two_findings_are_errors_plural",),
    ),
    Mutation(
        "'All checks passed!' when a file failed",
        "linter/report.py",
        "    if failed:\n",
        "    if False:\n",
        (f"{CLI_EDGES}::test_a_file_that_failed_is_never_all_checks_passed",),
    ),
    Mutation(
        "--statistics ordered by code only",
        "linter/report.py",
        "key=lambda item: (-item[1], item[0])",
        "key=lambda item: item[0]",
        (f"{SUMMARY}::test_statistics_most_frequent_first_then_by_code",),
    ),
    Mutation(
        "an empty rule selection runs nothing and passes",
        "linter/api.py",
        "        if rules and not chosen:\n",
        "        if False:\n",
        (f"{CLI_EDGES}::test_a_selection_of_no_rule_is_a_usage_error",),
    ),
    Mutation(
        "no word when no Python file was found",
        "linter/cli.py",
        "    if result.files_checked == 0 and not result.errors:\n",
        "    if False:\n",
        (f"{CLI_EDGES}::test_a_folder_without_python_files_says_so",),
    ),
    Mutation(
        "a misspelt [tool.amp_lint] is silently ignored",
        "linter/config.py",
        "        if misspelt is not None:\n",
        "        if False:\n",
        (f"{CLI_EDGES}::test_a_misspelt_table_is_named_with_the_right_spelling",),
    ),
    Mutation(
        "an unreadable pyproject.toml escapes as a traceback",
        "linter/config.py",
        "        return path.read_bytes()\n    except OSError as error:",
        "        return path.read_bytes()\n    except LookupError as error:",
        (f"{CLI_EDGES}::test_an_unreadable_pyproject_is_one_line_and_exit_2",),
    ),
    Mutation(
        "--format json leaves out files that failed",
        "linter/report.py",
        "        for error in result.errors\n    ]\n    return json.dumps(records",
        "        for error in ()\n    ]\n    return json.dumps(records",
        (f"{CLI_EDGES}::test_machine_formats_include_files_that_failed[json]",),
    ),
    Mutation(
        "--format sarif leaves out files that failed",
        "linter/report.py",
        "                    for error in result.errors\n                ],",
        "                    for error in ()\n                ],",
        (
            f"{CLI_EDGES}::test_machine_formats_include_files_that_failed[sarif]",
            "tests/linter/test_report.py::test_sarif_reports_failed_files_as_notifications",
        ),
    ),
    Mutation(
        "--force-exclude ignored for stdin",
        "linter/api.py",
        "        if not (force_exclude and stdin_filename and excluder.excluded(stdin_filename)):",
        "        if True:",
        (f"{CLI_EDGES}::test_force_exclude_is_honoured_for_stdin",),
    ),
    Mutation(
        "the process pool degrades to serial without a word",
        "linter/_engine.py",
        "        if not _SAID_SERIAL:\n",
        "        if False:\n",
        ("tests/linter/test_engine.py::test_a_run_without_worker_processes_says_so_once",),
    ),
    Mutation(
        "AMP001 crashes on float() of the scale (the fuzzed training loops catch it)",
        "linter/rules/amp001_get_scale_every_step.py",
        "owner = _scale_tensor_owner(call.args[0].value)",
        "owner = _scale_tensor_owner(call.args[-2].value)",
        (
            "tests/linter/test_properties.py::"
            "test_training_loop_programs_run_the_real_rules_without_errors",
        ),
    ),
    Mutation(
        "a docs page promises an output its example does not print",
        "docs/guides/troubleshooting-nans.md",
        "# -> tensor(1.1921e-07, dtype=torch.float16)",
        "# -> tensor(0., dtype=torch.float16)",
        (
            "tests/docs/test_docs_examples.py::test_page_examples_run[guides/troubleshooting-nans.md]",
        ),
    ),
    Mutation(
        "the README installs ampscale by an index name",
        "README.md",
        '`pip install ".[torch]"`; ampscale claims',
        "`pip install ampscale[torch]`; ampscale claims",
        (
            "tests/packaging/test_install_instructions.py::test_each_install_command_installs_from_the_clone",
        ),
    ),
    # --- representative others: scaler -------------------------------------------------------
    Mutation(
        "host mirror does not count skipped steps",
        "scaler/_host_mirror.py",
        "counters[SKIPPED_STEPS] += found",
        "counters[SKIPPED_STEPS] += 0",
        (f"{MONITORING}::test_stats_count_what_happened[host_path]",),
    ),
    Mutation(
        "device update never records the longest overflow streak",
        "scaler/_scale_update.py",
        "        torch.maximum(self._longest, self._streak, out=self._longest)\n",
        "",
        (f"{MONITORING}::test_stats_count_what_happened[device_path]",),
    ),
    Mutation(
        "host mirror grows one step late",
        "scaler/_host_mirror.py",
        "if successful == growth_interval:",
        "if successful == growth_interval + 1:",
        ("tests/scaler/test_scaler_host_mirror.py::test_mirror_advances_exactly_like_the_device",),
    ),
    Mutation(
        "unscale_ twice is allowed",
        "scaler/_grad_scaler.py",
        'is OptState.UNSCALED:\n            raise RuntimeError(\n                "unscale_() has',
        'is None:\n            raise RuntimeError(\n                "unscale_() has',
        ("tests/scaler/test_scaler_behaviours.py::test_unscale_twice_and_after_step_are_errors",),
    ),
    Mutation(
        "step_skipped() never says skipped",
        "scaler/_grad_scaler.py",
        "        return found_inf > 0\n",
        "        return found_inf > 1\n",
        (f"{MONITORING}::test_step_skipped_is_a_device_flag_per_step",),
    ),
    Mutation(
        "fused SGD trusted before its momentum buffers exist",
        "scaler/_fused_support.py",
        'return optimizer.state.get(param, {}).get("momentum_buffer") is not None',
        "return True",
        (
            "tests/scaler/test_scaler_fused_sgd.py::"
            "test_fused_sgd_with_momentum_is_trusted_only_once_its_buffers_exist",
        ),
    ),
    Mutation(
        "a collapsed torch checkpoint loads below the floor",
        "scaler/_grad_scaler.py",
        'scale = min(max(loaded["scale"], self._floor), self._cap)',
        'scale = min(loaded["scale"], self._cap)',
        (
            f"{COLLAPSE}::"
            "test_a_collapsed_torch_checkpoint_loads_at_the_floor_and_training_recovers",
        ),
    ),
    # --- representative others: linter -------------------------------------------------------
    Mutation(
        "findings exit 0",
        "linter/cli.py",
        "        return EXIT_FINDINGS\n",
        "        return EXIT_CLEAN\n",
        ("tests/linter/test_cli.py::test_findings_exit_1_and_print_text",),
    ),
    Mutation(
        "AMP001 flags a get_scale look-alike that takes arguments",
        "linter/rules/amp001_get_scale_every_step.py",
        'if func.attr.value == "get_scale" and _no_args(call):',
        'if func.attr.value == "get_scale":',
        (
            "tests/linter/rules/test_amp001.py::"
            "test_get_scale_with_arguments_is_a_look_alike_in_a_file_that_also_reads_the_scale",
        ),
    ),
    Mutation(
        "virtualenvs named .venv are linted",
        "linter/config.py",
        '    ".venv",\n    "venv",\n',
        '    "venv",\n',
        ("tests/linter/test_discovery.py::test_walk_skips_default_excluded_folders",),
    ),
    Mutation(
        "SARIF columns 0-based",
        "linter/report.py",
        '"startColumn": d.column,',
        '"startColumn": d.column - 1,',
        ("tests/linter/test_report.py::test_sarif_has_what_github_code_scanning_reads",),
    ),
    Mutation(
        "findings reported unsorted",
        "linter/api.py",
        "            sorted(\n"
        "                d if d.fix is None or d.code in shown_fix else replace(d, fix=None)\n"
        "                for report in reports\n",
        "            list(\n"
        "                d if d.fix is None or d.code in shown_fix else replace(d, fix=None)\n"
        "                for report in reversed(reports)\n",
        ("tests/linter/test_report.py::test_text_is_one_sorted_line_per_finding",),
    ),
    Mutation(
        "AMP011 takes a scaler key a save assigns for a restore (the program generator found it)",
        "linter/model/values/_checkpoints.py",
        "if isinstance(node, cst.Subscript) and node not in written:",
        "if isinstance(node, cst.Subscript):",
        (
            "tests/linter/model/test_checkpoints.py::"
            "test_a_scaler_key_assigned_for_a_save_restores_nothing",
            "tests/linter/rules/test_corpus.py::test_corpus_file_reports_exactly_the_marked_lines"
            "[amp011_pos_resume_beside_built_up_save]",
        ),
    ),
    Mutation(
        "AMP015 takes a SkipAwareScheduler for a skip flag (the program generator found it)",
        "linter/model/steps/_lr_schedulers.py",
        "            self.self_holding.update(targets)\n"
        '            return  # a scheduler, though its class says "Skip": no flag\n'
        "        if qualified and SCHEDULER_CONSTRUCTOR.search(qualified):\n"
        "            self.constructed.update(targets)\n"
        "            return\n",
        "            self.self_holding.update(targets)\n"
        "        elif qualified and SCHEDULER_CONSTRUCTOR.search(qualified):\n"
        "            self.constructed.update(targets)\n",
        (
            "tests/linter/model/test_lr_schedulers.py::"
            "test_a_wrapped_scheduler_is_no_skip_flag_for_the_schedulers_after_it",
            "tests/linter/rules/test_corpus.py::test_corpus_file_reports_exactly_the_marked_lines"
            "[amp015_pos_one_of_two_schedulers_wrapped]",
        ),
    ),
)


@dataclass(frozen=True, slots=True)
class Outcome:
    """What the named tests did under one mutation."""

    mutation: Mutation
    #: Named node ids that had no failing case.
    missed: tuple[str, ...]
    #: Why it counts as caught without a test result (a timeout), if so.
    note: str = ""

    @property
    def caught(self) -> bool:
        return not self.missed


def scratch_copy(into: Path) -> Path:
    copy = into / "repo"
    shutil.copytree(ROOT, copy, ignore=IGNORED, symlinks=True)
    return copy


def run_tests(copy: Path, tests: tuple[str, ...]) -> tuple[dict[str, bool], str]:
    """Run ``tests`` in the scratch copy: node id -> whether any of its cases failed."""
    report = copy / ".mutants-junit.xml"
    env = {**os.environ, "PYTHONPATH": str(copy), "PYTHONDONTWRITEBYTECODE": "1"}
    # The copy's own packages must win over any installed ampscale (PYTHONPATH comes first).
    command = [
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
        "-o", "addopts=", "--junitxml", str(report), *tests,
    ]  # fmt: skip
    try:
        done = subprocess.run(
            command, cwd=copy, env=env, capture_output=True, text=True, timeout=TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        return dict.fromkeys(tests, True), "timeout"
    if not report.exists():
        raise RuntimeError(f"pytest wrote no report:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    failed_cases = []
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            module = case.get("classname", "").replace(".", "/")
            failed_cases.append(f"{module}.py::{case.get('name')}")
    report.unlink()
    if done.returncode not in (0, 1):  # collection errors, bad node ids
        raise RuntimeError(f"pytest exited {done.returncode}:\n{done.stdout[-3000:]}")
    return {
        test: any(case == test or case.startswith(test + "[") for case in failed_cases)
        for test in tests
    }, ""


def apply(copy: Path, mutation: Mutation) -> str:
    """Write the mutated file into the copy; returns the original text to restore."""
    path = copy / mutation.path
    text = path.read_text(encoding="utf-8")
    count = text.count(mutation.original)
    if count != 1:
        raise ValueError(f"{mutation.name}: original text found {count} times in {mutation.path}")
    path.write_text(text.replace(mutation.original, mutation.replacement), encoding="utf-8")
    return text


def check_table(mutations: tuple[Mutation, ...]) -> None:
    """Every original text occurs exactly once (before anything runs)."""
    for mutation in mutations:
        text = (ROOT / mutation.path).read_text(encoding="utf-8")
        count = text.count(mutation.original)
        if count != 1:
            raise ValueError(
                f"{mutation.name}: original text found {count} times in {mutation.path}"
            )


def run_share(mutations: list[Mutation]) -> list[Outcome]:
    """One worker: its own scratch copy, its mutations one after another."""
    with tempfile.TemporaryDirectory(prefix="mutants-") as folder:
        copy = scratch_copy(Path(folder))
        _check_imports_come_from(copy)
        all_tests = tuple(dict.fromkeys(t for m in mutations for t in m.tests))
        baseline, _ = run_tests(copy, all_tests)
        failing = [test for test, failed in baseline.items() if failed]
        if failing:
            raise RuntimeError(f"tests fail without any mutation: {failing}")
        outcomes = []
        for mutation in mutations:
            original = apply(copy, mutation)
            try:
                failed, note = run_tests(copy, mutation.tests)
            finally:
                (copy / mutation.path).write_text(original, encoding="utf-8")
            missed = tuple(test for test, caught in failed.items() if not caught)
            outcome = Outcome(mutation, missed, note)
            print(_line(outcome), flush=True)
            outcomes.append(outcome)
        return outcomes


def _check_imports_come_from(copy: Path) -> None:
    """The tests must import the mutated copy, not an installed ampscale."""
    env = {**os.environ, "PYTHONPATH": str(copy)}
    where = subprocess.run(
        [sys.executable, "-c", "import scaler, linter; print(scaler.__file__, linter.__file__)"],
        cwd=copy, env=env, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    if not all(Path(path).is_relative_to(copy) for path in where):
        raise RuntimeError(f"the scratch copy's packages are not the ones imported: {where}")


def _line(outcome: Outcome) -> str:
    verdict = "caught  " if outcome.caught else "SURVIVED"
    note = f" ({outcome.note})" if outcome.note else ""
    missed = "".join(f"\n          not caught by {test}" for test in outcome.missed)
    return f"{verdict} {outcome.mutation.name}{note}{missed}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", "-j", type=int, default=1, help="scratch copies in parallel")
    parser.add_argument("-k", dest="pick", default="", help="only mutations whose name has this")
    args = parser.parse_args(argv)
    chosen = tuple(m for m in MUTATIONS if args.pick.lower() in m.name.lower())
    try:
        check_table(chosen)
        shares = [list(chosen[i :: args.jobs]) for i in range(max(1, args.jobs))]
        with ThreadPoolExecutor(max_workers=len(shares)) as pool:
            outcomes = [o for share in pool.map(run_share, shares) for o in share]
    except (ValueError, RuntimeError) as error:
        print(f"mutants: error: {error}", file=sys.stderr)
        return 2
    survived = [o for o in outcomes if not o.caught]
    print(
        f"\n{len(outcomes) - len(survived)} caught, {len(survived)} survived, "
        f"{len(outcomes)} in all"
    )
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
