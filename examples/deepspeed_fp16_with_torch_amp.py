"""An fp16 torch-AMP recipe moved onto DeepSpeed, keeping its autocast and GradScaler.

What to notice: `ds_config_fp16.json` (beside this file) turns on DeepSpeed's own fp16 mode, so
the engine already holds the model in fp16, scales the loss in `engine.backward()` and unscales in
`engine.step()`. The torch GradScaler on top multiplies the loss a second time, which the engine
never divides out, and since DeepSpeed 0.17.2 the `torch.autocast` around the engine's forward
stops the run with an AssertionError (the config does not enable `torch_autocast`). amp-lint
reports both (AMP014). Compare with deepspeed_fp16.py. Needs DeepSpeed and a GPU:
`deepspeed deepspeed_fp16_with_torch_amp.py`.
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
    scaler = torch.amp.GradScaler("cuda")
    for _ in range(args.steps):
        x = torch.randn(16, 512, device=engine.device)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = nn.functional.mse_loss(engine(x).float(), x)
        engine.backward(scaler.scale(loss))
        engine.step()
        scaler.update()


if __name__ == "__main__":
    main()
