"""`ModelHandle`: a loaded model with everything the explain functions need to know about it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch


@dataclass
class ModelHandle:
    """A model in eval mode with eager attention, its tokenizer or image processor, and its facts.

    Handles are shared (cached by `load_model`) between threads and sessions: nothing here is
    mutated after loading, and the explain functions never change the model or its processor.
    """

    name: str  # what the user asked for (registry name, hub id, folder)
    source: str  # resolved folder or hub id
    family: str  # config.model_type
    task: str  # "text-classification" | "text-encoder" | "sentence-encoder" | "causal-lm" | "seq2seq" |
    # "image-classification" | "image-backbone"
    modality: str  # "text" | "image"
    model: torch.nn.Module
    processor: Any  # tokenizer (text) or image processor (image)
    labels: list[str] | None
    device: torch.device
    num_layers: int  # self-attention layers explained (the encoder's for encoder-decoder models)
    num_heads: int

    @property
    def config(self) -> Any:
        """The transformers config of the model."""
        return self.model.config

    def __repr__(self) -> str:  # the model's own repr is pages long
        return (
            f"ModelHandle(name={self.name!r}, family={self.family!r}, task={self.task!r}, "
            f"layers={self.num_layers}, heads={self.num_heads}, device={str(self.device)!r})"
        )
