"""The reference implementation of ``ray.train.huggingface``, which exports nothing itself: the
Transformers integration is ``reference.train.huggingface.transformers``.

The trainers of older Ray releases (``TransformersTrainer``, ``AccelerateTrainer``) are gone,
so importing them fails with ImportError, as in Ray 2.60; run ``transformers.Trainer`` or
``accelerate.Accelerator`` inside a ``TorchTrainer`` training function instead.
"""

__all__: list = []
