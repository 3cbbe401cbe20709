"""A warm CLI: `python -m rollout_core serve` keeps torch, transformers and the loaded models in one process,
and `python -m rollout_core text|image|models ...` hands its command line to that process when one is running.

Why: a fresh interpreter spends 6-8 s importing torch and transformers and loading the model before the first
line of output; scripts that call the CLI once per input pay that every time. Nothing here changes what a
command prints or its exit status: the server runs the same `rollout_core.cli.main`, in the client's folder,
with the client's stdin; when the server was started by other code, another Python or other settings, it
declines and the command runs in the client's own process. Only the user who started the server can talk to
it (a socket in a folder only that user can open, and the peer's uid checked).

Modules: `channel` (where the socket lives, the framing, what must match), `client` (`cli.main`'s side),
`server` (the serving loop, `--detach`, `--stop`, `--status`).
"""
