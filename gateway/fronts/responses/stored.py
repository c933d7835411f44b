"""What the Responses front keeps beside the pipeline: the memory of the responses it relayed (who served
each, how large it was) and the settler that bills background responses when they end.

Opened in the lifespan and handed to the front's routes, so that the pipeline, which every front calls,
knows nothing of stored responses.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.fronts.responses.memory import ResponseMemory
from gateway.fronts.responses.pending import Settler


@dataclass(frozen=True, slots=True)
class StoredResponses:
    memory: ResponseMemory
    settler: Settler
