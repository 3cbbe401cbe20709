"""rollout_core: attention rollout, attention flow and gradient rollout for transformers.

A library first (no Streamlit here): the dashboard pages, the CLI (`python -m rollout_core`) and
notebooks all call the same functions. Public names are imported lazily so that `import rollout_core`
is cheap and a CLI error can be reported before torch is loaded.

Maths convention: R = Ã_L · ... · Ã_1 (later layers on the left), R[i, j] = share of input token j
in output token i. See docs/METHOD.md.
"""
from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    # maths
    "attention_rollout": "rollout_core.maths.rollout",
    "layer_attention": "rollout_core.maths.rollout",
    "fuse_heads": "rollout_core.maths.fusion",
    "attention_flow": "rollout_core.maths.flow",
    "gradient_rollout": "rollout_core.maths.gradient",
    # models
    "load_model": "rollout_core.models.loading",
    "ModelHandle": "rollout_core.models.handle",
    "registry": "rollout_core.models.registry",
    # explanations
    "explain_text": "rollout_core.explain",
    "explain_texts": "rollout_core.explain",
    "explain_methods": "rollout_core.explain",
    "explain_image": "rollout_core.explain",
    "explain": "rollout_core.explain",
    "prepare": "rollout_core.explain",
    "Prepared": "rollout_core.explain",
    "Options": "rollout_core.options",
    "OPTIONS": "rollout_core.options",
    "Explanation": "rollout_core.explanation",
    "show": "rollout_core.figures.standalone",
    # errors
    "RolloutError": "rollout_core.errors",
    "InputError": "rollout_core.errors",
    "ModelLoadError": "rollout_core.errors",
    "UnsupportedModelError": "rollout_core.errors",
    "SecurityError": "rollout_core.errors",
}

__all__ = sorted(_EXPORTS)
_MODULES = ("registry", "explain")
"""Exports that are modules: `explain` is also the function (the module is callable: `explain.explain`), so the
package attribute stays the module once `rollout_core.explain` is imported."""


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'rollout_core' has no attribute {name!r}")
    value = importlib.import_module(module)
    return value if name in _MODULES else getattr(value, name)
