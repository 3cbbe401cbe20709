"""How the embedded default models were trained: run from a checkout, e.g. `python -m training.train_text`.

Not part of the wheel (pyproject packages only `rollout_core` and the dashboard): users get the committed
results under `rollout_core/assets/`, which `rollout setup` (rollout_core.build) assembles into model folders.
"""
