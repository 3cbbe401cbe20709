"""Text page views: texts the model cannot read (unknown-token share and warning), and the head panel in the URL."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from rollout_core.inputs.unknown import UnknownShare, confidence_note, unknown_share
from page_views import explorers
from test_pages_apptest import assert_clean, page, texts

EMOJI = "😍😍 🔥 👍 🎉"


def _tokenizer(tiny_model_dir: Callable[[str], Path]):  # noqa: ANN202 - a transformers tokenizer
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir("bert"))


def test_emoji_only_text_is_all_unknown_and_words_are_not(tiny_model_dir: Callable[[str], Path]) -> None:
    tok = _tokenizer(tiny_model_dir)
    emoji = unknown_share(tok, EMOJI, 64)
    assert (emoji.unknown, emoji.total) == (4, 4) and emoji.token == tok.unk_token  # four space-separated pieces
    assert emoji.spans == ("😍😍", "🔥", "👍", "🎉")
    mixed = unknown_share(tok, "good 🔥", 64)
    known = [t for t in tok.tokenize("good") if t != tok.unk_token]
    assert mixed.unknown == 1 and mixed.total == len(known) + 1


def test_the_note_names_the_confidence_and_the_share() -> None:
    note = confidence_note(UnknownShare(4, 5, "[UNK]"), "POSITIVE", 0.996)
    assert note.startswith("The model is 99.6% sure of POSITIVE, but 80% of the text's tokens (4 of 5) are unknown")
    every = confidence_note(UnknownShare(3, 3, "[UNK]"), "NEGATIVE", 0.5)
    assert "none of the text's 3 tokens is in the model's vocabulary" in every
    assert confidence_note(UnknownShare(2, 5, "[UNK]"), "POSITIVE", 0.99) is None  # 40%: mostly readable
    assert confidence_note(UnknownShare(0, 0, "[UNK]"), "POSITIVE", 0.99) is None


def test_text_page_warns_above_the_prediction_on_emoji_text(tiny_model_dir: Callable[[str], Path]) -> None:
    at = page("app_pages/text.py", model=str(tiny_model_dir("bert")), text=EMOJI)
    assert_clean(at)
    (warning,) = [w for w in texts(at.warning) if "unknown" in w or "vocabulary" in w]
    top = at.get("metric")[0]
    assert f"{top.value}" in warning and "do not trust its confidence" in warning
    plain = page("app_pages/text.py", model=str(tiny_model_dir("bert")), text="a good film")
    assert_clean(plain)
    assert not [w for w in texts(plain.warning) if "vocabulary" in w]


def test_the_head_panel_and_the_enlarged_head_come_back_from_the_link(tiny_model_dir: Callable[[str], Path]) -> None:
    from page_views import chart_count

    at = page("app_pages/text.py", model=str(tiny_model_dir("bert")), text="a good film")
    assert chart_count(at) == 2  # bars and matrix: the head panel starts closed
    at.session_state["heads_open"] = True
    at.run()
    at.get("button_group")[0].set_value(1).run()  # enlarge the second head
    assert_clean(at)
    assert chart_count(at) == 4
    assert at.query_params.get("heads_open") == "1" and at.query_params.get("head") == "2"
    shared = page("app_pages/text.py", **{k: v for k, v in at.query_params.items()})
    assert_clean(shared)
    assert chart_count(shared) == 4 and shared.get("button_group")[0].value == 1


def test_gradient_rollout_shows_its_relevance_row_with_a_reason_instead_of_a_diagonal_matrix(
        tiny_model_dir: Callable[[str], Path]) -> None:
    at = page("app_pages/text.py", model=str(tiny_model_dir("bert")), text="a good film", method="gradient")
    assert_clean(at)
    assert any("R = I + Σ Ā·R" in i and "explained row" in i for i in texts(at.info))
    assert [s.value for s in at.subheader][-1] == "Final relevance row"
    (chart,) = [c for c in at.get("plotly_chart") if c.proto.id and "matrix" in c.proto.id]
    assert [t["type"] for t in json.loads(chart.proto.spec)["data"]] == ["bar"]
    rollout = page("app_pages/text.py", model=str(tiny_model_dir("bert")), text="a good film")
    assert_clean(rollout)  # the class-agnostic default keeps its matrix
    (chart,) = [c for c in rollout.get("plotly_chart") if c.proto.id and "matrix" in c.proto.id]
    assert {t["type"] for t in json.loads(chart.proto.spec)["data"]} == {"heatmap"}


def test_the_raw_toggle_of_a_contribution_method_names_its_contributions(tiny_model_dir: Callable[[str], Path]) -> None:
    from page_views import explorers

    at = page("app_pages/text.py", model=str(tiny_model_dir("bert")), text="a good film", method="alti")
    assert_clean(at)
    (data,) = explorers(at)
    assert "ALTI contributions" in data["raw_label"] and "attention" not in data["raw_label"]
    rollout = page("app_pages/text.py", model=str(tiny_model_dir("bert")), text="a good film", method="rollout")
    assert explorers(rollout)[0]["raw_label"] == "Show this layer's own attention instead"


def test_a_chosen_layer_survives_a_new_input_but_a_new_method_shows_the_final_map(
        tiny_model_dir: Callable[[str], Path]) -> None:
    at = page("app_pages/text.py", model=str(tiny_model_dir("roberta")), text="a good film", layer="1",
              layer_raw="1")
    assert_clean(at)
    data = explorers(at)[0]
    assert (data["layer"], data["raw"]) == (1, True)  # a shared link that names a layer keeps it
    at.text_area(key="text").set_value("a bad film").run()
    assert (explorers(at)[0]["layer"], explorers(at)[0]["raw"]) == (1, True)  # the user's choice, on a new input
    before = explorers(at)[0]["identity"]
    at.selectbox(key="method").set_value("attention").run()
    assert_clean(at)
    data = explorers(at)[0]
    assert data["identity"] != before  # the browser takes the server's position instead of keeping its own
    assert (data["layer"], data["raw"]) == (data["layers"], False) == (3, False)
    at.run()
    assert "layer" not in at.query_params and "layer_raw" not in at.query_params


def test_zero_shot_labels_show_the_cosine_similarity_not_a_probability(tiny_model_dir: Callable[[str], Path]) -> None:
    at = page("app_pages/text.py", model=str(tiny_model_dir("sentence")), text="the cat sat",
              labels="animal, weather")
    assert_clean(at)
    metric = at.get("metric")[0]
    assert metric.proto.delta.startswith("cosine ") and "%" not in metric.proto.delta
    frame = at.dataframe[0].value
    assert list(frame.columns) == ["label", "cosine similarity", "share among these labels"]
    assert frame["cosine similarity"].between(-1, 1).all()


def test_the_highlight_is_per_word_unless_the_link_asks_for_tokens(tiny_model_dir: Callable[[str], Path]) -> None:
    words = page("app_pages/text.py", model=str(tiny_model_dir("bert")), text="unbelievably crushes")
    assert_clean(words)
    units = [u for u, *_ in explorers(words)[0]["payload"]["panels"][0]["pieces"] if u >= 0]
    assert len(units) == 2  # two words, whatever the tokenizer cut them into
    tokens = page("app_pages/text.py", model=str(tiny_model_dir("bert")), text="unbelievably crushes", tokens="1")
    assert_clean(tokens)
    units = [u for u, *_ in explorers(tokens)[0]["payload"]["panels"][0]["pieces"] if u >= 0]
    assert len(units) > 2 and tokens.checkbox(key="tokens").value
