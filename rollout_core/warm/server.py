"""The warm server: one process that has imported torch and transformers and keeps models loaded, running the
CLI's `text`, `image` and `models` commands for clients of the same user, one at a time.

Each command runs through the command line's entry point, handed in by the CLI's `serve` (`rollout_core.cli.main`;
the server never imports the CLI), exactly as in a fresh process, in the client's folder, with stdout, stderr and
stdin carried over the socket; a command that reads stdin asks the client for it. The server
exits after `idle_seconds` without a command (0: never), on `--stop`, or on SIGTERM / Ctrl-C.
"""
from __future__ import annotations

import io
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from rollout_core.errors import RolloutError
from rollout_core.warm import channel, client

HELLO_WAIT = 30.0
"""Seconds a connected client has to say what it wants before the server moves on."""


class _FrameWriter(io.TextIOBase):
    """A text stream whose writes go to the client as frames of `kind`, encoded as the client's own stream."""

    def __init__(self, sock: socket.socket, kind: bytes, encoding: str, errors: str) -> None:
        self._sock, self._kind, self._encoding, self._errors = sock, kind, encoding, errors

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self._encoding

    @property
    def errors(self) -> str:  # type: ignore[override]
        return self._errors

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if text:
            channel.send(self._sock, self._kind, text.encode(self._encoding, self._errors))
        return len(text)


class _ClientStdin(io.TextIOBase):
    """The client's stdin, fetched whole on the first read (a command that never reads it never asks)."""

    def __init__(self, sock: socket.socket, encoding: str, errors: str) -> None:
        self._sock, self._encoding, self._errors = sock, encoding, errors
        self._text: io.TextIOWrapper | None = None

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self._encoding

    def readable(self) -> bool:
        return True

    def _stream(self) -> io.TextIOWrapper:
        if self._text is None:
            channel.send(self._sock, channel.STDIN)
            kind, data = channel.receive(self._sock)
            if kind != channel.STDIN:
                raise channel.ChannelError(f"expected stdin, got frame {kind!r}")
            self._text = io.TextIOWrapper(io.BytesIO(data), encoding=self._encoding, errors=self._errors)
        return self._text

    def read(self, size: int | None = -1) -> str:
        return self._stream().read(size)

    def readline(self, size: int | None = -1) -> str:  # type: ignore[override]
        return self._stream().readline(size)


class _Terminated(BaseException):
    """SIGTERM: ends the server even in the middle of a command (a command's own SystemExit does not)."""


def _terminate(*_: Any) -> None:
    raise _Terminated


def _peer_uid(conn: socket.socket) -> int | None:
    """The connecting process's uid (Linux SO_PEERCRED); None where the platform does not say."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None
    _, uid, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i")))
    return uid


def _gone(conn: socket.socket) -> bool:
    """Whether the client has closed its end (the stream's end is next; a frame it sent would be data)."""
    try:
        return conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def _exit_status(stop: SystemExit) -> int:
    if stop.code is None or isinstance(stop.code, int):
        return stop.code or 0
    print(stop.code, file=sys.stderr)
    return 1


Command = Callable[[list[str]], "int | None"]
"""The command line's entry point: argv (without the program name) -> exit status."""


class _Server:
    def __init__(self, command: Command, listener: socket.socket, path: Path, idle_seconds: float,
                 env: dict[str, str]) -> None:
        self.command, self.listener, self.path, self.idle_seconds = command, listener, path, idle_seconds
        self.code, self.env = channel.code_stamp(), env
        self.started, self.served, self.stopping = time.time(), 0, False

    def loop(self) -> None:
        self.listener.settimeout(self.idle_seconds or None)
        while not self.stopping:
            try:
                conn, _ = self.listener.accept()
            except socket.timeout:
                return
            with conn:
                try:
                    self._handle(conn)
                except (OSError, channel.ChannelError) as err:  # the client went away: serve the next one
                    _log(f"client lost: {err}")

    def _handle(self, conn: socket.socket) -> None:
        uid = _peer_uid(conn)
        if uid is not None and uid != os.getuid():
            return
        conn.settimeout(HELLO_WAIT)
        kind, hello = channel.receive_json(conn)
        if kind == channel.CONTROL:
            self._control(conn, hello)
            return
        if kind != channel.HELLO or not isinstance(hello, dict):
            return
        reason = self._refusal(hello)
        if reason is not None:
            channel.send_json(conn, channel.DECLINE, {"reason": reason})
            _log(f"declined {hello.get('argv', ['?'])[:1]}: {reason}")
            return
        channel.send(conn, channel.ACCEPT)
        conn.settimeout(None)
        start = time.perf_counter()
        status = self._run(conn, hello)
        self.served += 1
        channel.send_json(conn, channel.EXIT, {"status": status})
        _log(f"{hello['argv'][0]}: exit {status} in {time.perf_counter() - start:.2f} s")

    def _refusal(self, hello: dict[str, Any]) -> str | None:
        argv = hello.get("argv")
        if not isinstance(argv, list) or not argv or argv[0] not in channel.SERVED_COMMANDS:
            return "not a command this server runs"
        if hello.get("code") != self.code:
            return "the client runs other code (the package, Python or installed packages changed)"
        if hello.get("env") != self.env:
            changed = sorted(set(self.env.items()) ^ set((hello.get("env") or {}).items()))
            return "other settings: " + ", ".join(sorted({name for name, _ in changed}))
        if not os.path.isdir(str(hello.get("cwd"))):
            return "the client's folder is not there for the server"
        return None

    def _run(self, conn: socket.socket, hello: dict[str, Any]) -> int:
        from rollout_core.cancel import cancellable

        streams = hello["streams"]
        saved = sys.stdin, sys.stdout, sys.stderr, os.getcwd()
        try:
            os.chdir(hello["cwd"])
            sys.stdin = _ClientStdin(conn, **streams["stdin"])
            sys.stdout = _FrameWriter(conn, channel.STDOUT, **streams["stdout"])
            sys.stderr = _FrameWriter(conn, channel.STDERR, **streams["stderr"])
            try:
                with cancellable(lambda: _gone(conn)):  # a client stopped with Ctrl-C frees the server at once
                    return int(self.command(list(hello["argv"])) or 0)
            except SystemExit as stop:
                return _exit_status(stop)
        finally:
            sys.stdin, sys.stdout, sys.stderr = saved[:3]
            os.chdir(saved[3])

    def _control(self, conn: socket.socket, request: Any) -> None:
        op = request.get("op") if isinstance(request, dict) else None
        if op == "stop":
            self.stopping = True
        from rollout_core.models.loading import cached_names

        channel.send_json(conn, channel.REPLY, {
            "pid": os.getpid(), "socket": str(self.path), "uptime_seconds": round(time.time() - self.started, 1),
            "commands_served": self.served, "models_loaded": cached_names(),
            "idle_exit_seconds": self.idle_seconds, "stopping": self.stopping,
            "declines_you": self._refusal({**request, "argv": ["models"]}) if isinstance(request, dict) else None})


def _log(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {message}", file=sys.stderr, flush=True)


def _free_socket_path() -> Path:
    """Where a new server's socket goes; `RolloutError` when its folder is not private or a server answers there."""
    folder = channel.server_dir()
    problem = channel.make_private_dir(folder)
    if problem is not None:
        raise RolloutError(f"cannot start the server: {problem} (ROLLOUT_SERVER_DIR names another folder)")
    running = client.control("status")
    if running is not None:
        raise RolloutError(f"a server is already running (pid {running['pid']}); stop it with "
                           "`python -m rollout_core serve --stop`")
    return folder / channel.SOCKET_NAME


def _lifetime(idle_seconds: float) -> str:
    return f"exits after {idle_seconds / 60:g} idle minutes" if idle_seconds else "runs until stopped"


def serve(command: Command, idle_seconds: float, preload: Sequence[str] | None, ready: Callable[[str], None]) -> None:
    """Run `command` for each client's command line until idle for `idle_seconds` (0: never) or stopped; `preload`:
    models loaded before the first command (None: the embedded default models that are built). `ready` is called
    with one line once commands are taken."""
    if not hasattr(socket, "AF_UNIX"):
        raise RolloutError("the warm server needs Unix domain sockets, which this platform lacks")
    env = channel.env_stamp()  # before torch's import sets variables of its own (TORCHINDUCTOR_CACHE_DIR)
    path = _free_socket_path()
    import rollout_core.explain  # noqa: F401  (the heavy imports happen here, before the first command)
    from rollout_core.models.loading import load_model
    from rollout_core.models.registry import DEFAULTS, is_available, lookup

    if preload is None:
        preload = [name for name in DEFAULTS.values() if (entry := lookup(name)) is not None and is_available(entry)]
    for name in preload:
        load_model(name)
    path.unlink(missing_ok=True)  # a socket left by a killed server
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(str(path))
        os.chmod(path, 0o600)
        listener.listen(16)
        server = _Server(command, listener, path, idle_seconds, env)
        signal.signal(signal.SIGTERM, _terminate)
        ready(f"serving on {path} (pid {os.getpid()}); {_lifetime(idle_seconds)}")
        server.loop()
    except (KeyboardInterrupt, _Terminated):
        pass
    finally:
        listener.close()
        path.unlink(missing_ok=True)


def start_detached(argv: list[str], wait_seconds: float = 600.0) -> str:
    """Start `python -m rollout_core serve <argv>` in its own session and wait until it answers; its ready line."""
    log = _free_socket_path().parent / channel.LOG_NAME
    with open(log, "w") as out:
        os.chmod(log, 0o600)
        proc = subprocess.Popen([sys.executable, "-m", "rollout_core", "serve", *argv], stdin=subprocess.DEVNULL,
                                stdout=out, stderr=out, start_new_session=True)
    deadline = time.monotonic() + wait_seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
            raise RolloutError(f"the server did not start: {lines[-1] if lines else f'exit status {proc.returncode}'}")
        reply = client.control("status")
        if reply is not None and reply["pid"] == proc.pid:
            return f"server started (pid {proc.pid}, log {log}); later text, image and models commands use it"
        time.sleep(0.1)
    proc.terminate()
    raise RolloutError(f"the server did not answer within {wait_seconds:g} s; see {log}")


def describe(reply: dict[str, Any] | None) -> str:
    """One line for `serve --status`."""
    if reply is None:
        return "no server is running"
    models = ", ".join(reply["models_loaded"]) or "none"
    declines = reply.get("declines_you")
    return (f"server running (pid {reply['pid']}, up {reply['uptime_seconds']:g} s, {reply['commands_served']} "
            f"commands served, models loaded: {models}; {_lifetime(reply['idle_exit_seconds'])})"
            + (f"; it would not take commands from here ({declines}): restart it from here" if declines else ""))

