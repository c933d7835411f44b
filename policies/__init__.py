"""The policy engine: pure decisions about what to do with a request, given its size and its model.

The gateway counts a request, hands the engine a ``Facts`` value and receives a ``Decision``:
forward it, compress its old turns, retrieve the relevant chunks of its documents, reroute it to
another model, or reject it. Nothing here does I/O beyond reading the shipped ``default.yaml``.

Typical use::

    config = parse_policies(raw_yaml["policies"])          # pydantic ValidationError on bad shape
    engine = PolicyEngine(config, models=chat_models)       # PolicyConfigError on bad references
    decision = engine.decide(facts)
    while decision.transforms:                               # run decision.transforms[0], then:
        decision = engine.after_transform(decision, facts, new_tokens)
        # or, when the transform raised: engine.after_failure(decision, facts, reason=str(exc))

The invariant every decision keeps: a request goes upstream with at most its target model's cliff of
input tokens, unless the matching policy sets ``allow_over_cliff``, or no transform could bring it under
the cliff and the policy's ``on_exhausted`` is ``forward`` (then ``above_cliff`` is set and a warning is
attached), and never with more than the model's context window.
"""

from __future__ import annotations

from policies.bands import Band, ModelBands, TokenBands
from policies.decision import Action, Decision, Rejection
from policies.description import BandRow, ModelView, PolicyView, describe
from policies.engine import PASSTHROUGH_HEADER, PolicyEngine, UnknownModel
from policies.errors import PolicyConfigError, Problem
from policies.facts import Facts, ModelFacts
from policies.loader import load_default, parse_policies
from policies.schema import PoliciesConfig
from policies.settings import CompressSettings, Exhausted, Fallback, RetrieveSettings

__all__ = [
    "PASSTHROUGH_HEADER",
    "Action",
    "Band",
    "BandRow",
    "CompressSettings",
    "Decision",
    "Exhausted",
    "Facts",
    "Fallback",
    "ModelBands",
    "ModelFacts",
    "ModelView",
    "PoliciesConfig",
    "PolicyConfigError",
    "PolicyEngine",
    "PolicyView",
    "Problem",
    "Rejection",
    "RetrieveSettings",
    "TokenBands",
    "UnknownModel",
    "describe",
    "load_default",
    "parse_policies",
]
