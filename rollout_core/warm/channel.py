"""What the warm server and its clients share: the socket's place, the framing, and what must match.

Standard library only: the client side runs before torch is imported, and must stay fast.

- The socket lives in a folder only its user can open: `ROLLOUT_SERVER_DIR`, else `$XDG_RUNTIME_DIR/rollout_core`,
  else `/tmp/rollout_core-<uid>`. A folder that is a symlink, belongs to someone else or is open to others is
  never used (the client runs the command itself; the server refuses to start).
- Frames: one kind byte, a 4-byte big-endian length, the payload. A client's first frame (HELLO or CONTROL, JSON of
  at most `MAX_JSON_FRAME` bytes) must arrive whole within `FIRST_FRAME_WAIT` seconds; a frame the server cannot use
  is answered with an ERROR frame and the connection closed.
- One server per folder: a server holds an exclusive `flock` on `server.lock` (its pid inside) for its whole life, so
  a second `serve` is refused even while the first is busy or still loading, and only the lock's holder ever removes
  the socket.
- A server serves a client only when both run the same code (`code_stamp`: the package's files, the Python, the
  installed packages' folder) with the same settings (`env_stamp`: the variables the core, torch and transformers
  read); otherwise the client runs the command itself.
"""
from __future__ import annotations

import hashlib
import json
import os
import socket
import stat
import struct
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Any

from rollout_core import settings

SERVED_COMMANDS = ("text", "image", "models")
"""Commands a server runs. Long jobs (evaluate, corpus, setup) gain nothing from a warm start and stay local."""

SOCKET_NAME = "cli.sock"
LOG_NAME = "server.log"
LOCK_NAME = "server.lock"
PACKAGE_DIR = Path(__file__).resolve().parents[1]
ENV_PREFIXES = ("ROLLOUT_", "HF_", "HUGGINGFACE_", "TRANSFORMERS_", "TORCH", "PYTORCH_", "CUDA_", "OMP_", "MKL_",
                "XDG_", "MALLOC_", "PYTHON")
ENV_NAMES = ("HOME", "LANG", "LC_ALL", "LC_CTYPE")
MAX_FRAME = 256 * 1024 * 1024
MAX_JSON_FRAME = 8 * 1024 * 1024
"""A HELLO or CONTROL frame: argv and environment together are at most a few MB on Linux (ARG_MAX)."""
FIRST_FRAME_WAIT = 1.0
"""Seconds a connection has to send its whole first frame; a silent one is closed so it holds nobody up."""
CLI_ENV_DEFAULTS = {"HF_HUB_DISABLE_PROGRESS_BARS": "1", "TRANSFORMERS_VERBOSITY": "error"}
"""Set by the CLI when unset (quiet libraries); applied to `env_stamp` too, so a server's own defaults match."""

# Frame kinds. Client -> server: HELLO (json: argv, cwd, code, env, encodings), STDIN (bytes), CONTROL (json: op).
# Server -> client: ACCEPT, DECLINE (json: reason), STDOUT / STDERR (bytes), STDIN (empty: "send your stdin"),
# EXIT (json: status), REPLY (json), ERROR (json: error; the frame could not be used, the connection is closed).
HELLO, STDIN, CONTROL = b"h", b"i", b"c"
ACCEPT, DECLINE, STDOUT, STDERR, EXIT, REPLY, ERROR = b"a", b"d", b"o", b"e", b"x", b"r", b"!"


class ChannelError(Exception):
    """The peer closed the connection or sent something that is not a frame."""


def server_dir() -> Path:
    """The folder that holds the socket (see the module docstring); not checked here."""
    configured = settings.text("ROLLOUT_SERVER_DIR")
    if configured:
        return Path(configured).expanduser()
    runtime = os.environ.get("XDG_RUNTIME_DIR", "").strip()
    if runtime:
        return Path(runtime) / "rollout_core"
    return Path(tempfile.gettempdir()) / f"rollout_core-{os.getuid()}"


def private_problem(folder: Path) -> str | None:
    """Why `folder` cannot hold the socket (None when it is a real folder of this user that nobody else can open)."""
    try:
        info = os.lstat(folder)
    except FileNotFoundError:
        return f"{folder} does not exist"
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        return f"{folder} is not a folder (or is a symbolic link)"
    if info.st_uid != os.getuid():
        return f"{folder} belongs to another user"
    if info.st_mode & 0o077:
        return f"{folder} can be opened by other users (mode {stat.S_IMODE(info.st_mode):o}; it must be 700)"
    return None


def make_private_dir(folder: Path) -> str | None:
    """Create `folder` (mode 700) when missing; returns why it cannot be used, or None."""
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as err:
        return f"cannot create {folder}: {err.strerror or err}"
    return private_problem(folder)


def env_stamp() -> dict[str, str]:
    """The environment variables that can change what a command computes or prints (with the CLI's defaults)."""
    found = {k: v for k, v in os.environ.items() if k.startswith(ENV_PREFIXES) or k in ENV_NAMES}
    return {**CLI_ENV_DEFAULTS, **found}


def code_stamp() -> str:
    """A digest of the code a command would run: every file of the package (name, size, modification time),
    the interpreter, and the installed packages' folder (changed by any install or upgrade)."""
    digest = hashlib.sha256()
    digest.update(f"{sys.executable}\0{sys.version}\0".encode())
    for folder in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}:
        try:
            digest.update(f"{folder}\0{os.stat(folder).st_mtime_ns}\0".encode())
        except OSError:
            pass
    pending = [str(PACKAGE_DIR)]
    while pending:
        for entry in sorted(os.scandir(pending.pop()), key=lambda e: e.name):
            if entry.name == "__pycache__":
                continue
            if entry.is_dir(follow_symlinks=False):
                pending.append(entry.path)
            else:
                info = entry.stat()
                digest.update(f"{entry.path}\0{info.st_size}\0{info.st_mtime_ns}\0".encode())
    return digest.hexdigest()


def send(sock: socket.socket, kind: bytes, payload: bytes = b"") -> None:
    sock.sendall(kind + struct.pack(">I", len(payload)) + payload)


def send_json(sock: socket.socket, kind: bytes, value: Any) -> None:
    send(sock, kind, json.dumps(value).encode())


def receive(sock: socket.socket, *, limit: int = MAX_FRAME, within: float | None = None) -> tuple[bytes, bytes]:
    """The next frame as (kind, payload); `ChannelError` when the peer closed, sent garbage, a frame over `limit`
    bytes, or (with `within`) did not send the whole frame within that many seconds."""
    deadline = None if within is None else time.monotonic() + within
    head = _exactly(sock, 5, deadline)
    (length,) = struct.unpack(">I", head[1:])
    if length > limit:
        raise ChannelError(f"a frame of {length} bytes (at most {limit})")
    return head[:1], _exactly(sock, length, deadline)


def receive_json(sock: socket.socket, *, within: float | None = None) -> tuple[bytes, Any]:
    """The next frame, its payload decoded as JSON (at most `MAX_JSON_FRAME` bytes)."""
    kind, payload = receive(sock, limit=MAX_JSON_FRAME, within=within)
    try:
        return kind, json.loads(payload or b"null")
    except (ValueError, RecursionError) as err:  # RecursionError: nested too deep for the parser
        raise ChannelError(f"not JSON: {type(err).__name__}") from None


def _exactly(sock: socket.socket, size: int, deadline: float | None) -> bytes:
    chunks, missing = [], size
    while missing:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ChannelError("the frame did not arrive in time")
            sock.settimeout(left)
        try:
            chunk = sock.recv(min(missing, 1 << 20))
        except socket.timeout:
            if deadline is None:
                raise
            raise ChannelError("the frame did not arrive in time") from None
        if not chunk:
            raise ChannelError("connection closed")
        chunks.append(chunk)
        missing -= len(chunk)
    return b"".join(chunks)


def hold_lock(folder: Path, wait: float = 1.0) -> int | None:
    """Take this folder's server lock for the caller's lifetime and write its pid in it: the lock's file
    descriptor, or None when another process holds it. Retries for `wait` seconds (a `lock_holder` probe holds
    it for an instant)."""
    import fcntl  # POSIX only, like the Unix socket itself

    fd = os.open(folder / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.close(fd)
                return None
            time.sleep(0.02)
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    return fd


def lock_holder(folder: Path) -> int | None:
    """The pid of the server holding this folder's lock (answering or not), or None when no process holds it."""
    import fcntl

    try:
        fd = os.open(folder / LOCK_NAME, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.pread(fd, 32, 0).decode(errors="replace").strip()
            return int(text) if text.isdigit() else -1
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)
