"""Faithfulness: how well an explanation's ordering of tokens/patches tracks what the model really uses.

- `perturbation`: deletion/insertion curves and the Chefer et al. (CVPR 2021) positive/negative
  perturbation protocol, as pure functions over a scoring callable and an importance vector.
- `scoring`: the model side of those callables (keep masks -> perturbed inputs -> class probabilities).
- `ground_truth`: pointing game, mass share and IoU against a known deciding region.
- `attribution`: attention-free references (gradient x input, integrated gradients) and Spearman.
- `evaluate`: one input or a whole data set -> curves and tables; `cli_evaluate`: the command.
"""
