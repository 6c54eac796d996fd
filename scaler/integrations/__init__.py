"""ampscale's scaler where people actually train: Hugging Face Trainer, accelerate, Lightning.

Each framework has its own module, imported on its own, so that none of them is needed to use
the others (or the scaler):

* :mod:`scaler.integrations.transformers` — ``LossScaleCallback`` for the HF ``Trainer``;
* :mod:`scaler.integrations.accelerate` — ``use_ampscale(accelerator)`` for hand-written loops;
* :mod:`scaler.integrations.lightning` — ``precision_plugin()`` and ``LossScaleMonitor``.

Importing one whose framework is missing raises an ``ImportError`` that names the extra to
install (``ampscale[transformers]``, ``ampscale[lightning]``).
"""
