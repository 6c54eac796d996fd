"""Fine-tuning a bf16-pretrained checkpoint the safe way: bf16 autocast, no loss scaler.

What to notice: bf16 has fp32's exponent range, so nothing overflows and no loss scaling is
needed; the checkpoint's dtype and the autocast dtype agree. amp-lint reports nothing here.
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
    loader = DataLoader(dataset, batch_size=8, collate_fn=lambda b: collate(tokenizer, b))

    model.train()
    for _epoch in range(epochs):
        for batch in loader:
            batch = {k: v.to("cuda") for k, v in batch.items()}
            optimizer.zero_grad()
            with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
                loss = model(**batch).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
