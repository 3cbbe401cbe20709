"""The evaluation's inputs: the model handle, the checked method and reference lists and the examples of a data set
(the generated "text" / "image" sets, a CSV file of texts, a folder of images per class)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator, Sequence

import pandas as pd

from rollout_core.errors import InputError
from rollout_core.faithfulness.measures import AGREEMENT, DEFAULT_REFERENCES, METHODS, REFERENCES, Item
from rollout_core.inputs.continuous import require_classifier
from rollout_core.models.handle import ModelHandle

GENERATED_SIZE = 100
"""Examples drawn from a generated data set when no limit is given."""
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff")


def load_handle(model: Any, modality: str = "text", check: bool = False) -> ModelHandle:
    """The model (None: the default model of `modality`); `check`: it must be of that modality."""
    from rollout_core.models.loading import load_model
    from rollout_core.models.registry import DEFAULTS

    if isinstance(model, ModelHandle):
        handle = model
    elif model is None:
        handle = load_model(DEFAULTS[modality])
    else:
        handle = load_model(model)
    require_classifier(handle)
    if check and handle.modality != modality:
        kind = "an image" if handle.modality == "image" else "a text"
        raise InputError(f"the {modality} data set needs a {modality} model; {handle.name} is {kind} model")
    return handle


def check_methods(methods: Sequence[str] | None, modality: str, handle: ModelHandle | None = None) -> list[str]:
    """The asked methods, known, for `modality` and without repeats (one name may be given as a string);
    None: every registered method that explains that modality. With `handle`: the methods that can run on it
    (`methods.runnable`; a named one that cannot is refused with its reason)."""
    from rollout_core import methods as registry

    if methods is None:
        if handle is not None:
            return [s.name for s in registry.runnable(handle) if s.name in METHODS]
        return [m for m in METHODS if modality in registry.get(m).modalities]
    if isinstance(methods, str):
        methods = [methods]
    allowed = (*METHODS, *REFERENCES)
    unknown = [m for m in methods if m not in allowed]
    if unknown or not methods:
        raise InputError(f"unknown method(s) {', '.join(map(repr, unknown)) or '(none given)'}; "
                         f"choose from: {', '.join(allowed)}")
    other = [m for m in methods if m in METHODS and modality not in registry.get(m).modalities]
    if other:
        which = "it" if len(other) == 1 else "them"
        raise InputError(f"{', '.join(other)} cannot explain {modality} inputs; leave {which} out (without a method "
                         f"list every method for {modality} is measured)")
    for m in methods:
        if handle is not None and m in METHODS:
            refusal = registry.get(m).refusal(handle)
            if refusal is not None:
                raise type(refusal)(f"{refusal}; leave it out (without a method list every method that can run "
                                    "on the model is measured)")
    return list(dict.fromkeys(methods))


def check_references(references: Sequence[str] | None, modality: str,
                     default: tuple[str, ...] | None = None) -> tuple[str, ...]:
    """The asked agreement references ("gxi", "ig"; one may be given as a string), known and without repeats;
    None: `default`, or without one the modality's data-set default (`DEFAULT_REFERENCES`)."""
    if references is None:
        return DEFAULT_REFERENCES[modality] if default is None else default
    if isinstance(references, str):
        references = [references]
    unknown = [r for r in references if r not in AGREEMENT]
    if unknown:
        raise InputError(f"unknown reference(s) {', '.join(map(repr, unknown))}; choose from: {', '.join(AGREEMENT)}")
    return tuple(dict.fromkeys(references))


def parse_label(value: Any, labels: list[str], where: str) -> str:
    """The model's label named by `value` (a name in any case, or an index); `where` says where it came from."""
    text = str(value).strip()
    for name in labels:
        if text.lower() == name.lower():
            return name
    if text.lstrip("-").isdigit() and 0 <= int(text) < len(labels):
        return labels[int(text)]
    raise InputError(f"{where}: label {value!r} is not one of the model's labels ({', '.join(labels)}) or an index")


def dataset_items(handle: ModelHandle, dataset: Any, limit: int | None, data_seed: int = 0) -> list[Item]:
    """The examples of `dataset` (at most `limit`), labels checked against the model's. `data_seed`: which draw of
    a generated set (0: the recorded tables'; every seed's test split is unseen in training)."""
    labels = handle.labels or []
    if data_seed and dataset not in ("text", "image"):
        raise InputError("a data seed picks a draw of the generated sets ('text', 'image'); "
                         f"{dataset!s} is a fixed data set")
    if dataset == "text":
        from rollout_core.data import sentiment

        found = sentiment.generate(limit or GENERATED_SIZE, seed=data_seed, split="test")
        items = [Item(e.text, parse_label(e.label, labels, "generated text"), evidence=list(e.evidence)) for e in found]
    elif dataset == "image":
        from rollout_core.data import shapes

        found = shapes.generate(limit or GENERATED_SIZE, seed=data_seed, split="test")
        items = [Item(e.image, parse_label(e.label, labels, "generated shapes"), mask=e.mask) for e in found]
    else:
        items = list(_user_items(handle, Path(dataset), labels))
        items = items[:limit] if limit else items
    if not items:
        raise InputError(f"the data set {dataset!s} holds no examples")
    return items


def _user_items(handle: ModelHandle, path: Path, labels: list[str]) -> Iterator[Item]:
    if path.is_file() and path.suffix.lower() == ".csv":
        if handle.modality != "text":
            raise InputError(f"a CSV data set holds texts; {handle.name} is an image model")
        try:
            frame = pd.read_csv(path, dtype=str, keep_default_na=False)
        except (ValueError, OSError, UnicodeDecodeError) as err:
            raise InputError(f"could not read {path}: {err}") from err
        missing = {"text", "label"} - set(frame.columns)
        if missing:
            raise InputError(f"{path} needs the columns 'text' and 'label' (missing: {', '.join(sorted(missing))})")
        for line, (text, value) in enumerate(zip(frame["text"], frame["label"]), start=2):
            yield Item(text, parse_label(value, labels, f"{path.name} line {line}"))
    elif path.is_dir():
        if handle.modality != "image":
            raise InputError(f"an image folder needs an image model; {handle.name} is a text model")
        classes = sorted(p for p in path.iterdir() if p.is_dir())
        if not classes:
            raise InputError(f"{path} needs one sub-folder of images per class (named like the model's labels)")
        files = [[f for f in sorted(c.iterdir()) if f.suffix.lower() in IMAGE_SUFFIXES] for c in classes]
        names = [parse_label(c.name, labels, f"folder {c.name}") for c in classes]
        for rank in range(max(map(len, files))):  # round-robin over classes, so a limit keeps them balanced
            for name, group in zip(names, files):
                if rank < len(group):
                    yield Item(group[rank], name)
    else:
        raise InputError(f"dataset must be 'text', 'image', a .csv file or an image folder; {path} is none of these")
