"""Per-iteration overhead of a loss scaler: none vs torch.amp.GradScaler vs ours, interleaved.

Each configuration has N small parameter tensors (so the scaler's host work, not arithmetic,
dominates) and times the part of an iteration a scaler changes: fresh gradients are attached as
``backward()`` leaves them (new tensors, as after ``zero_grad(set_to_none=True)``), then either
``optimizer.step()`` alone or ``scale(loss)``, ``step`` and ``update``. Forward and backward are
left out because they are identical in all three variants and only add noise. The variants run
in one process, in rotating order, repeated; the table shows the median time with no scaler,
the median *added* time of each scaler (paired per round), their ratio (ours / torch: below 1
means ours adds less) and the device-to-host syncs per iteration. ``+tracking`` is ours with
``track_overflows=True`` (issue 45: per-tensor overflow verdicts kept on the device), with
``trk-ours``, what tracking itself adds per iteration over ours without it.

A second table times the LR schedule on top: torch's scaler with a plain scheduler stepped every
iteration (which advances on skipped steps too) against ours with ``SkipAwareScheduler``: the
host time of one ``scheduler.step()`` (median per round; ratio ours / torch), and whole
iterations with scaler and schedule over the no-scaler baseline (ratio ours / torch).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

from scaler import GradScaler, SkipAwareScheduler, SyncCounter

OPTIMIZERS: dict[str, Callable[[list[torch.nn.Parameter]], torch.optim.Optimizer]] = {
    "sgd-foreach": lambda p: torch.optim.SGD(p, lr=1e-3, momentum=0.9, foreach=True),
    "adam-foreach": lambda p: torch.optim.Adam(p, lr=1e-3, foreach=True),
    "adam-fused": lambda p: torch.optim.Adam(p, lr=1e-3, fused=True),
}


class Workload:
    """A model of ``n_tensors`` parameters, its optimizer and (optionally) a scaler."""

    def __init__(
        self,
        n_tensors: int,
        optimizer: str,
        scaler: str,
        device: str = "cpu",
        schedule: bool = False,
    ) -> None:
        torch.manual_seed(0)
        self.device = torch.device(device)
        self.params = [
            torch.nn.Parameter(torch.randn(16, device=device) * 0.01) for _ in range(n_tensors)
        ]
        self.grads = [torch.randn(16, device=device) * 0.01 for _ in range(n_tensors)]
        self.loss = torch.ones((), device=device)
        self.optimizer = OPTIMIZERS[optimizer](self.params)
        self.monitored = scaler == "ours+monitoring"
        self.scaler = {
            "none": None,
            "torch": lambda: torch.amp.GradScaler(device),
            "ours": lambda: GradScaler(device),
            # Issue 4's configuration: the below-one policy, a floor, and per-step monitoring.
            "ours+monitoring": lambda: GradScaler(device, min_scale=1.0, below_one="warn"),
            # Issue 45: which tensor overflowed, kept per tensor on the device.
            "ours+tracking": lambda: GradScaler(device, track_overflows=True),
        }[scaler]
        self.scaler = self.scaler() if self.scaler else None
        self.scheduler: torch.optim.lr_scheduler.LRScheduler | None = None
        #: Host time spent in ``scheduler.step()`` (on CUDA: launching its kernels, not running
        #: them; those are in the whole-iteration time).
        self.schedule_seconds = 0.0
        if schedule:
            # A recursive-form schedule (each step reads the current LR), as most are.
            plain = torch.optim.lr_scheduler.CosineAnnealingLR(self.optimizer, T_max=10**6)
            self.scheduler = (
                SkipAwareScheduler(plain, self.scaler)
                if isinstance(self.scaler, GradScaler)
                else plain
            )

    def iteration(self) -> None:
        for param, grad in zip(self.params, self.grads, strict=True):
            param.grad = grad.clone()
        if self.scaler is None:
            self.optimizer.step()
            return
        self.scaler.scale(self.loss)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        if self.monitored:  # what a loop that logs every step would call, all sync-free
            self.scaler.step_skipped(self.optimizer)
            self.scaler.peek_scale()
        if self.scheduler is not None:
            start = time.perf_counter()
            self.scheduler.step()
            self.schedule_seconds += time.perf_counter() - start

    def time_per_iteration(self, iterations: int) -> float:
        self._wait_for_device()
        start = time.perf_counter()
        for _ in range(iterations):
            self.iteration()
        self._wait_for_device()
        return (time.perf_counter() - start) / iterations

    def _wait_for_device(self) -> None:
        # On CUDA, time whole iterations including the queued kernels, not just their launch.
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def syncs_per_iteration(self, iterations: int = 3) -> float:
        with SyncCounter() as counter:
            for _ in range(iterations):
                self.iteration()
        return counter.count / iterations


def measure(
    n_tensors: int, optimizer: str, rounds: int, iterations: int, device: str = "cpu"
) -> dict[str, object]:
    variants = ("none", "torch", "ours", "ours+monitoring", "ours+tracking")
    workloads = {name: Workload(n_tensors, optimizer, name, device) for name in variants}
    for workload in workloads.values():  # warm up: lazy state, first-step paths
        workload.time_per_iteration(3)
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for round_ in range(rounds):
        shift = round_ % len(variants)
        order = variants[shift:] + variants[:shift]
        for name in order:
            samples[name].append(workloads[name].time_per_iteration(iterations))
    base = statistics.median(samples["none"])
    # Added time per round against the same round's baseline, then the median.
    added = {
        name: statistics.median(s - b for s, b in zip(samples[name], samples["none"], strict=True))
        for name in variants[1:]
    }
    syncs = {name: workloads[name].syncs_per_iteration() for name in variants}
    return {"base": base, "added": added, "syncs": syncs}


#: The schedule table's variants: (scaler, with a scheduler).
SCHEDULE_VARIANTS: dict[str, tuple[str, bool]] = {
    "none": ("none", False),
    "torch": ("torch", False),
    "torch+plain": ("torch", True),
    "ours": ("ours", False),
    "ours+skip-aware": ("ours", True),
}


def measure_schedules(
    n_tensors: int, optimizer: str, rounds: int, iterations: int, device: str = "cpu"
) -> dict[str, object]:
    """Interleaved like ``measure``; each variant's median time added over no scaler."""
    workloads = {
        name: Workload(n_tensors, optimizer, scaler, device, schedule)
        for name, (scaler, schedule) in SCHEDULE_VARIANTS.items()
    }
    for workload in workloads.values():
        workload.time_per_iteration(3)
    variants = tuple(workloads)
    samples: dict[str, list[float]] = {name: [] for name in variants}
    step_samples: dict[str, list[float]] = {name: [] for name in ("torch+plain", "ours+skip-aware")}
    for round_ in range(rounds):
        shift = round_ % len(variants)
        for name in variants[shift:] + variants[:shift]:
            workloads[name].schedule_seconds = 0.0
            samples[name].append(workloads[name].time_per_iteration(iterations))
            if name in step_samples:
                step_samples[name].append(workloads[name].schedule_seconds / iterations)
    added = {
        name: statistics.median(s - b for s, b in zip(samples[name], samples["none"], strict=True))
        for name in variants[1:]
    }
    steps = {name: statistics.median(values) for name, values in step_samples.items()}
    syncs = {name: workloads[name].syncs_per_iteration() for name in variants}
    return {"added": added, "steps": steps, "syncs": syncs}


def _ratio(ours: float, theirs: float) -> float:
    return ours / theirs if theirs > 0 else float("nan")


def print_schedule_table(args: argparse.Namespace) -> None:
    header = (
        f"{'optimizer':<13} {'tensors':>7} {'plain step':>10} {'skip-aware':>10} "
        f"{'sched ours/torch':>16} {'total ours/torch':>16} {'syncs torch/ours':>16}"
    )
    print()
    print("LR schedule: torch scaler + plain scheduler vs ours + SkipAwareScheduler")
    print(header)
    print("-" * len(header))
    for optimizer in args.optimizers:
        for size in args.sizes:
            result = measure_schedules(size, optimizer, args.rounds, args.iterations, args.device)
            added, syncs = result["added"], result["syncs"]
            plain_step = result["steps"]["torch+plain"]
            skip_aware_step = result["steps"]["ours+skip-aware"]
            sync_columns = "/".join(
                f"{syncs[name] - syncs['none']:.0f}" for name in ("torch+plain", "ours+skip-aware")
            )
            print(
                f"{optimizer:<13} {size:>7} {plain_step * 1e6:>8.0f}us "
                f"{skip_aware_step * 1e6:>8.0f}us {_ratio(skip_aware_step, plain_step):>16.2f} "
                f"{_ratio(added['ours+skip-aware'], added['torch+plain']):>16.2f} "
                f"{sync_columns:>16}",
                flush=True,
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: a CI check, not data")
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--optimizers", nargs="+", default=list(OPTIMIZERS), choices=OPTIMIZERS)
    parser.add_argument("--rounds", type=int, default=15, help="interleaved rounds per case")
    parser.add_argument("--iterations", type=int, default=10, help="iterations per round")
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    args = parser.parse_args(argv)
    if args.smoke:
        args.sizes, args.rounds, args.iterations = [10], 2, 2
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: CUDA is not available")
    torch.set_num_threads(1)
    where = torch.cuda.get_device_name() if args.device == "cuda" else "CPU, 1 thread"
    print(f"torch {torch.__version__}, {where}; median of {args.rounds} interleaved rounds")
    if args.device == "cpu":
        # SyncCounter counts CPU tensors as if they lived on an accelerator; peek_scale() on the
        # fused (device) path reads the host's own scale tensor there, which counts one.
        print("syncs: host reads as SyncCounter counts them (on CUDA, peek_scale() reads none)")
    header = (
        f"{'optimizer':<13} {'tensors':>7} {'no scaler':>10} {'torch adds':>11} "
        f"{'ours adds':>10} {'ours/torch':>10} {'+monitoring':>11} {'mon/torch':>9} "
        f"{'+tracking':>10} {'trk-ours':>9} {'trk/torch':>9} {'syncs torch/ours/mon/trk':>24}"
    )
    print(header)
    print("-" * len(header))
    for optimizer in args.optimizers:
        for size in args.sizes:
            result = measure(size, optimizer, args.rounds, args.iterations, args.device)
            added, syncs = result["added"], result["syncs"]
            torch_added = added["torch"]
            ratios = {
                name: _ratio(added[name], torch_added)
                for name in ("ours", "ours+monitoring", "ours+tracking")
            }
            sync_columns = "/".join(
                f"{syncs[name] - syncs['none']:.0f}"
                for name in ("torch", "ours", "ours+monitoring", "ours+tracking")
            )
            tracking_cost = added["ours+tracking"] - added["ours"]
            print(
                f"{optimizer:<13} {size:>7} {result['base'] * 1e6:>8.0f}us "
                f"{torch_added * 1e6:>9.0f}us {added['ours'] * 1e6:>8.0f}us "
                f"{ratios['ours']:>10.2f} {added['ours+monitoring'] * 1e6:>9.0f}us "
                f"{ratios['ours+monitoring']:>9.2f} {added['ours+tracking'] * 1e6:>8.0f}us "
                f"{tracking_cost * 1e6:>7.0f}us {ratios['ours+tracking']:>9.2f} "
                f"{sync_columns:>24}",
                flush=True,
            )
    print_schedule_table(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
