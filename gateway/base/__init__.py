"""The values every layer shares, importing nothing above them.

``types`` (``Tenant``, ``Usage``), ``errors`` (the error hierarchy, each class with its HTTP status),
``echo`` (what a client gave, as the gateway shows it back), ``record`` (what the gateway remembers of one
request, for the observers that run after it), ``counterfactual_cache`` (a value on that record),
``money`` (integer nano-dollars inside, decimal USD strings outside), ``background`` (work after a
response).
"""
