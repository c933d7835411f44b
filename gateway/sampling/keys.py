"""The Redis keys of the sampler. Each model's keys carry the model as a hash tag, so they share a slot.

==========================  ======  ===================================================================
key                         type    holds
==========================  ======  ===================================================================
gw:samples:{model}          stream  passive samples of the model (fields: ``Signal`` fields), capped
gw:probes:{model}           stream  needle probe results of the model (fields: ``ProbeResult``), capped
gw:sampling:models          set     names of the models that have samples or probe results
==========================  ======  ===================================================================

Both streams are trimmed with ``XADD … MAXLEN ~ N`` on every write, so memory stays bounded.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SamplingKeys:
    prefix: str = "gw"

    def samples(self, model: str) -> str:
        return f"{self.prefix}:samples:{{{model}}}"

    def probes(self, model: str) -> str:
        return f"{self.prefix}:probes:{{{model}}}"

    def models(self) -> str:
        return f"{self.prefix}:sampling:models"
