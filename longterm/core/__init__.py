"""What every engine shares, once: the engine base, error rules, the ledger, the registry.

``engine.Engine`` is the base a storage engine subclasses (primitives in, the async
backend contract out); ``errors`` the error table format; ``ledger`` the ledger protocol;
``registry`` names to engine classes; ``scope`` the one scope digest.
"""
