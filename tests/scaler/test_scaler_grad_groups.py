"""The cached grouping of gradients by device and dtype, and when it must be rebuilt."""

from __future__ import annotations

import gc
import weakref

import pytest
import torch

from scaler import GradScaler
from scaler._grad_groups import GradGroups


def params_with_grads(*dtypes: torch.dtype) -> list[torch.nn.Parameter]:
    params = [torch.nn.Parameter(torch.ones(3, dtype=dtype)) for dtype in dtypes]
    for param in params:
        param.grad = torch.full_like(param, 2.0)
    return params


def summary(groups) -> list[tuple[str, torch.dtype, int]]:
    return sorted(((str(dev), dtype, len(tensors)) for dev, dtype, tensors in groups), key=str)


def test_groups_by_dtype_and_skips_missing_grads() -> None:
    params = params_with_grads(torch.float32, torch.float64, torch.float32)
    params.append(torch.nn.Parameter(torch.ones(2)))  # no grad
    groups = GradGroups().group([{"params": params}], allow_fp16=False)
    assert summary(groups) == [("cpu", torch.float32, 2), ("cpu", torch.float64, 1)]


def test_replaced_grads_are_the_ones_returned() -> None:
    params = params_with_grads(torch.float32, torch.float32)
    cache = GradGroups()
    cache.group([{"params": params}], allow_fp16=False)
    params[0].grad = torch.full((3,), 7.0)  # as zero_grad(set_to_none=True) + backward do
    ((_, _, tensors),) = cache.group([{"params": params}], allow_fp16=False)
    assert tensors[0] is params[0].grad


@pytest.mark.parametrize(
    "change",
    ["grad_vanishes", "grad_appears", "dtype_changes", "becomes_sparse", "param_group_added"],
)
def test_grouping_is_rebuilt_when_the_gradients_change(change: str) -> None:
    params = params_with_grads(torch.float32, torch.float32)
    extra = torch.nn.Parameter(torch.ones(3, dtype=torch.float64))
    param_groups = [{"params": params}]
    cache = GradGroups()
    cache.group(param_groups, allow_fp16=True)
    if change == "grad_vanishes":
        params[1].grad = None
        expected = [("cpu", torch.float32, 1)]
    elif change == "grad_appears":
        param_groups[0]["params"] = [*params, extra]
        extra.grad = torch.ones(3, dtype=torch.float64)
        expected = [("cpu", torch.float32, 2), ("cpu", torch.float64, 1)]
    elif change == "dtype_changes":  # e.g. model.half() after the optimizer was built
        for param in params:
            param.data = param.data.half()
            param.grad = param.grad.half()
        expected = [("cpu", torch.float16, 2)]
    elif change == "becomes_sparse":
        params[1].grad = torch.sparse_coo_tensor(
            torch.tensor([[0]]), torch.tensor([1.0]), (3,), check_invariants=True
        )
        expected = [("cpu", torch.float32, 2)]
    else:
        extra.grad = torch.ones(3, dtype=torch.float64)
        param_groups.append({"params": [extra]})
        expected = [("cpu", torch.float32, 2), ("cpu", torch.float64, 1)]
    groups = cache.group(param_groups, allow_fp16=True)
    assert summary(groups) == expected
    if change == "becomes_sparse":
        assert any(t.shape == (1,) for _, _, tensors in groups for t in tensors)  # its values


def test_fp16_check_after_a_dtype_change() -> None:
    params = params_with_grads(torch.float32)
    cache = GradGroups()
    cache.group([{"params": params}], allow_fp16=False)
    params[0].data = params[0].data.half()
    params[0].grad = params[0].grad.half()
    with pytest.raises(ValueError, match="Attempting to unscale FP16 gradients"):
        cache.group([{"params": params}], allow_fp16=False)


def test_the_cache_keeps_no_gradient_alive() -> None:
    params = params_with_grads(torch.float32)
    cache = GradGroups()
    cache.group([{"params": params}], allow_fp16=False)
    ref = weakref.ref(params[0].grad)
    params[0].grad = None
    gc.collect()
    assert ref() is None


def test_scaler_unscales_the_new_grads_after_set_to_none() -> None:
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    scaler = GradScaler("cpu", init_scale=4.0)
    for value in (1.0, 3.0):
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(model(torch.full((1, 3), value)).sum()).backward()
        scaler.unscale_(optimizer)
        torch.testing.assert_close(model.weight.grad, torch.full((2, 3), value))
        scaler.step(optimizer)
        scaler.update()
