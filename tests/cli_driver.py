"""Run many `python -m rollout_core ...` command lines in one subprocess, each in its own forked process.

Starting an interpreter and importing torch + transformers takes 5-15 s on the shared test machine, so a
subprocess per case does not scale to a table of inputs. `run_cli_cases` starts ONE Python subprocess that
imports the package once, then forks a child per case; the child runs `rollout_core/__main__.py` exactly as
`python -m rollout_core` does (runpy, `sys.argv` set, stdout/stderr on their own files, an uncaught exception
printed as a traceback with exit status 1, as the interpreter would), and the parent collects each child's
exit status and output. Linux only (os.fork).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

ROOT = Path(__file__).resolve().parents[1]

_DRIVER = r'''
import io, json, os, runpy, sys, traceback
cases = json.load(open(sys.argv[1]))
warm = json.load(open(sys.argv[2]))
import rollout_core.cli, rollout_core.explain  # heavy imports once, in the parent
from rollout_core.models import loading
for folder in warm:  # import the model classes lazily pulled in by transformers; children load again
    loading.load_model(folder)
loading.clear_cache()
for case in cases:
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            out = os.open(case["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            err = os.open(case["err"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(out, 1)
            os.dup2(err, 2)
            sys.stdin = io.TextIOWrapper(open(case["stdin"] or os.devnull, "rb"), encoding="utf-8")
            sys.argv = ["rollout_core", *case["argv"]]
            try:
                runpy.run_module("rollout_core", run_name="__main__", alter_sys=True)
                code = 0
            except SystemExit as stop:
                if stop.code is None or isinstance(stop.code, int):
                    code = stop.code or 0
                else:
                    print(stop.code, file=sys.stderr)
            except BaseException:
                traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    case["status"] = os.waitstatus_to_exitcode(status)
json.dump(cases, open(sys.argv[1], "w"))
'''


@dataclass
class CliResult:
    status: int
    stdout: str
    stderr: str


def cli_env(**extra: str) -> dict[str, str]:
    """The environment for CLI subprocesses: offline, one thread, the repository importable."""
    return {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT), **extra}


def run_cli_cases(
    cases: Sequence[tuple[Sequence[str], str | bytes | None]], workdir: Path, *, warm: Sequence[Path] = (),
    env: dict[str, str] | None = None, timeout: float = 240, cwd: Path = ROOT,
) -> list[CliResult]:
    """Run each (argv, stdin text, bytes or None) as `python -m rollout_core *argv` in `cwd`; results in order.

    `warm`: model folders loaded once in the parent (then forgotten) so that children start fast.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    specs = []
    for i, (argv, stdin) in enumerate(cases):
        stdin_path = None
        if stdin is not None:
            stdin_path = workdir / f"case{i}.in"
            stdin_path.write_bytes(stdin if isinstance(stdin, bytes) else stdin.encode("utf-8"))
        specs.append({"argv": list(argv), "stdin": None if stdin_path is None else str(stdin_path),
                      "out": str(workdir / f"case{i}.out"), "err": str(workdir / f"case{i}.err")})
    cases_file, warm_file = workdir / "cases.json", workdir / "warm.json"
    cases_file.write_text(json.dumps(specs))
    warm_file.write_text(json.dumps([str(w) for w in warm]))
    proc = subprocess.run([sys.executable, "-c", _DRIVER, str(cases_file), str(warm_file)], capture_output=True,
                          text=True, env=env or cli_env(), cwd=cwd, timeout=timeout)
    assert proc.returncode == 0, f"the driver itself failed: {proc.stderr[-3000:]}"
    done = json.loads(cases_file.read_text())
    return [CliResult(c["status"], Path(c["out"]).read_text(encoding="utf-8"),
                      Path(c["err"]).read_text(encoding="utf-8")) for c in done]


def assert_one_error_line(result: CliResult, *fragments: str) -> str:
    """Exit status 2, nothing on stdout, exactly one `error: ...` line on stderr, no traceback."""
    lines = result.stderr.strip().splitlines()
    assert result.status == 2, (result.status, result.stderr[-2000:])
    assert "Traceback" not in result.stderr and result.stdout == "", result.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for fragment in fragments:
        assert fragment.lower() in lines[0].lower(), (fragment, lines[0])
    return lines[0]
