"""Shared pytest fixtures. Everything runs offline (HF_HUB_OFFLINE=1) on small, seeded inputs."""
from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ["ROLLOUT_SERVER"] = "off"  # a developer's running warm server never answers for the tests' commands

from pathlib import Path  # noqa: E402
from typing import Callable, Iterator  # noqa: E402

import pytest  # noqa: E402


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist's `--dist loadgroup` (scripts/test.sh runs 2 workers), a test file runs whole on one
    worker (its module fixtures are made once) and the browser tests all on one (one app server, one chromium)."""
    if not config.pluginmanager.hasplugin("xdist"):
        return
    browser = Path(__file__).parent / "browser"
    for item in items:
        group = "browser" if browser in item.path.parents else item.nodeid.split("::")[0]  # else its file
        item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture(scope="session", autouse=True)
def _quiet_transformers() -> None:
    """One thread per test process (shared CPUs) and no progress bars or advisory warnings."""
    import torch
    import transformers

    torch.set_num_threads(1)
    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """`tiny_model_dir(kind)`: folder of the tiny random-weight model `kind` (see tests/tiny_models.py),
    built once per test session."""
    from tiny_models import build_tiny

    built: dict[str, Path] = {}

    def get(kind: str) -> Path:
        if kind not in built:
            built[kind] = build_tiny(kind, tmp_path_factory.mktemp(f"tiny-{kind}"))
        return built[kind]

    return get


@pytest.fixture(scope="session")
def tiny_handle(tiny_model_dir: Callable[[str], Path]) -> Callable[[str], object]:
    """`tiny_handle(kind)`: the tiny model `kind` loaded through `rollout_core.load_model` (a ModelHandle)."""
    from rollout_core.models.loading import load_model

    handles: dict[str, object] = {}

    def get(kind: str) -> object:
        if kind not in handles:
            handles[kind] = load_model(tiny_model_dir(kind))
        return handles[kind]

    return get


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    """A local Ray with 2 CPUs for the module, its workers at normal priority (Ray's default nice 15 starves them
    next to the test process on 2 cores)."""
    import ray

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAY_worker_niceness", "0")
        ray.init(num_cpus=2, include_dashboard=False)
        try:
            yield
        finally:
            ray.shutdown()
