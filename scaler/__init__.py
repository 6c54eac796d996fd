"""ampscale's reference dynamic loss scaler: a drop-in for ``torch.amp.GradScaler``."""

__all__: list[str] = []
