# The C extension built from _speedups.c (m2mc.speedups says whether it is in use).
from collections.abc import Callable
from typing import Any

from m2mc.ordering import Message, MessageId

def setup(mid_type: type[MessageId], message_type: type[Message], root: MessageId,
          decode_error: type[Exception], read_vclock: Callable[[Any, int], dict[str, int]],
          max_pid: int, max_list: int) -> None: ...
def records(raw: Any, max_seq: int) -> list[Message]: ...
