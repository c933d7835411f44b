"""The flow over the core's steps that every front's flow goes through.

``pipeline`` begins a request, plans it (with its conversation's cache state and the experiments that
watch it), notes what was sent, records a failure and answers; ``precompress`` builds after a response
the summary the next turns will need; ``count_calls`` is what a token counting call goes through.
"""
