"""The client side of the warm server: hand a command line to a running server and relay what it prints.

`run_remote` returns None whenever the command should run in this process instead: no server, a server that
is busy past `ACCEPT_WAIT` seconds, one that declines (other code or settings), or one that stopped before printing
anything (the stdin it was sent is put back for this process). Standard library only (and
`rollout_core.settings`, itself stdlib only).
"""
from __future__ import annotations

import io
import json
import os
import socket
import sys
from typing import Any, Sequence

from rollout_core import settings
from rollout_core.warm import channel

ACCEPT_WAIT = 5.0
"""Seconds to wait for a busy server to take the command (about what a cold start costs) before running it here."""


def connect(timeout: float = ACCEPT_WAIT) -> socket.socket | None:
    """A connection to this user's server, or None when there is none (or its folder is not private)."""
    if not hasattr(socket, "AF_UNIX") or not settings.switch("ROLLOUT_SERVER"):
        return None
    folder = channel.server_dir()
    if channel.private_problem(folder) is not None:
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(str(folder / channel.SOCKET_NAME))
    except OSError:  # no socket, or a stale one left by a killed server
        sock.close()
        return None
    return sock


def control(op: str) -> dict[str, Any] | None:
    """Ask the server for `op` ("status" or "stop"); its reply, or None when no server answers."""
    sock = connect()
    if sock is None:
        return None
    with sock:
        try:
            channel.send_json(sock, channel.CONTROL, {"op": op, **_stamps()})
            kind, reply = channel.receive_json(sock)
        except (OSError, channel.ChannelError):
            return None
    return reply if kind == channel.REPLY else None


def _stamps() -> dict[str, Any]:
    return {"cwd": os.getcwd(), "code": channel.code_stamp(), "env": channel.env_stamp()}


def _streams() -> dict[str, dict[str, str]]:
    return {name: {"encoding": getattr(stream, "encoding", None) or "utf-8",
                   "errors": getattr(stream, "errors", None) or "strict"}
            for name, stream in (("stdin", sys.stdin), ("stdout", sys.stdout), ("stderr", sys.stderr))}


def run_remote(argv: Sequence[str]) -> int | None:
    """Run `argv` (without the program name) on the warm server: its exit status, or None to run it here."""
    if not argv or argv[0] not in channel.SERVED_COMMANDS:
        return None
    sock = connect()
    if sock is None:
        return None
    with sock:
        hello = {"argv": list(argv), **_stamps(), "streams": _streams()}
        try:
            channel.send_json(sock, channel.HELLO, hello)
            kind, _ = channel.receive(sock)
        except (OSError, channel.ChannelError):  # busy past the wait, or gone: run here
            return None
        if kind != channel.ACCEPT:
            return None
        sock.settimeout(None)
        sent: list[bytes] = []
        status = _relay(sock, sent)
    if status is None and sent:  # the server read our stdin, then died: this process reads the same bytes
        sys.stdin = io.TextIOWrapper(io.BytesIO(sent[0]), encoding=sys.stdin.encoding or "utf-8",
                                     errors=sys.stdin.errors or "strict")
    return status


def _relay(sock: socket.socket, sent: list[bytes]) -> int | None:
    """Copy the server's output frames to this process's stdout / stderr until the exit status arrives; None when
    the server stopped before printing anything (run the command here). `sent` gets the stdin sent to it."""
    printed = False
    try:
        while True:
            kind, payload = channel.receive(sock)
            if kind in (channel.STDOUT, channel.STDERR):
                out = sys.stdout if kind == channel.STDOUT else sys.stderr
                try:
                    out.flush()
                    out.buffer.write(payload)
                    out.buffer.flush()
                except BrokenPipeError:  # our output was closed (piped into `head`): not an error, as in the CLI
                    return 0
                printed = True
            elif kind == channel.STDIN:
                if not sent:
                    sent.append(sys.stdin.buffer.read())
                channel.send(sock, channel.STDIN, sent[0])
            elif kind == channel.EXIT:
                return int(json.loads(payload)["status"])
            else:
                raise channel.ChannelError(f"unexpected frame {kind!r}")
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except (OSError, channel.ChannelError, ValueError, KeyError, TypeError) as err:
        if not printed:
            return None
        print(f"error: the warm server stopped after printing part of its output ({err}); run the command again "
              "(ROLLOUT_SERVER=off runs it without the server)", file=sys.stderr)
        return 1
