"""The MCP server: a space's memory as tools for LLM clients, over stdio (`atommem mcp`) or
streamable HTTP (`/mcp` on the API)."""
