"""``longterm ui``: a small local web app to see, search, explain and erase a user's memories.

The seam: ``longterm.ui.cli.ui`` (the click command the ``longterm`` group adds) serves
``longterm.ui.app.ui_app`` with uvicorn; ``app`` routes, ``views`` writes the HTML (every
stored value escaped there), ``data`` reads and erases through ``LongTermMemory``,
``security`` checks tokens, cookies, CSRF tokens and origins. See docs/ui.md.

Why nothing is imported here: ``longterm --help`` must not import Starlette.
"""
