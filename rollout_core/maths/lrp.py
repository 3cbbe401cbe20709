"""AttnLRP (Achtibat et al. 2024) as a modified gradient: inside `attnlrp_rules(model)`, the gradient of the
explained score times the encoder's input embedding is the AttnLRP relevance of each input dimension.

The rules, written as in the reference code's gradient x input mode (rachtibat/LRP-eXplains-Transformers,
lxt/efficient): linear layers keep their gradient (epsilon rule with epsilon -> 0); LayerNorm is linear in its
input with the standard deviation held constant (identity rule); element-wise activations pass the gradient
times f(x)/x (identity rule: relevance f(x)·g flows to x unchanged); the softmax keeps its ordinary gradient,
which in gradient x input form is exactly AttnLRP's rule R_in = x (R_out - s ΣR_out); the two bilinear matmuls
Q Kᵀ and A V get the uniform rule (each factor gets half), which halves the gradient of V and of A, and
quarters that of Q and K (half at A V, half again at Q Kᵀ).

The rules are forward hooks on the model's own modules, removed when the block exits; each hook returns a
tensor with the module's exact forward value and the modified gradient (`value.detach() + (t - t.detach())`),
so the outputs inside and after the block are those of the unmodified model.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator, Sequence

import torch
from torch import nn

from rollout_core.errors import UnsupportedModelError
from rollout_core.models.thread_hooks import own_thread

QK_FACTOR = 4.0  # uniform rule at A V (1/2) times uniform rule at Q Kᵀ (1/2)
V_FACTOR = 2.0  # uniform rule at A V
_NOT_ELEMENTWISE = (nn.Softmax, nn.Softmin, nn.LogSoftmax, nn.Softmax2d, nn.MultiheadAttention, nn.GLU)
_ACTIVATION_MODULES = ("transformers.activations", "torch.nn.modules.activation")


def with_gradient(value: torch.Tensor, path: torch.Tensor) -> torch.Tensor:
    """`value` in the forward pass; in the backward pass the gradient goes to `path` instead."""
    return value.detach() + (path - path.detach())


def divide_gradient(out: torch.Tensor, factor: float) -> torch.Tensor:
    """The same tensor with its gradient divided by `factor` (the uniform rule's share)."""
    return with_gradient(out, out / factor)


def identity_rule(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """out = f(x) with the gradient g·f(x)/x, so that x times it is f(x)·g: the relevance passes unchanged."""
    tiny = torch.finfo(x.dtype).tiny
    safe = torch.where(x.abs() < tiny, torch.full_like(x, tiny), x)
    return with_gradient(out, x * (out / safe).detach())


def layer_norm_rule(x: torch.Tensor, out: torch.Tensor, norm: nn.LayerNorm) -> torch.Tensor:
    """LayerNorm with its normaliser held constant: linear in x, so gradient x input conserves relevance."""
    centred = x - x.mean(-1, keepdim=True)
    std = torch.sqrt(centred.pow(2).mean(-1, keepdim=True) + norm.eps).detach()
    y = centred / std
    if norm.weight is not None:
        y = y * norm.weight
    if norm.bias is not None:
        y = y + norm.bias
    return with_gradient(out, y)


def _is_activation(module: nn.Module) -> bool:
    return type(module).__module__ in _ACTIVATION_MODULES and not isinstance(module, _NOT_ELEMENTWISE)


@contextmanager
def attnlrp_rules(model: nn.Module) -> Iterator[None]:
    """AttnLRP's rules as hooks on `model` (BERT-like and ViT-like encoders) for the duration of the block."""
    from rollout_core.models.layer_access import layer_access

    try:
        layers = layer_access(model)
    except UnsupportedModelError:
        family = getattr(model.config, "model_type", "unknown")
        raise UnsupportedModelError(f"AttnLRP is available for BERT-like and ViT-like encoders, not {family}") from None
    projections = [(p, f) for acc in layers for p, f in ((acc.query, QK_FACTOR), (acc.key, QK_FACTOR),
                                                         (acc.value, V_FACTOR))]
    with rules(model, projections):
        yield


@contextmanager
def rules(model: nn.Module, projections: Sequence[tuple[nn.Module, float]]) -> Iterator[None]:
    """The rules on any module tree: every LayerNorm and element-wise activation, and the gradient of each
    attention projection's output divided by its factor (Q, K: 4; V: 2). Hooks removed on exit. They act only
    on forward passes of the thread that entered the block: the dashboard shares a model between threads."""
    def hook(rule: Callable[[nn.Module, torch.Tensor, torch.Tensor], torch.Tensor]) -> Callable:
        return own_thread(lambda m, a, out: rule(m, a[0], out))

    hooks = []
    try:
        for proj, factor in projections:
            hooks.append(proj.register_forward_hook(hook(lambda m, x, out, f=factor: divide_gradient(out, f))))
        for module in model.modules():
            if isinstance(module, nn.LayerNorm):
                if len(module.normalized_shape) != 1:
                    raise UnsupportedModelError("AttnLRP handles layer norms over the last dimension only")
                hooks.append(module.register_forward_hook(hook(lambda m, x, out: layer_norm_rule(x, out, m))))
            elif _is_activation(module):
                hooks.append(module.register_forward_hook(hook(lambda m, x, out: identity_rule(x, out))))
        yield
    finally:
        for hook in hooks:
            hook.remove()


def token_relevance(embedded: torch.Tensor, gradient: torch.Tensor) -> torch.Tensor:
    """(B, n): the relevance of each input token, embedding x modified gradient summed over the embedding."""
    return (embedded.detach().double() * gradient.double()).sum(-1)
