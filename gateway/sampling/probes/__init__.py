"""The needle probe kit: haystacks made locally (``haystack``), the needle and its scoring
(``needle``), probes sent through the gateway and stored (``probe``), and their recall (``recall``).
"""
