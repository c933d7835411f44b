"""One planner per action a policy can name, and the registry from YAML names to planners."""

from __future__ import annotations

from policies.actions.compress import CompressOldTurns
from policies.actions.forward import ForwardUnchanged
from policies.actions.reject import RejectRequest
from policies.actions.reroute import RerouteToModel
from policies.actions.retrieve import RetrieveChunks
from policies.context import Planner
from policies.decision import Action

PLANNERS: dict[Action, type[Planner]] = {
    Action.FORWARD: ForwardUnchanged,
    Action.COMPRESS: CompressOldTurns,
    Action.RETRIEVE: RetrieveChunks,
    Action.REROUTE: RerouteToModel,
    Action.REJECT: RejectRequest,
}

__all__ = [
    "PLANNERS",
    "CompressOldTurns",
    "ForwardUnchanged",
    "RejectRequest",
    "RerouteToModel",
    "RetrieveChunks",
]
