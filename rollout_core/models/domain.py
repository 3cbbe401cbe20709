"""How far an image is from what a model was trained on, measured on the model's own features.

A model trained on generated shapes (default-image, shapes-vit-tiny) gives confident classes to photos (the rocket
reads "cross 95%"), so its confidence cannot say when it is out of its depth. Its classifier's input (the features
the classes are read from) can: `DomainStatistics` holds the class means and the within-class covariance of those
features over generated training shapes, and an image's distance is its Mahalanobis distance to the nearest class
mean (Lee et al. 2018, "A simple unified framework for detecting out-of-distribution samples", tied covariance).
The covariance is shrunk towards its mean variance and stored as its top eigenvectors plus one variance for every
other direction (small enough to ship). `threshold` is a high quantile of held-out shapes' distances: above it the
image counts as far. The statistics are fitted by `python -m training.fit_domain` (which measures the error rates
written in docs/reliability.md) and stored per registry model in `models/measured/<model>.domain.safetensors`,
with a fingerprint of the classifier's weights so statistics of another training run are never applied.

The held-out images also set `unsure_below`, the top probability under which the model is unusually unsure.
`colourfulness` is a model-free reason: every generated shape image is coloured, greyscale photos are not.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

import numpy as np


if TYPE_CHECKING:
    import torch

DOMAIN_DIR = Path(__file__).resolve().parent / "measured"
"""Where each registry model's statistics live, as `<model>.domain.safetensors`, beside its measured record
(measured facts about the model, not weights: they stay out of the assets' weight budget)."""
SUFFIX = ".domain.safetensors"
GREY_BELOW = 0.1
"""Colourfulness below which an image is nearly grey (every generated shape image is above 0.18)."""
UNSURE_QUANTILE = 0.02
"""`DomainStatistics.unsure_below` is this quantile of the held-out images' top probabilities: a lower one is
unusual for the model on its own kind of images (a weak model is never sure, so no fixed line fits all)."""


@dataclass(frozen=True)
class DomainStatistics:
    """The training features of one model, summarised; see the module docstring."""

    module: str  # the submodule whose input are the features ("classifier")
    means: np.ndarray  # (K, d) per-class means of the training features
    basis: np.ndarray  # (k, d) orthonormal top directions of the shrunk within-class covariance
    variances: np.ndarray  # (k,) the covariance's variance along each of them
    rest: float  # its variance along every other direction
    threshold: float  # distances above this are far from the training data
    typical: float  # the median distance of held-out training-like images
    unsure_below: float  # a top probability below this is unusual on held-out training-like images
    fingerprint: str  # `weights_fingerprint` of the module the statistics were fitted on
    dataset: str  # what the training data was, in words ("generated shapes")

    def distance(self, features: np.ndarray) -> np.ndarray:
        """Mahalanobis distance of each row of `features` (B, d) (or one (d,) vector) to the nearest class mean."""
        x = np.atleast_2d(np.asarray(features, np.float64))
        centred = x[:, None, :] - self.means[None]  # (B, K, d)
        along = centred @ self.basis.T  # (B, K, k)
        inside = (along ** 2 / self.variances).sum(-1)
        outside = np.maximum((centred ** 2).sum(-1) - (along ** 2).sum(-1), 0.0) / self.rest
        found = np.sqrt((inside + outside).min(-1))
        return found if np.ndim(features) > 1 else found[:1]


def fit(features: np.ndarray, labels: np.ndarray, held_out: np.ndarray, held_out_top: np.ndarray, *, module: str,
        fingerprint: str, dataset: str, rank: int = 64, shrink: float = 0.1, quantile: float = 0.995
        ) -> DomainStatistics:
    """Statistics of training `features` (N, d) with class `labels` (N,); the threshold is the `quantile` of the
    distances of `held_out` features (M, d) of the same kind of images (not used for the fit), `unsure_below`
    the UNSURE_QUANTILE of their top probabilities `held_out_top` (M,)."""
    x = np.asarray(features, np.float64)
    classes = np.unique(labels)
    means = np.stack([x[labels == c].mean(0) for c in classes])
    centred = x - means[np.searchsorted(classes, labels)]
    covariance = centred.T @ centred / (len(x) - len(classes))
    average = np.trace(covariance) / covariance.shape[0]
    values, vectors = np.linalg.eigh((1 - shrink) * covariance + shrink * average * np.eye(covariance.shape[0]))
    top = np.argsort(values)[::-1][:rank]
    rest = (float(values[np.setdiff1d(np.arange(len(values)), top)].mean()) if len(values) > rank
            else float(values.min()))
    stats = DomainStatistics(module, means, vectors[:, top].T.copy(), values[top].copy(), rest, 0.0, 0.0,
                             float(np.quantile(held_out_top, UNSURE_QUANTILE)), fingerprint, dataset)
    distances = stats.distance(held_out)
    return dataclasses.replace(stats, threshold=float(np.quantile(distances, quantile)),
                               typical=float(np.median(distances)))


def save(stats: DomainStatistics, path: Path) -> None:
    """Write `stats` as one safetensors file: means and directions as float16 (photos and shapes fall on the same
    side of the threshold as in float64; 0.1 MB), variances as float32, the rest in its metadata."""
    from safetensors.numpy import save_file

    facts = {k: v for k, v in stats.__dict__.items() if not isinstance(v, np.ndarray)}
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file({k: np.ascontiguousarray(v, np.float32 if k == "variances" else np.float16)
               for k, v in stats.__dict__.items() if isinstance(v, np.ndarray)},
              str(path), metadata={"facts": json.dumps(facts)})


@functools.lru_cache(maxsize=8)
def statistics(model: str) -> DomainStatistics | None:
    """The statistics shipped for registry model `model`, or None (a model without them, a hub id, a folder)."""
    from safetensors import safe_open

    path = DOMAIN_DIR / f"{model}{SUFFIX}"
    if "/" in model or not path.is_file():
        return None
    with safe_open(str(path), framework="numpy") as stored:
        facts = json.loads(stored.metadata()["facts"])
        arrays = {k: stored.get_tensor(k).astype(np.float64) for k in stored.keys()}
    return DomainStatistics(**arrays, **facts)


def weights_fingerprint(model: "torch.nn.Module", module: str) -> str:
    """A digest of the named submodule's parameters: statistics fitted on other weights do not apply."""
    digest = hashlib.sha256()
    for name, tensor in sorted(model.get_submodule(module).state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().to("cpu").float().numpy().tobytes())
    return digest.hexdigest()[:16]


def applicable(handle: Any) -> DomainStatistics | None:
    """`handle`'s statistics when they were fitted on its weights (None otherwise)."""
    stats = statistics(handle.name) if isinstance(handle.name, str) else None
    if stats is None:
        return None
    try:
        return stats if _fingerprint(handle.model, stats.module) == stats.fingerprint else None
    except AttributeError:  # no such submodule: another architecture under that name
        return None


_FINGERPRINTS: "weakref.WeakKeyDictionary[Any, dict[str, str]]" = weakref.WeakKeyDictionary()


def _fingerprint(model: "torch.nn.Module", module: str) -> str:
    """`weights_fingerprint`, once per loaded model (its weights do not change after loading)."""
    known = _FINGERPRINTS.setdefault(model, {})
    if module not in known:
        known[module] = weights_fingerprint(model, module)
    return known[module]


@contextlib.contextmanager
def record_features(model: "torch.nn.Module", module: str | None) -> Iterator[list["torch.Tensor"]]:
    """While open, the input of `model`'s submodule `module` in this thread's forward passes is appended to the
    yielded list (detached, float, flattened per sample); nothing is recorded when `module` is None."""
    found: list[torch.Tensor] = []
    if module is None:
        yield found
        return
    from rollout_core.models.thread_hooks import own_thread

    def keep(_: Any, args: tuple) -> None:
        found.append(args[0].detach().float().flatten(1).cpu())

    hook = model.get_submodule(module).register_forward_pre_hook(own_thread(keep))
    try:
        yield found
    finally:
        hook.remove()


def colourfulness(image: np.ndarray) -> float:
    """Mean over pixels of (max - min channel) / 255 of an (H, W, 3) uint8 RGB image (0 for greyscale)."""
    rgb = np.asarray(image, dtype=np.float64)
    if rgb.ndim != 3 or rgb.shape[-1] < 3:
        return 0.0
    rgb = rgb[..., :3]
    return float((rgb.max(axis=-1) - rgb.min(axis=-1)).mean() / 255.0)
