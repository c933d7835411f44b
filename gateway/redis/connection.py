"""redis-py's connection, writing a command within its ``socket_timeout`` without a task for each write.

redis-py bounds a write by ``asyncio.wait_for(...)``, which on Python 3.11 wraps the write in a new task,
so every command (a pipeline is one) costs a task and three more turns of the event loop: the task's first
step, its done callback, then the waiting coroutine's wake-up. The write itself hardly ever waits (only
when the socket's buffer is full). Here the same write runs under ``asyncio.timeout``, a timer handle on
the caller's own task, and fails as redis-py's does: a write that times out or meets a socket error
disconnects, and raises redis's ``TimeoutError`` or ``ConnectionError``. Connecting, the health check
and everything else are redis-py's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError


class Connection(aioredis.Connection):
    async def send_packed_command(
        self, command: bytes | str | Iterable[bytes], check_health: bool = True
    ) -> None:
        writer = self._writer
        if not self.socket_timeout or writer is None or not self.is_connected:
            await super().send_packed_command(command, check_health)
            return
        if check_health:
            await self.check_health()  # type: ignore[no-untyped-call]
        if isinstance(command, str):
            command = command.encode()
        if isinstance(command, bytes):
            command = [command]
        try:
            async with asyncio.timeout(self.socket_timeout):
                writer.writelines(command)
                await writer.drain()
        except TimeoutError:  # the timeout's, or the socket's own (an OSError)
            await self.disconnect(nowait=True)
            raise RedisTimeoutError("Timeout writing to socket") from None
        except OSError as exc:
            await self.disconnect(nowait=True)
            number, message = ("UNKNOWN", exc.args[0]) if len(exc.args) == 1 else exc.args[:2]
            raise RedisConnectionError(f"Error {number} while writing to socket. {message}.") from exc
        except BaseException:  # a write cut short (cancelled): the connection's state is unknown
            await self.disconnect(nowait=True)
            raise
