"""Any timm model as a face backbone: pooled features, no classifier."""

import difflib
from typing import Any, cast

import torch
from torch import nn


class TimmBackbone(nn.Module):
    """``timm.create_model(name, num_classes=0)``; forward(x [B, C, H, W]) -> pooled features [B, num_features]
    (the pre-logits width where the model has a pre-logits head).

    ``pretrained=True`` is passed through to timm, which loads weights from the Hugging Face hub cache. Nothing may
    be downloaded on these machines: put the weights in the local HF cache beforehand and run with
    ``HF_HUB_OFFLINE=1``; otherwise timm fails to find them. ``timm_kwargs`` go to ``timm.create_model`` as is
    (e.g. ``drop_rate``, ``drop_path_rate``, ``global_pool``).
    """

    def __init__(self, name: str, pretrained: bool = False, in_chans: int = 3, **timm_kwargs: Any) -> None:
        import timm  # 0.6 s to import: only where a run builds a timm backbone

        super().__init__()
        if not timm.is_model(name):
            close = difflib.get_close_matches(name, timm.list_models(), n=3)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            raise ValueError(f"backbone.name={name!r} is not a timm model; see timm.list_models(){hint}")
        self.model = timm.create_model(name, pretrained=pretrained, num_classes=0, in_chans=in_chans, **timm_kwargs)
        # Models with a pre-logits head (MobileNetV3, LCNet, GhostNet) return head_hidden_size features, not the
        # trunk's num_features. Both are plain int attributes of timm models (torch types nn.Module attributes it
        # does not know as Tensor | Module).
        self.num_features = cast(int, getattr(self.model, "head_hidden_size", None) or self.model.num_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)
