"""The warm server: one process that has imported torch and transformers and keeps models loaded, running the
CLI's `text`, `image` and `models` commands for clients of the same user, one at a time.

Each command runs through the command line's entry point, handed in by the CLI's `serve` (`rollout_core.cli.main`;
the server never imports the CLI), exactly as in a fresh process, in the client's folder, with stdout, stderr and
stdin carried over the socket; a command that reads stdin asks the client for it. The server
exits after `idle_seconds` without a command (0: never), on `--stop`, or on SIGTERM / Ctrl-C.
"""
from __future__ import annotations

import codecs
import contextlib
import io
import os
import queue
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from rollout_core.errors import RolloutError
from rollout_core.warm import channel, client

PENDING_LIMIT = 16
"""Commands that may wait for the one running; more are declined at once (their clients run them themselves)."""
STREAM_NAMES = ("stdin", "stdout", "stderr")


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


def malformed_control(request: Any) -> str | None:
    """Why a CONTROL frame's JSON is not a status or stop request (None when its shape is right); the stamps
    (cwd, code, env) are optional there."""
    if not isinstance(request, dict) or request.get("op") not in ("status", "stop"):
        return "a control request is an object with op 'status' or 'stop'"
    return _stamps_problem({"cwd": "", "code": "", "env": {}, **request})


def _stamps_problem(request: dict[str, Any]) -> str | None:
    if not isinstance(request.get("cwd"), str) or "\0" in request["cwd"]:
        return "cwd must be a string"
    if not isinstance(request.get("code"), str):
        return "code must be a string"
    env = request.get("env")
    if not isinstance(env, dict) or not all(isinstance(value, str) for value in env.values()):
        return "env must be an object of strings"
    return None


def malformed(hello: Any) -> str | None:
    """Why a HELLO frame's JSON cannot be a command request (None when its shape is right): every field is
    checked before any is used, so no frame a client can send makes the server fail."""
    if not isinstance(hello, dict):
        return "the request is not a JSON object"
    argv = hello.get("argv")
    if not isinstance(argv, list) or not argv or not all(isinstance(arg, str) for arg in argv):
        return "argv must be a non-empty list of strings"
    if any("\0" in arg for arg in argv):
        return "argv must not hold NUL characters"
    problem = _stamps_problem(hello)
    if problem is not None:
        return problem
    streams = hello.get("streams")
    if not isinstance(streams, dict) or set(streams) != set(STREAM_NAMES):
        return f"streams must be an object with exactly {', '.join(STREAM_NAMES)}"
    for name in STREAM_NAMES:
        stream = streams[name]
        if not isinstance(stream, dict) or set(stream) != {"encoding", "errors"} \
                or not all(isinstance(value, str) for value in stream.values()):
            return f"streams.{name} must be an object with the strings encoding and errors"
        try:
            codecs.lookup(stream["encoding"])
            codecs.lookup_error(stream["errors"])
        except LookupError as err:
            return f"streams.{name}: {err}"
    return None


Command = Callable[[list[str]], "int | None"]
"""The command line's entry point: argv (without the program name) -> exit status."""


class _Server:
    """An acceptor thread reads each connection's first frame (within `channel.FIRST_FRAME_WAIT` seconds),
    answers status and stop requests at once (also while a command runs), declines what it must, and queues
    command requests; the main thread runs them one at a time."""

    def __init__(self, command: Command, listener: socket.socket, path: Path, idle_seconds: float,
                 env: dict[str, str]) -> None:
        self.command, self.listener, self.path, self.idle_seconds = command, listener, path, idle_seconds
        self.code, self.env = channel.code_stamp(), env
        self.started, self.served, self.stopping = time.time(), 0, False
        self.running: tuple[str, float] | None = None  # the command being run and since when (time.time())
        self.pending: queue.Queue[tuple[socket.socket, dict[str, Any], float] | None] = queue.Queue(PENDING_LIMIT)

    def loop(self) -> None:
        threading.Thread(target=self._accept, name="warm-server-acceptor", daemon=True).start()
        while not self.stopping:
            try:
                item = self.pending.get(timeout=self.idle_seconds or None)
            except queue.Empty:
                return
            if item is None:  # a stop request woke us
                continue
            conn, hello, since = item
            with conn:
                try:
                    self._command(conn, hello, since)
                except (OSError, channel.ChannelError) as err:  # the client went away: serve the next one
                    _log(f"client lost: {err}")
                finally:
                    self.running = None

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:  # the listener was closed: the server is ending
                return
            try:
                queued = self._first_frame(conn)
            except Exception as err:  # noqa: BLE001  (whatever a peer sends, the server lives on)
                _log(f"connection dropped: {type(err).__name__}: {err}")
                queued = False
            if not queued:
                conn.close()

    def _first_frame(self, conn: socket.socket) -> bool:
        """Read and answer a connection's first frame; True when it was queued as a command."""
        uid = _peer_uid(conn)
        if uid is not None and uid != os.getuid():
            return False
        try:
            kind, request = channel.receive_json(conn, within=channel.FIRST_FRAME_WAIT)
        except channel.ChannelError as err:
            _refuse(conn, str(err))
            return False
        if kind == channel.CONTROL:
            problem = malformed_control(request)
            if problem is None:
                self._control(conn, request)
            else:
                _refuse(conn, problem)
            return False
        problem = malformed(request) if kind == channel.HELLO else f"a first frame of kind {kind!r}"
        if problem is not None:
            _refuse(conn, problem)
            return False
        reason = self._refusal(request)
        if reason is None and self.stopping:
            reason = "the server is stopping"
        if reason is not None:
            channel.send_json(conn, channel.DECLINE, {"reason": reason})
            _log(f"declined {request['argv'][0]!r}: {reason}")
            return False
        conn.settimeout(None)
        try:
            self.pending.put_nowait((conn, request, time.monotonic()))
        except queue.Full:
            channel.send_json(conn, channel.DECLINE, {"reason": "too many commands are waiting"})
            return False
        return True

    def _command(self, conn: socket.socket, hello: dict[str, Any], since: float) -> None:
        if self.stopping or _gone(conn) or time.monotonic() - since > client.ACCEPT_WAIT - 0.5:
            # the client has stopped waiting for this server and runs the command itself
            channel.send_json(conn, channel.DECLINE, {"reason": "busy"})
            return
        self.running = (hello["argv"][0], time.time())
        channel.send(conn, channel.ACCEPT)
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
            changed = sorted(set(self.env.items()) ^ set(hello["env"].items()))
            return "other settings: " + ", ".join(sorted({name for name, _ in changed}))
        if not os.path.isdir(hello["cwd"]):
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
            except (OSError, channel.ChannelError):
                raise
            except Exception as err:  # noqa: BLE001  (the command reports its own errors; this is a last guard)
                print(f"error: internal: {type(err).__name__}: {err}", file=sys.stderr)
                return 1
        finally:
            sys.stdin, sys.stdout, sys.stderr = saved[:3]
            os.chdir(saved[3])

    def _control(self, conn: socket.socket, request: dict[str, Any]) -> None:
        if request["op"] == "stop":
            self.stopping = True
            try:
                self.pending.put_nowait(None)  # wake the main thread if it is waiting for a command
            except queue.Full:
                pass  # it is busy and will see `stopping` after this command
        from rollout_core.models.loading import cached_names

        running = self.running
        channel.send_json(conn, channel.REPLY, {
            "pid": os.getpid(), "socket": str(self.path), "uptime_seconds": round(time.time() - self.started, 1),
            "commands_served": self.served, "models_loaded": cached_names(),
            "running": None if running is None else {"command": running[0],
                                                     "seconds": round(time.time() - running[1], 1)},
            "idle_exit_seconds": self.idle_seconds, "stopping": self.stopping,
            "declines_you": self._refusal({"cwd": "", "code": "", "env": {}, **request, "argv": ["models"]})})


def _refuse(conn: socket.socket, problem: str) -> None:
    """Answer a frame the server cannot use with an ERROR frame (the caller closes the connection)."""
    _log(f"refused a frame: {problem}")
    try:
        channel.send_json(conn, channel.ERROR, {"error": problem})
    except OSError:
        pass


def _log(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {message}", file=sys.stderr, flush=True)


def _server_folder() -> Path:
    """The socket's folder, created private; `RolloutError` when it cannot be."""
    folder = channel.server_dir()
    problem = channel.make_private_dir(folder)
    if problem is not None:
        raise RolloutError(f"cannot start the server: {problem} (ROLLOUT_SERVER_DIR names another folder)")
    return folder


def _already_running(pid: int) -> RolloutError:
    return RolloutError(f"a server is already running (pid {pid}); stop it with `python -m rollout_core serve --stop`")


def _claim(folder: Path) -> int:
    """This process's hold on `folder` as its one server (the lock's descriptor, kept open for the server's
    life); `RolloutError` naming the pid when another server holds it, answering, busy or still loading."""
    lock = channel.hold_lock(folder)
    if lock is None:
        raise _already_running(channel.lock_holder(folder) or -1)
    running = client.control("status")  # a server of an older version, without the lock
    if running is not None and running.get("pid") != os.getpid():
        os.close(lock)
        raise _already_running(running["pid"])
    return lock


def _lifetime(idle_seconds: float) -> str:
    return f"exits after {idle_seconds / 60:g} idle minutes" if idle_seconds else "runs until stopped"


def serve(command: Command, idle_seconds: float, preload: Sequence[str] | None, ready: Callable[[str], None]) -> None:
    """Run `command` for each client's command line until idle for `idle_seconds` (0: never) or stopped; `preload`:
    models loaded before the first command (None: the embedded default models that are built). `ready` is called
    with one line once commands are taken."""
    if not hasattr(socket, "AF_UNIX"):
        raise RolloutError("the warm server needs Unix domain sockets, which this platform lacks")
    env = channel.env_stamp()  # before torch's import sets variables of its own (TORCHINDUCTOR_CACHE_DIR)
    folder = _server_folder()
    lock = _claim(folder)  # held until this process ends: no other server starts here, none unlinks our socket
    path = folder / channel.SOCKET_NAME
    import rollout_core.explain  # noqa: F401  (the heavy imports happen here, before the first command)
    from rollout_core.models.loading import load_model
    from rollout_core.models.registry import DEFAULTS, is_available, lookup

    from rollout_core.serving.kernels import start_flow_kernels

    start_flow_kernels()  # flow's kernels load while the models do
    if preload is None:
        preload = [name for name in DEFAULTS.values() if (entry := lookup(name)) is not None and is_available(entry)]
    for name in preload:
        load_model(name)
    path.unlink(missing_ok=True)  # a socket left by a killed server (we hold the lock: no live server owns it)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    ours = None
    try:
        listener.bind(str(path))
        os.chmod(path, 0o600)
        ours = os.stat(path).st_ino
        listener.listen(16)
        server = _Server(command, listener, path, idle_seconds, env)
        signal.signal(signal.SIGTERM, _terminate)
        ready(f"serving on {path} (pid {os.getpid()}); {_lifetime(idle_seconds)}")
        server.loop()
    except (KeyboardInterrupt, _Terminated):
        pass
    finally:
        listener.close()
        with contextlib.suppress(OSError):
            if os.stat(path).st_ino == ours:
                path.unlink()
        os.close(lock)


def start_detached(argv: list[str], wait_seconds: float = 600.0) -> str:
    """Start `python -m rollout_core serve <argv>` in its own session and wait until it answers; its ready line."""
    folder = _server_folder()
    holder = channel.lock_holder(folder)
    if holder is not None:
        raise _already_running(holder)
    running = client.control("status")
    if running is not None:
        raise _already_running(running["pid"])
    log = folder / channel.LOG_NAME
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
        holder = channel.lock_holder(channel.server_dir())
        return "no server is running" if holder is None else \
            f"a server is starting (pid {holder}): it loads its models and does not take commands yet"
    models = ", ".join(reply["models_loaded"]) or "none"
    declines = reply.get("declines_you")
    running = reply.get("running")
    busy = f"; running a {running['command']} command for {running['seconds']:g} s" if running else "; idle"
    return (f"server running (pid {reply['pid']}, up {reply['uptime_seconds']:g} s, {reply['commands_served']} "
            f"commands served, models loaded: {models}{busy}; {_lifetime(reply['idle_exit_seconds'])})"
            + (f"; it would not take commands from here ({declines}): restart it from here" if declines else ""))

