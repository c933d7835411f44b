"""Server-side tools: tools the provider runs itself (web search, file search, code execution, image
generation), billed per use on top of tokens.

- ``kinds``: the kinds of such tools and the names each API gives them;
- ``requested``: what a request asks for (for the tenant's allowance and the budget hold);
- ``reported``: what an answer says was used (for the bill);
- ``allowance``: a tenant's config refusing them.
"""

from __future__ import annotations

from gateway.servertools.kinds import ToolUses, tool_uses, uses_text

__all__ = ["ToolUses", "tool_uses", "uses_text"]
