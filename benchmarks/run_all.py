"""Run every benchmark under benchmarks/ and write benchmarks/RESULTS.md.

Each `bench_*.py` runs in its own process, one after the other (the machine is small and shared),
with `--quick` passed on to scripts that accept it. RESULTS.md gets the machine (CPU model, cores,
RAM), the torch and transformers versions, the command, and each script's output as printed. Sections of the
previous RESULTS.md that this run does not produce (measured by hand, e.g. load_server.py) are kept after them.

Run: python benchmarks/run_all.py [--quick] [--timeout 1800]
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "RESULTS.md"


def _machine() -> list[str]:
    import torch
    import transformers

    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        model = next((line.split(":", 1)[1].strip() for line in lscpu.splitlines() if line.startswith("Model name")),
                     "?")
    except (OSError, subprocess.CalledProcessError):
        model = platform.processor() or "?"
    meminfo = Path("/proc/meminfo")
    ram = "?"
    if meminfo.exists():
        kib = int(next(line for line in meminfo.read_text().splitlines() if line.startswith("MemTotal")).split()[1])
        ram = f"{kib / 2**20:.1f} GiB"
    return [
        f"- CPU: {model}, {os.cpu_count()} logical cores available (shared with other jobs while measuring)",
        f"- RAM: {ram}",
        f"- Python {platform.python_version()}, torch {torch.__version__}, transformers {transformers.__version__}, "
        f"{platform.system()} {platform.release()}",
    ]


def _accepts_quick(script: Path) -> bool:
    return "--quick" in script.read_text()


def kept_sections(previous: str, produced: set[str]) -> list[str]:
    """The `## ` sections of `previous` whose heading is neither the machine nor one of `produced`, in order."""
    sections: list[list[str]] = []
    fenced = False
    for line in previous.splitlines():
        fenced ^= line.startswith("```")
        if line.startswith("## ") and not fenced:
            sections.append([line])
        elif sections:
            sections[-1].append(line)
    skip = {"## Machine", *produced}
    return ["\n".join(lines).rstrip() + "\n" for lines in sections if lines[0].strip() not in skip]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="pass --quick to every script that has it")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds allowed per script")
    args = parser.parse_args()

    command = "python benchmarks/run_all.py" + (" --quick" if args.quick else "")
    started = dt.datetime.now(dt.timezone.utc)
    sections = []
    # the repository root on the path, so that every script imports rollout_core without installing it
    path = os.pathsep.join(p for p in (str(HERE.parent), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"), "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": path}
    for script in sorted(HERE.glob("bench_*.py")):
        cmd = [sys.executable, str(script)] + (["--quick"] if args.quick and _accepts_quick(script) else [])
        shown = " ".join(["python", f"benchmarks/{script.name}", *cmd[2:]])
        print(f"== {shown}", flush=True)
        start = time.perf_counter()
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env, cwd=HERE.parent)
            output, status = proc.stdout.rstrip(), f"exit {proc.returncode}"
            if proc.returncode != 0:
                output += "\n" + "\n".join(proc.stderr.rstrip().splitlines()[-15:])
        except subprocess.TimeoutExpired as err:
            output = err.stdout.decode() if isinstance(err.stdout, bytes) else (err.stdout or "")
            status = f"timed out after {args.timeout:.0f} s"
        seconds = time.perf_counter() - start
        print(output, flush=True)
        sections.append(f"## {script.name}\n\n`{shown}` ({status}, {seconds:.0f} s)\n\n```\n{output}\n```\n")

    previous = RESULTS.read_text() if RESULTS.exists() else ""
    produced = {f"## {script.name}" for script in HERE.glob("bench_*.py")}
    lines = [
        "# Benchmark results",
        "",
        f"Produced by `{command}` on {started:%Y-%m-%d %H:%M} UTC. Every figure below is measured in that one run;",
        "ratios compare configurations measured side by side in the same script.",
        "",
        "## Machine",
        "",
        *_machine(),
        "",
        *sections,
        *kept_sections(previous, produced),
    ]
    RESULTS.write_text("\n".join(lines))
    print(f"wrote {RESULTS.relative_to(HERE.parent)}")


if __name__ == "__main__":
    main()
