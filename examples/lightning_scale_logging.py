"""A Lightning module that logs the loss scale from a per-step hook.

What to notice: there is no loop in this file — Lightning calls `on_before_optimizer_step` on
every optimizer step, so the `get_scale()` inside it syncs the device every step all the same
(AMP001). `on_train_epoch_end` runs once per epoch and is fine.
"""

import lightning as L
import torch
from torch import nn


class Classifier(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 10))
        self.loss_fn = nn.CrossEntropyLoss()

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = self.loss_fn(self.net(x), y)
        self.log("train/loss", loss)
        return loss

    def on_before_optimizer_step(self, optimizer):
        scaler = self.trainer.precision_plugin.scaler
        if scaler is not None:
            self.log("train/loss_scale", scaler.get_scale())

    def on_train_epoch_end(self):
        scaler = self.trainer.precision_plugin.scaler
        if scaler is not None:
            self.log("epoch/loss_scale", scaler.get_scale())

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=3e-4)


if __name__ == "__main__":
    trainer = L.Trainer(max_epochs=3, precision="16-mixed", accelerator="gpu")
    trainer.fit(Classifier())
