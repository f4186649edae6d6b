"""Flax NNX worker models exposed as pure functions ``apply(params, x)``.

`make_model` builds an `MLP` (ParM's 784-200-100-10), `LeNet5`, `SmallCNN` or a small `ViT`,
splits it with ``nnx.split`` and returns ``(apply, params)``: ``apply(params, x)`` maps a batch
of channels-last images ``(b, H, W, C)`` to logits ``(b, num_classes)`` and ``params`` is a
nested dict of float32 arrays. `worker_function` gives the single-input function a coded
computing worker evaluates, ``f(x) = softmax(apply(params, x))`` of shape ``(num_classes,)``.
"""

from ._apply import MODEL_NAMES as MODEL_NAMES
from ._apply import ModelApply as ModelApply
from ._apply import count_params as count_params
from ._apply import make_model as make_model
from ._apply import predict_proba as predict_proba
from ._apply import worker_function as worker_function
from ._modules import MLP as MLP
from ._modules import LeNet5 as LeNet5
from ._modules import SmallCNN as SmallCNN
from ._modules import ViT as ViT
from ._repvgg import RepVGG as RepVGG
from ._repvgg import reparameterize_repvgg as reparameterize_repvgg

__all__ = [
    "MLP",
    "MODEL_NAMES",
    "LeNet5",
    "ModelApply",
    "SmallCNN",
    "RepVGG",
    "ViT",
    "count_params",
    "make_model",
    "predict_proba",
    "reparameterize_repvgg",
    "worker_function",
]
