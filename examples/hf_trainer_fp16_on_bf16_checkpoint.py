"""Fine-tuning FLAN-T5 with the Hugging Face Seq2SeqTrainer and `fp16=True`.

What to notice: no dtype appears anywhere, yet the model is bf16 — FLAN-T5 was pretrained in
bfloat16 (its model card says so), and transformers 5 loads a checkpoint in its own dtype by
default. `fp16=True` then runs it under fp16 autocast with a GradScaler: activations that bf16
held comfortably overflow fp16's 65504, the scale backs off below 1 and the loss turns to NaN.
amp-lint reports `fp16=True` and names the line that loads the checkpoint (AMP002). The fix is
one word: `bf16=True`.
"""

from datasets import load_dataset
from transformers import (
    AutoModelForSeq2SeqLM,
    AutoTokenizer,
    DataCollatorForSeq2Seq,
    Seq2SeqTrainer,
    Seq2SeqTrainingArguments,
)

CHECKPOINT = "google/flan-t5-large"


def preprocess(tokenizer, batch):
    inputs = tokenizer(
        ["summarize: " + text for text in batch["document"]], max_length=512, truncation=True
    )
    inputs["labels"] = tokenizer(
        text_target=batch["summary"], max_length=64, truncation=True
    ).input_ids
    return inputs


def main() -> None:
    tokenizer = AutoTokenizer.from_pretrained(CHECKPOINT)
    model = AutoModelForSeq2SeqLM.from_pretrained(CHECKPOINT)
    dataset = load_dataset("EdinburghNLP/xsum")
    tokenized = dataset.map(lambda b: preprocess(tokenizer, b), batched=True)

    args = Seq2SeqTrainingArguments(
        output_dir="flan-t5-xsum",
        per_device_train_batch_size=8,
        gradient_accumulation_steps=4,
        learning_rate=3e-4,
        num_train_epochs=1,
        logging_steps=50,
        fp16=True,
        predict_with_generate=True,
    )
    trainer = Seq2SeqTrainer(
        model=model,
        args=args,
        train_dataset=tokenized["train"],
        eval_dataset=tokenized["validation"],
        data_collator=DataCollatorForSeq2Seq(tokenizer, model=model),
        processing_class=tokenizer,
    )
    trainer.train()


if __name__ == "__main__":
    main()
