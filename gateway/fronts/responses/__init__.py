"""The Responses API front (``POST /v1/responses``): the same pipeline as chat, through an adapter.

Modules, one concept each:

- ``items``     the input items: their kinds, and their groups (a reasoning item with the item it
                belongs to; a call with its output, by ``call_id``), the units kept or summarised whole
- ``view``      the adapter: input items to chat-style messages for counting and the compressors, and
                the compressors' result back to input items (kept groups are their original items)
- ``counting``  tokens of a Responses request (instructions, every input item, tools), upper bound
- ``front``     ``ResponsesFront``: what ``gateway.core.planning`` needs to count and transform a request
- ``memory``    what the gateway remembers of each response it saw (usage, provider), in Redis
- ``stored``    the memory and the settler of background responses, held beside the pipeline
- ``chain``     ``previous_response_id``: the estimated size of the history stored upstream
- ``confirm``   the provider's own count (``/responses/input_tokens``) of a prompt near a line
- ``pending``   background responses: billed when the gateway sees them end (polls, its own look)
- ``stream``    the Responses SSE reader (usage from the final event, first output delta), and what a
                Responses object answered, for a shadow comparison
- ``replay``    a shadow call's copy of a request, and its answer read (``gateway.experiments.replay``)
- ``reply``     the answer to the client, whole or streamed, and what the gateway learns from it
- ``calls``     the other calls (by id, streamed or not; compact, input_tokens), to the right provider

The package root imports nothing; the HTTP handlers are ``gateway.edge.responses_routes``.
"""
