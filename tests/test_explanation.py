"""The Explanation contract: display renormalisation, image maps, JSON output."""
import json

import numpy as np
import pytest

from explanations import make_explanation
from rollout_core.explanation import Prediction


def make(**overrides):
    fields = dict(
        tokens=["[CLS]", "good", "film", "[SEP]"], scores=[0.6, 0.3, 0.1, 0.0],
        layer_scores=np.array([[0.7, 0.2, 0.1, 0.0], [0.6, 0.3, 0.1, 0.0]]), layer_attention_scores=np.zeros((2, 4)),
        matrix=np.eye(4), layer_attention=np.zeros((2, 4, 4)), settings={"method": "rollout"},
        prediction=[Prediction("POSITIVE", 0.9, 1)], text="good film", offsets=[(0, 0), (0, 4), (5, 9), (0, 0)],
    )
    return make_explanation(**{**fields, **overrides})


def test_display_scores_drop_special_tokens_and_renormalise():
    e = make()
    assert e.display_tokens() == ["good", "film"]
    assert np.allclose(e.display_scores(), [0.75, 0.25])
    assert np.allclose(e.display_scores(e.layer_scores[0]), [2 / 3, 1 / 3])
    zeros = make(scores=np.array([1.0, 0.0, 0.0, 0.0]))
    assert np.array_equal(zeros.display_scores(), [0.0, 0.0])  # no division by zero


def test_score_map_rows_are_image_rows():
    scores = np.array([0.5, 0.0, 0.1, 0.0, 0.0, 0.0, 0.4])  # [CLS] then a 2x3 grid, hot patch at row 1, col 2
    e = make(kind="image", tokens=["[CLS]"] + ["p"] * 6, special=np.array([True] + [False] * 6), scores=scores,
             grid=(2, 3), patch_positions=np.arange(1, 7), text=None, offsets=None)
    grid = e.score_map()
    assert grid.shape == (2, 3)
    assert grid[1, 2] == pytest.approx(0.8) and grid[0, 1] == pytest.approx(0.2)
    with pytest.raises(ValueError):
        make().score_map()


def test_json_has_the_documented_fields_and_extras():
    e = make(extras={"decoder_tokens": ["a"], "decoder_position": np.int64(0), "decoder_to_source": np.ones((1, 4))})
    data = json.loads(e.to_json())
    assert {"tokens", "scores", "layer_scores", "prediction", "settings", "display_scores"} <= set(data)
    assert data["prediction"][0] == {"label": "POSITIVE", "probability": 0.9, "index": 1}
    assert data["extras"] == {"decoder_tokens": ["a"], "decoder_position": 0}
    full = json.loads(e.to_json(include_matrices=True))
    assert full["extras"]["decoder_to_source"] == [[1.0, 1.0, 1.0, 1.0]]
    assert full["matrix"][0] == [1.0, 0.0, 0.0, 0.0]
