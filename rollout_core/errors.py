"""User-facing errors.

Everything the user can fix (bad input, a model that cannot be loaded, an unsupported architecture, a
refused security setting) is raised as a `RolloutError` whose message is shown as is: on a page with
`st.error`, in the CLI as one `error: ...` line on stderr with exit status 2. Any other exception is a bug.
"""


class RolloutError(Exception):
    """Base class: a problem the user can act on; `str(err)` is the whole message."""


class InputError(RolloutError):
    """The text, image, target or option given is not usable."""


class ModelLoadError(RolloutError):
    """The model could not be found, downloaded or loaded."""


class UnsupportedModelError(RolloutError):
    """The model loads but rollout is not meaningful or not possible for it (e.g. Swin, no attention)."""


class SecurityError(RolloutError):
    """Refused for safety: pickle weights, remote code, a path outside the allowed roots, an image bomb."""


class RunsDiffer(InputError):
    """Two corpus runs to be compared do not hold the same rows (ids, texts or labels differ); says what differs."""
