"""The same training as deepspeed_fp16_with_torch_amp.py, with the engine managing fp16 alone.

What to notice: `ds_config_fp16.json` turns on DeepSpeed's fp16 mode; the engine casts, scales
and unscales by itself, so the loop calls only `engine(x)`, `engine.backward(loss)` and
`engine.step()`. amp-lint reports nothing. Needs DeepSpeed and a GPU:
`deepspeed deepspeed_fp16.py`.
"""

import argparse

import deepspeed
import torch
from torch import nn


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--local_rank", type=int, default=-1)
    parser.add_argument("--deepspeed_config", default="ds_config_fp16.json")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    model = nn.Sequential(nn.Linear(512, 2048), nn.GELU(), nn.Linear(2048, 512))
    engine, _, _, _ = deepspeed.initialize(
        args=args, model=model, model_parameters=model.parameters()
    )
    for _ in range(args.steps):
        x = torch.randn(16, 512, device=engine.device, dtype=torch.float16)
        loss = nn.functional.mse_loss(engine(x).float(), x.float())
        engine.backward(loss)
        engine.step()


if __name__ == "__main__":
    main()
