"""An MCP server over longterm: any MCP client (assistants, editors, agent frameworks) uses the memory.

The seam: ``longterm mcp`` (``longterm.cli``) serves the tools of ``longterm.mcp.tools``
over stdio (``server.serve_stdio``) or streamable HTTP (``server.serve_http``), on the
official ``mcp`` SDK, installed with ``pip install 'longterm[mcp]'``. Whose memories the
tools reach is the server's choice, never the model's: the command line or environment
over stdio, the caller's bearer token (``auth.Tokens``) over HTTP. docs/mcp.md says how.

Why this module imports nothing: ``import longterm`` must not need the SDK; the CLI
imports the submodules when the command runs, after checking the SDK is installed.
"""
