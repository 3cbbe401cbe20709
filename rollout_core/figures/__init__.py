"""Drawing an `Explanation`: Plotly figures, escaped token-highlight HTML (and SVG), standalone HTML pages,
and download bytes.

No Streamlit here: the pages call these and show what they return. Conventions shared by every view:
`layer` is an index into `layer_scores` (0 = the first rolled-out layer; None = the final result),
`raw_attention=True` draws that layer's own attention instead; scores are the displayed shares
(special positions left out, renormalised); every colour scale starts at 0 and ends at `zmax`
(default: the view's largest value), so pages can pass one `zmax` to put several views on one scale.
"""
from rollout_core.figures._common import COLORMAPS, DIFFERENCE_SCALE, SCORE_SCALE, row_scores, slider_label, view_title
from rollout_core.figures.comparison import comparison_figure, difference_figure, shared_zmax
from rollout_core.figures.curves import curves_figure
from rollout_core.figures.export import figure_pdf, figure_png, figure_svg, raster_png, scores_csv, scores_json
from rollout_core.figures.highlight_svg import token_highlight_svg
from rollout_core.figures.image import image_overlay, patch_heatmap, patch_map
from rollout_core.figures.matrix import SPECIALS, head_grid, matrix_heatmap, matrix_note
from rollout_core.figures.text import legend_html, score_bar, token_highlight_html

__all__ = [
    "COLORMAPS", "DIFFERENCE_SCALE", "SCORE_SCALE", "SPECIALS",
    "comparison_figure", "curves_figure", "difference_figure", "figure_pdf", "figure_png", "figure_svg", "head_grid",
    "image_overlay", "legend_html", "matrix_heatmap", "matrix_note", "patch_heatmap", "patch_map", "raster_png",
    "row_scores", "score_bar", "scores_csv", "scores_json", "shared_zmax", "slider_label", "token_highlight_html",
    "token_highlight_svg", "view_title",
]
