"""The browser's colour and number functions (rollout_core/figures/layer_colours.js) run under node and give
exactly what the Python ones give (`colours_at`, `ink_for`, format(x, ".6g")) on every offered colour scale."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rollout_core.figures._common import COLORMAPS, DIFFERENCE_SCALE, SCORE_SCALE, colours_at, ink_for, scale_stops

JS = Path(__file__).resolve().parents[1] / "rollout_core" / "figures" / "layer_colours.js"
SCALES = sorted({*COLORMAPS, SCORE_SCALE, DIFFERENCE_SCALE})
HARNESS = """
const input = JSON.parse(require("fs").readFileSync(0, "utf8"));
const out = {colours: {}, inks: [], g6: input.numbers.map((x) => formatG(x, 6)),
             g3: input.numbers.map((x) => formatG(x, 3)), percent: input.numbers.map((x) => (100 * x).toFixed(2))};
for (const [name, stops] of Object.entries(input.scales)) {
  out.colours[name] = input.ranges.map(([zmin, zmax]) => input.values.map((v) => colourAt(stops, v, zmin, zmax)));
}
out.inks = input.rgbs.map(inkFor);
process.stdout.write(JSON.stringify(out));
"""


def run_js(payload: dict[str, Any]) -> dict[str, Any]:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    done = subprocess.run([node, "-e", JS.read_text(encoding="utf-8") + HARNESS], input=json.dumps(payload),
                          capture_output=True, text=True, timeout=120, check=True)
    return json.loads(done.stdout)


def numbers() -> list[float]:
    """Shares as the payload sends them (4 significant digits) over many magnitudes, and a few plain ones."""
    rng = np.random.default_rng(0)
    raw = np.concatenate([10.0 ** rng.uniform(-9, 1, 400), rng.random(200), [0.0, 1.0, 0.5, 1e-5, 123456.7]])
    return [float(f"{v:.4g}") for v in raw] + raw[:100].tolist()


def test_colour_ink_and_number_formats_match_python_on_every_scale() -> None:
    values = np.concatenate([np.linspace(-0.2, 1.2, 1401), np.random.default_rng(1).random(300)]).tolist()
    ranges = [(0.0, 1.0), (0.0, 0.0371), (-0.5, 0.5), (0.2, 0.2)]  # last: an empty range (everything at the bottom)
    rgbs = [list(rgb) for rgb in colours_at("viridis", np.linspace(0, 1, 257), 0, 1)]
    rgbs += [[r, g, b] for r in range(0, 256, 15) for g in range(0, 256, 15) for b in range(0, 256, 51)]
    nums = numbers()
    out = run_js({"scales": {s: scale_stops(s) for s in SCALES}, "values": values, "ranges": ranges,
                  "rgbs": rgbs, "numbers": nums})
    for scale in SCALES:
        for (zmin, zmax), got in zip(ranges, out["colours"][scale]):
            expected = [list(c) for c in colours_at(scale, np.array(values), zmin, zmax)]
            assert got == expected, f"{scale} on {zmin}..{zmax}"
    assert out["inks"] == [ink_for(tuple(rgb)) for rgb in rgbs]
    assert out["g6"] == [format(x, ".6g") for x in nums]
    assert out["g3"] == [format(x, ".3g") for x in nums]
    assert out["percent"] == [f"{100 * x:.2f}" for x in nums]


def test_hand_computed_colours_round_half_to_even() -> None:
    black_white = [[0.0, 0.0, 0.0, 0.0], [1.0, 255.0, 255.0, 255.0]]
    out = run_js({"scales": {"bw": black_white}, "values": [0.5, 0.25, 1.5, -1.0], "ranges": [(0.0, 1.0)],
                  "rgbs": [[0, 0, 0], [255, 255, 255]], "numbers": []})
    # 127.5 -> 128 (even), 63.75 -> 64; outside the range: clipped to the ends
    assert out["colours"]["bw"][0] == [[128] * 3, [64] * 3, [255] * 3, [0] * 3]
    assert out["inks"] == ["#ffffff", "#000000"]
