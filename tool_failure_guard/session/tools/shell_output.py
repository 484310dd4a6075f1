"""A shell command's output, read incrementally and bounded, and the end of its process group.

:class:`ShellOutput` keeps the first and the last :data:`SHELL_KEEP_BYTES` of
what a command prints and discards the middle as it arrives, so the agent's
memory stays bounded whatever the command prints (1 GB of output costs a
64 KiB read buffer, not 1 GB); the model gets head and tail with a note of how
many bytes were cut between them, never half a UTF-8 character at a cut.

:func:`process_slots` bounds the shell processes running at once in one agent
process (:data:`MAX_CONCURRENT_SHELL_PROCESSES`, across all its sessions): a
command waits for a slot before its process starts, and its timeout starts
with the process.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import weakref

import attrs

#: Shell processes running at once in one agent process; a further command waits.
MAX_CONCURRENT_SHELL_PROCESSES = 10
#: One semaphore per event loop (the agent has one; tests start many).
_SLOTS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
    weakref.WeakKeyDictionary()
)


def process_slots() -> asyncio.Semaphore:
    """The running loop's bound on concurrent shell processes."""
    loop = asyncio.get_running_loop()
    slots = _SLOTS.get(loop)
    if slots is None:
        slots = _SLOTS[loop] = asyncio.Semaphore(MAX_CONCURRENT_SHELL_PROCESSES)
    return slots


#: Bytes of a command's output kept: its first and its last :data:`SHELL_KEEP_BYTES` each.
SHELL_KEEP_BYTES = 8 * 1024
_READ_CHUNK = 64 * 1024


@attrs.define
class ShellOutput:
    """A command's output read incrementally: the head and the tail kept, the middle
    discarded as it arrives (memory stays bounded whatever the command prints), and
    how many bytes were cut."""

    head: bytearray = attrs.field(factory=bytearray)
    tail: bytearray = attrs.field(factory=bytearray)
    cut: int = 0
    keep: int = SHELL_KEEP_BYTES

    def add(self, chunk: bytes) -> None:
        room = self.keep - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        self.tail += chunk
        excess = len(self.tail) - self.keep
        if excess > 0:
            del self.tail[:excess]
            self.cut += excess

    async def read_all(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(_READ_CHUNK):
            self.add(chunk)

    def bytes(self) -> bytes:
        """What the model gets: all of it, or head + a note of the bytes cut + tail."""
        if not self.cut:
            return bytes(self.head + self.tail)
        head = _whole_characters_at_end(bytes(self.head))
        tail = _whole_characters_at_start(bytes(self.tail))
        cut = self.cut + (len(self.head) - len(head)) + (len(self.tail) - len(tail))
        return head + f"\n[... {cut} bytes of output cut ...]\n".encode() + tail

    def text(self) -> str:
        return self.bytes().decode("utf-8", "replace")


def _whole_characters_at_end(data: bytes) -> bytes:
    """``data`` without a UTF-8 sequence cut short at its end (at most 3 bytes)."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte < 0x80:
            return data
        if byte >= 0xC0:  # a lead byte: is its sequence complete?
            need = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return data if back >= need else data[:-back]
    return data


def _whole_characters_at_start(data: bytes) -> bytes:
    """``data`` without continuation bytes of a character that began before it."""
    skip = 0
    while skip < min(3, len(data)) and 0x80 <= data[skip] < 0xC0:
        skip += 1
    return data[skip:]


async def kill_process_group(process: asyncio.subprocess.Process) -> None:
    """Kill the command's process group and reap it, discarding what it still wrote."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, 9)
    with contextlib.suppress(Exception):
        async with asyncio.timeout(5):
            if process.stdout is not None:
                while await process.stdout.read(_READ_CHUNK):
                    pass
            await process.wait()
