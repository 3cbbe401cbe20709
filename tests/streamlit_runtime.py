"""A real Streamlit runtime in the test process, without HTTP: sessions connect, run app.py's pages from a query
string, disconnect and expire as behind `streamlit run` (AppTest has one fake session and a fresh media file
manager per run, so it cannot show what outlives a session)."""
from __future__ import annotations

import asyncio
import contextlib
import urllib.parse
from pathlib import Path
from typing import Any, AsyncIterator, Callable

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ClientState_pb2 import ClientState
from streamlit.runtime import Runtime, RuntimeConfig
from streamlit.runtime.caching.storage.dummy_cache_storage import MemoryCacheStorageManager
from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage
from streamlit.runtime.memory_session_storage import MemorySessionStorage
from streamlit.runtime.memory_uploaded_file_manager import MemoryUploadedFileManager

APP = Path(__file__).resolve().parents[1] / "app.py"
RUN_SECONDS = 120


class Client:
    """A browser tab as the runtime sees it: it counts finished script runs."""

    def __init__(self) -> None:
        self.finished = 0
        self.client_context = None

    def write_forward_msg(self, msg: Any) -> None:
        if msg.WhichOneof("type") == "script_finished":
            self.finished += 1


@contextlib.asynccontextmanager
async def runtime(session_ttl: float) -> AsyncIterator[Runtime]:
    """A started runtime on app.py whose disconnected sessions are kept `session_ttl` seconds; stopped after."""
    rt = Runtime(RuntimeConfig(script_path=str(APP), media_file_storage=MemoryMediaFileStorage("/media"),
                               uploaded_file_manager=MemoryUploadedFileManager("/_stcore/upload_file"),
                               cache_storage_manager=MemoryCacheStorageManager(),
                               session_storage=MemorySessionStorage(ttl_seconds=session_ttl)))
    try:
        await rt.start()
        yield rt
    finally:
        rt.stop()
        await rt.stopped
        Runtime._instance = None


def open_tab(rt: Runtime, page: str, **query: str) -> tuple[str, Client]:
    """Open `page` with `query` in a new session and start its script run (not waited for); its id and client.
    `rt.disconnect_session(id)` closes the tab (the session is stored for reconnection)."""
    client = Client()
    session_id = rt.connect_session(client=client, user_info={})
    rt.handle_backmsg(session_id, BackMsg(rerun_script=ClientState(
        query_string=urllib.parse.urlencode(query), page_name=page)))
    return session_id, client


async def visit(rt: Runtime, page: str, **query: str) -> str:
    """Open `page` with `query` in a new session, wait until its script run has finished, close the tab (the
    session is stored for reconnection); its id."""
    session_id, client = open_tab(rt, page, **query)
    await wait_for(lambda: client.finished > 0, RUN_SECONDS, f"the {page} page's run")
    rt.disconnect_session(session_id)
    return session_id


async def wait_for(condition: Callable[[], bool], seconds: float, what: str) -> float:
    """Poll `condition` every 50 ms until it holds; the seconds that took. TimeoutError naming `what` after
    `seconds`."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    while not condition():
        if loop.time() - start > seconds:
            raise TimeoutError(f"{what}: not within {seconds:g} s")
        await asyncio.sleep(0.05)
    return loop.time() - start
