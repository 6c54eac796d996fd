"""Fine-tuning a bf16-pretrained checkpoint under fp16 autocast with a GradScaler.

What to notice: the model is loaded as bfloat16, then trained with fp16 autocast. Weights and
activations learned in bf16 routinely exceed fp16's largest value (65504), so gradients overflow
on every step, the GradScaler keeps halving the scale — below 1 and on towards 0 — and the loss
turns to NaN. amp-lint reports it once, at the GradScaler, with the bf16 load and the autocast as
related sites (AMP002). The fix: train with bf16 autocast and no scaler (finetune_bf16.py).
"""

import torch
from torch.utils.data import DataLoader
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

MODEL_NAME = "google/flan-t5-base"


def collate(tokenizer, batch):
    inputs = tokenizer([b["source"] for b in batch], padding=True, return_tensors="pt")
    labels = tokenizer([b["target"] for b in batch], padding=True, return_tensors="pt").input_ids
    labels[labels == tokenizer.pad_token_id] = -100
    inputs["labels"] = labels
    return inputs


def finetune(dataset, epochs: int = 1, lr: float = 1e-4) -> None:
    tokenizer = AutoTokenizer.from_pretrained(MODEL_NAME)
    model = AutoModelForSeq2SeqLM.from_pretrained(MODEL_NAME, torch_dtype=torch.bfloat16)
    model.to("cuda")
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    scaler = torch.amp.GradScaler("cuda")
    loader = DataLoader(dataset, batch_size=8, collate_fn=lambda b: collate(tokenizer, b))

    model.train()
    for _epoch in range(epochs):
        for batch in loader:
            batch = {k: v.to("cuda") for k, v in batch.items()}
            optimizer.zero_grad()
            with torch.autocast(device_type="cuda", dtype=torch.float16):
                loss = model(**batch).loss
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()
