"""The warm CLI server (`python -m rollout_core serve`): a command handed to it prints the same bytes and exits with
the same status as the command run in its own process, the server really ran it (its count goes up), and whenever
it must not serve (other settings, a folder others can open, a stale socket) the command still runs, locally."""
from __future__ import annotations

import concurrent.futures
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from cli_driver import ROOT, cli_env, run_cli_cases
from rollout_core.warm import channel, client

pytestmark = pytest.mark.slow  # the whole module: see the fast tier in pyproject.toml


def _env(folder: Path, **extra: str) -> dict[str, str]:
    return cli_env(ROLLOUT_SERVER_DIR=str(folder), ROLLOUT_SERVER="on", **extra)


def _cli(argv: list[str], env: dict[str, str], *, stdin: bytes | None = None, cwd: Path = ROOT,
         timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rollout_core", *argv], input=stdin, capture_output=True, env=env,
                          cwd=cwd, timeout=timeout)


def _status(env: dict[str, str]) -> dict | None:
    old = dict(os.environ)
    os.environ.update(env)
    try:
        return client.control("status")
    finally:
        os.environ.clear()
        os.environ.update(old)


def _start(folder: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    """`serve` in the foreground, returned once it says it is serving."""
    proc = subprocess.Popen([sys.executable, "-m", "rollout_core", "serve", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env or _env(folder), cwd=ROOT)
    line = proc.stdout.readline()
    assert line.startswith("serving on "), (line, proc.stderr.read() if proc.poll() is not None else "")
    return proc


@pytest.fixture(scope="module")
def server(tmp_path_factory, tiny_model_dir):
    folder = tmp_path_factory.mktemp("warm") / "srv"
    folder.mkdir(mode=0o700)
    proc = _start(folder, "--idle-minutes", "10", "--preload", str(tiny_model_dir("bert")))
    yield folder
    stop = _cli(["serve", "--stop"], _env(folder))
    assert stop.returncode == 0 and b"server stopped" in stop.stdout, stop.stderr
    assert proc.wait(timeout=30) == 0
    assert not (folder / channel.SOCKET_NAME).exists()


def test_served_commands_print_and_exit_as_local_ones(server, tiny_model_dir, tmp_path):
    bert, vit = str(tiny_model_dir("bert")), str(tiny_model_dir("vit"))
    pictures = tmp_path / "pictures"
    pictures.mkdir()
    Image.fromarray(np.random.default_rng(0).integers(0, 255, (40, 30, 3), dtype=np.uint8)).save(pictures / "p.png")
    cases = [
        (["text", "the cat sat on the mat", "--model", bert], None),
        (["text", "--model", bert, "--json", "--method", "gradient", "--target", "POSITIVE", "-"], "from stdin"),
        (["text", "x", "--model", str(tmp_path / "no-such-model")], None),
        (["text", "x", "--method", "no-such-method"], None),
        (["text", "--model", bert], None),
        (["image", "p.png", "--model", vit, "--json"], None),
        (["models", "--json"], None),
    ]
    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # the local runs meanwhile, in a process of their own
        pending = pool.submit(run_cli_cases, [(argv, stdin) for argv, stdin in cases], tmp_path / "local",
                              warm=[Path(bert)], env=cli_env(ROLLOUT_SERVER="off"), cwd=pictures)
        before = _status(_env(server))["commands_served"]
        served = [_cli(argv, _env(server), stdin=stdin.encode() if isinstance(stdin, str) else stdin, cwd=pictures)
                  for argv, stdin in cases]  # p.png is the client's, not the server's
        local = pending.result()
    for (argv, _), answer, expected in zip(cases, served, local):
        assert (answer.returncode, answer.stdout.decode(), answer.stderr.decode()) \
            == (expected.status, expected.stdout, expected.stderr), argv
    # stdin's decoding is the client interpreter's own (the driver above forces strict UTF-8): compare with one
    bad = b"caf\xe9 bytes that are not UTF-8"
    alone = _cli(["text", "--model", bert, "-"], cli_env(ROLLOUT_SERVER="off"), stdin=bad)
    served = _cli(["text", "--model", bert, "-"], _env(server), stdin=bad)
    assert (served.returncode, served.stdout, served.stderr) == (alone.returncode, alone.stdout, alone.stderr)
    assert _status(_env(server))["commands_served"] == before + len(cases) + 1
    assert local[0].status == 0 and alone.returncode == 2 and b"Unicode" in alone.stderr  # the cases mean something
    assert local[2].status == local[3].status == local[4].status == 2 and local[5].status == 0


def test_other_settings_run_locally(server, tiny_model_dir):
    bert = str(tiny_model_dir("bert"))
    before = _status(_env(server))["commands_served"]
    other = _cli(["text", "a dog", "--model", bert, "--json"], _env(server, ROLLOUT_MODEL_CACHE_SIZE="2"))
    same = _cli(["text", "a dog", "--model", bert, "--json"], _env(server))
    assert other.returncode == same.returncode == 0, other.stderr
    assert json.loads(other.stdout)["scores"] == json.loads(same.stdout)["scores"]
    assert _status(_env(server))["commands_served"] == before + 1  # only the second went to the server
    told = _cli(["serve", "--status"], _env(server, ROLLOUT_MODEL_CACHE_SIZE="2"))
    assert told.returncode == 0 and b"would not take commands from here (other settings: ROLLOUT_MODEL_CACHE_SIZE)" \
        in told.stdout, told.stdout
    assert b"would not take" not in _cli(["serve", "--status"], _env(server)).stdout


def test_a_client_that_goes_away_stops_its_command(server, tiny_model_dir):
    long_text = " ".join(["the cat sat on the mat"] * 42)  # 254 tokens: the whole flow matrix takes minutes
    old = dict(os.environ)
    os.environ.update(_env(server))
    try:
        before = client.control("status")["commands_served"]
        hello = {"argv": ["text", long_text, "--model", str(tiny_model_dir("bert-long")), "--method", "flow",
                          "--full-matrix"], **client._stamps(), "streams": client._streams()}
        gone = client.connect()
        channel.send_json(gone, channel.HELLO, hello)
        assert channel.receive(gone)[0] == channel.ACCEPT
        time.sleep(2.0)  # the model is loaded and the flow is solving
        gone.close()  # as a client stopped with Ctrl-C
        closed = time.monotonic()
        reply = None
        while reply is None and time.monotonic() - closed < 120:
            reply = client.control("status")  # answered once the server is free
        assert reply is not None  # the server is free again: the command was stopped or ended
        assert reply["commands_served"] == before  # stopped, not finished
    finally:
        os.environ.clear()
        os.environ.update(old)


def test_second_server_is_refused_and_status_reports(server):
    again = _cli(["serve", "--idle-minutes", "1"], _env(server))
    assert again.returncode == 2 and again.stderr.decode().startswith("error: a server is already running")
    status = _cli(["serve", "--status"], _env(server))
    assert status.returncode == 0 and b"server running" in status.stdout and b"tiny-bert" in status.stdout


def test_idle_server_exits_and_a_stale_socket_is_replaced(tmp_path):
    folder = tmp_path / "srv"
    folder.mkdir(mode=0o700)
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(folder / channel.SOCKET_NAME))  # a socket file nobody listens on, as a killed server leaves
    stale.close()
    assert _status(_env(folder)) is None
    none = _cli(["serve", "--status"], _env(folder))
    assert none.returncode == 1 and none.stdout.decode().strip() == "no server is running"
    proc = _start(folder, "--idle-minutes", "0.02", "--preload")
    assert proc.wait(timeout=60) == 0  # 1.2 s without a command
    assert not (folder / channel.SOCKET_NAME).exists()


def test_sigterm_stops_the_server_and_removes_its_socket(tmp_path):
    folder = tmp_path / "srv"
    folder.mkdir(mode=0o700)
    proc = _start(folder, "--idle-minutes", "10", "--preload")
    assert (folder / channel.SOCKET_NAME).exists() and _status(_env(folder))["pid"] == proc.pid
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0 and "Traceback" not in proc.stderr.read()
    assert not (folder / channel.SOCKET_NAME).exists()


def test_sigterm_while_flows_kernels_still_load_is_a_clean_exit(tmp_path):
    # right after the ready line flow's kernels are still loading in their background thread (from numba's cache, or
    # compiling into an empty one); a process that exited under them was aborted by the C++ runtime (exit -6,
    # "terminate called without an active exception") in 9 of 12 such starts
    for attempt in range(4):
        folder = tmp_path / f"srv{attempt}"
        folder.mkdir(mode=0o700)
        cache = {"NUMBA_CACHE_DIR": str(tmp_path / f"numba{attempt}")} if attempt % 2 else {}
        proc = _start(folder, "--idle-minutes", "10", "--preload", env=_env(folder, **cache))
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=90) == 0, proc.stderr.read()
        assert "terminate called" not in proc.stderr.read() and not (folder / channel.SOCKET_NAME).exists()


def test_the_serve_command_ends_its_process_once_the_server_has_cleaned_up(monkeypatch, capsys):
    # not through the interpreter's shutdown, which would first wait for (or stop in the middle of) a kernel load
    from rollout_core import cli
    from rollout_core.warm import server

    calls: list[str] = []

    class Ended(BaseException):
        pass

    def end(status: int) -> None:
        calls.append(f"exit {status}")
        raise Ended

    monkeypatch.setattr(server, "serve", lambda *args: calls.append("served"))
    monkeypatch.setattr(cli.os, "_exit", end)
    with pytest.raises(Ended):
        cli.main(["serve", "--idle-minutes", "1"])
    assert calls == ["served", "exit 0"]


def test_a_folder_others_can_open_is_never_used(tmp_path):
    folder = tmp_path / "open"
    folder.mkdir()
    folder.chmod(0o755)
    assert "mode 755" in channel.private_problem(folder)
    link = tmp_path / "link"
    link.symlink_to(folder)
    assert "symbolic link" in channel.private_problem(link)
    folder.chmod(0o700)
    assert channel.private_problem(folder) is None and channel.private_problem(link) is not None
    folder.chmod(0o755)
    refused = _cli(["serve", "--idle-minutes", "1"], _env(folder))
    assert refused.returncode == 2 and b"can be opened by other users" in refused.stderr
    old = dict(os.environ)
    os.environ.update(_env(folder))
    try:
        assert client.connect() is None and client.run_remote(["models"]) is None
    finally:
        os.environ.clear()
        os.environ.update(old)


def test_stamps_follow_code_and_settings(tmp_path, monkeypatch):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "sub" / "a.py").write_text("x = 1\n")
    monkeypatch.setattr(channel, "PACKAGE_DIR", package)
    first = channel.code_stamp()
    assert channel.code_stamp() == first
    (package / "sub" / "a.py").write_text("x = 22\n")
    assert channel.code_stamp() != first
    (package / "__pycache__").mkdir()
    second = channel.code_stamp()
    (package / "__pycache__" / "a.pyc").write_bytes(b"compiled")
    assert channel.code_stamp() == second  # byte-code caches are not code changes
    monkeypatch.delenv("TRANSFORMERS_VERBOSITY", raising=False)
    assert channel.env_stamp()["TRANSFORMERS_VERBOSITY"] == "error"  # the CLI's own default, as a server has it
    monkeypatch.setenv("ROLLOUT_MAX_IMAGE_PIXELS", "1e6")
    assert channel.env_stamp()["ROLLOUT_MAX_IMAGE_PIXELS"] == "1e6"
    monkeypatch.setenv("UNRELATED_VARIABLE", "1")
    assert "UNRELATED_VARIABLE" not in channel.env_stamp()


# ------------------------------------------------------------------------------------------------
# Hostile and unlucky clients (issue 30): a frame the server cannot use is answered with an ERROR frame and the
# connection closed, and the server lives on; a busy server still answers --status and refuses a second server.

def _frame(kind: bytes, payload: bytes) -> bytes:
    return kind + len(payload).to_bytes(4, "big") + payload


def _malformed_frames() -> list[tuple[str, bytes]]:
    good = {"argv": ["models", "--json"], **client._stamps(), "streams": client._streams()}

    def hello(**changes: object) -> bytes:
        request = {**good, **changes}
        return _frame(channel.HELLO, json.dumps({k: v for k, v in request.items() if v is not _DROP}).encode())

    return [
        ("env as a list", hello(env=["HOME"])),
        ("env with a number", hello(env={**good["env"], "HOME": 5})),
        ("argv with a number", hello(argv=["text", 5])),
        ("argv a string", hello(argv="text hello")),
        ("argv empty", hello(argv=[])),
        ("argv with NUL", hello(argv=["text", "a\0b"])),
        ("no streams", hello(streams=_DROP)),
        ("streams a number", hello(streams=1)),
        ("a stream a number", hello(streams={**good["streams"], "stdin": 1})),
        ("a stream missing", hello(streams={"stdout": good["streams"]["stdout"]})),
        ("unknown encoding", hello(streams={**good["streams"], "stdout": {"encoding": "no-such", "errors": "strict"}})),
        ("unknown error handler", hello(streams={**good["streams"], "stderr": {"encoding": "utf-8", "errors": "x"}})),
        ("cwd a list", hello(cwd=["/"])),
        ("no cwd", hello(cwd=_DROP)),
        ("code a number", hello(code=7)),
        ("hello a list", _frame(channel.HELLO, b"[1, 2]")),
        ("hello null", _frame(channel.HELLO, b"")),
        ("JSON nested 200k deep", _frame(channel.HELLO, b"[" * 200_000 + b"]" * 200_000)),
        ("not JSON", _frame(channel.HELLO, b"{argv")),
        ("not UTF-8", _frame(channel.HELLO, b'{"argv": ["\xff"]}')),
        ("control a list", _frame(channel.CONTROL, b"[]")),
        ("control odd op", _frame(channel.CONTROL, b'{"op": "explode"}')),
        ("control with env a list", _frame(channel.CONTROL, b'{"op": "status", "env": [1]}')),
        ("stdin first", _frame(channel.STDIN, b"data")),
        ("unknown kind", _frame(b"z", b"{}")),
        ("a 4 GB frame announced", channel.HELLO + b"\xff\xff\xff\xff"),
        ("a frame cut short", channel.HELLO + (100).to_bytes(4, "big") + b"{}"),
        ("half a header", b"h\x00"),
    ]


_DROP = object()


def test_malformed_frames_get_an_error_and_the_server_lives(server, tiny_model_dir):
    old = dict(os.environ)
    os.environ.update(_env(server))
    try:
        before = client.control("status")["commands_served"]
        for name, frame in _malformed_frames():
            sock = client.connect()
            assert sock is not None, f"the server died before {name!r}"
            with sock:
                sock.settimeout(20)
                sock.sendall(frame)  # the short ones stop sending here: the server must not wait for the rest long
                kind, payload = channel.receive(sock)
                assert kind == channel.ERROR and json.loads(payload)["error"], (name, kind, payload[:200])
                assert sock.recv(1) == b"", name  # and the connection is closed
            reply = client.control("status")
            assert reply is not None, f"{name!r} killed the server"
        assert client.control("status")["commands_served"] == before  # none of them ran anything
        ran = _cli(["text", "a cat", "--model", str(tiny_model_dir("bert"))], _env(server))
        assert ran.returncode == 0 and client.control("status")["commands_served"] == before + 1, ran.stderr
    finally:
        os.environ.clear()
        os.environ.update(old)


def test_a_silent_connection_holds_nobody_up(server):
    old = dict(os.environ)
    os.environ.update(_env(server))
    try:
        silent = client.connect()
        reply = client.control("status")  # answered while the silent one is open (it used to hold the server 30 s)
        assert reply is not None
        silent.settimeout(30)
        kind, payload = channel.receive(silent)
        assert kind == channel.ERROR and "in time" in json.loads(payload)["error"]  # refused, not held open
        silent.close()
    finally:
        os.environ.clear()
        os.environ.update(old)


def _busy(folder: Path, model: Path) -> socket.socket:
    """A connection whose command (a 254-token full flow matrix: minutes) is running on the server."""
    hello = {"argv": ["text", " ".join(["the cat sat on the mat"] * 42), "--model", str(model), "--method", "flow",
                      "--full-matrix"], **client._stamps(), "streams": client._streams()}
    busy = client.connect()
    channel.send_json(busy, channel.HELLO, hello)
    assert channel.receive(busy)[0] == channel.ACCEPT
    return busy


def test_a_busy_server_answers_status_and_refuses_a_second_server(server, tiny_model_dir):
    env = _env(server)
    old = dict(os.environ)
    os.environ.update(env)
    try:
        busy = _busy(server, tiny_model_dir("bert-long"))
        try:
            time.sleep(1.0)
            status = _cli(["serve", "--status"], env)
            assert status.returncode == 0 and b"server running" in status.stdout, status.stdout
            assert b"running a text command for" in status.stdout, status.stdout
            again = _cli(["serve", "--idle-minutes", "1", "--preload"], env)
            assert again.returncode == 2 and again.stderr.decode().startswith("error: a server is already running")
            detached = _cli(["serve", "--detach", "--idle-minutes", "1", "--preload"], env)
            assert detached.returncode == 2 and b"already running" in detached.stderr, detached.stderr
            assert (server / channel.SOCKET_NAME).exists()  # the running server's socket is still there
            assert client.control("status")["running"]["command"] == "text"
        finally:
            busy.close()  # the command stops at its next checkpoint
        deadline = time.monotonic() + 60
        while (client.control("status") or {}).get("running") and time.monotonic() < deadline:
            time.sleep(0.2)
        assert client.control("status")["running"] is None
        assert b"; idle;" in _cli(["serve", "--status"], env).stdout
    finally:
        os.environ.clear()
        os.environ.update(old)


def test_two_servers_started_together_one_serves(tmp_path):
    folder = tmp_path / "srv"
    folder.mkdir(mode=0o700)
    argv = [sys.executable, "-m", "rollout_core", "serve", "--idle-minutes", "10", "--preload"]
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(folder),
                              cwd=ROOT) for _ in range(2)]
    try:
        deadline = time.monotonic() + 120
        while not any(p.poll() is not None for p in procs) and time.monotonic() < deadline:
            time.sleep(0.1)
        refused = [p for p in procs if p.poll() is not None]
        assert len(refused) == 1, "both servers kept running"
        assert refused[0].returncode == 2 and "already running" in refused[0].stderr.read()
        serving = next(p for p in procs if p is not refused[0])
        assert serving.stdout.readline().startswith("serving on ")
        assert _status(_env(folder))["pid"] == serving.pid
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
                p.wait(timeout=30)
    assert not (folder / channel.SOCKET_NAME).exists()


def test_a_server_that_dies_before_printing_leaves_the_command_to_the_client(tmp_path, tiny_model_dir):
    """The server is killed (SIGKILL) after it asked for the command's stdin and before it printed anything: the
    client runs the command itself, with the same stdin, and prints what a local run prints."""
    folder = tmp_path / "srv"
    folder.mkdir(mode=0o700)
    bert = str(tiny_model_dir("bert"))
    argv = ["text", "--model", bert, "-"]
    (tmp_path / "stdin").write_bytes(b"a dog in the park")
    with open(tmp_path / "stdin", "rb") as stdin:  # the reference, run meanwhile in its own process
        local = subprocess.Popen([sys.executable, "-m", "rollout_core", *argv], stdin=stdin, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, env=cli_env(ROLLOUT_SERVER="off"), cwd=ROOT)
    proc = _start(folder, "--idle-minutes", "10", "--preload")
    user = subprocess.Popen([sys.executable, "-m", "rollout_core", *argv], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(folder), cwd=ROOT)
    try:
        deadline = time.monotonic() + 60
        while not ((_status(_env(folder)) or {}).get("running") or {}).get("command") and time.monotonic() < deadline:
            time.sleep(0.1)  # the server took the command and waits for its stdin, which the client waits for
        assert ((_status(_env(folder)) or {}).get("running") or {}).get("command") == "text"
        proc.kill()
        proc.wait(timeout=30)
        out, err = user.communicate(b"a dog in the park", timeout=180)
        local_out, local_err = local.communicate(timeout=180)
    finally:
        for p in (proc, user, local):
            if p.poll() is None:
                p.kill()
    assert local.returncode == 0 and b"dog" in local_out
    assert (user.returncode, out, err) == (local.returncode, local_out, local_err)
