"""What every engine shares, once: the engine base and what it composes, error rules, the ledger, the registry.

``engine.Engine`` is the base a storage engine subclasses (capability flags and blocking
primitives in, the async backend contract out); it composes ``runner`` (threads, deadlines,
preparing, translation, fork), ``embedding`` (batches, embedding later, the embedder
identity check), ``saving`` and ``searching`` (the order of a save's and a search's steps)
and ``limits`` (record sizes). ``capabilities`` reads the flags; ``errors`` is the error
table format and the one translation; ``ledger`` the ledger protocol and the side ledger;
``registry`` names to engine classes, each built by its ``from_config``; ``scope`` the one
scope digest; ``sqlite`` connections to longterm's SQLite files; ``fork`` what a forked
child keeps.
"""
