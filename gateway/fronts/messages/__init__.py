"""The Anthropic Messages front (``POST /v1/messages``): the same pipeline as chat, through an adapter.

Modules, one concept each:

- ``front``        ``MessagesFront`` (what ``gateway.core.planning`` needs to count and transform a request)
                   and ``check_messages``, the checks of a body
- ``view``         the adapter: content blocks to chat-style messages for counting and the compressors,
                   and the compressors' result back to messages (kept messages are the original objects)
- ``parts``        what one content block shows in the view (text a transform may change, read-only
                   text, images, documents, opaque data)
- ``edits``        a transform's changes written back into copies of the messages
- ``groups``       the blocks kept or summarised together (a tool call with its result; thinking with
                   its assistant message), and the check that a transform kept them so
- ``breakpoints``  explicit cache breakpoints: where they are, the one after a summary, at most four
- ``counting``     the estimated tokens of a request (Claude's tokenizer is not public), and its bound
- ``media``        token estimates of images and PDFs
- ``thinking``     thinking blocks dropped on a reroute to another model (or an experiment's candidate)
- ``confirm``      the provider's own count (``/messages/count_tokens``) of a prompt near a line
- ``stream``       the Messages event stream read on the side (usage from ``message_start`` and the
                   cumulative ``message_delta``), and what a message answered, for a shadow comparison
- ``replay``       a shadow call's copy of a request, and its answer read (``gateway.experiments.replay``)
- ``reply``        the answer to the client, whole or streamed, and what the gateway learns from it
- ``errors``       errors in Anthropic's shape
- ``pipeline``     ``POST /v1/messages`` through the pipeline; ``count_tokens`` the client's count

The package root imports nothing; the HTTP handlers are ``gateway.edge.messages_routes``. Anthropic's usage
object is read by ``gateway.money.anthropic_usage``.
"""
