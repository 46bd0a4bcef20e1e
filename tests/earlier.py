"""Stores as an earlier release made them, for the one-time join's tests.

The seam: ``with earlier_release(): ...`` saves as a release before the join's marker did: a
memory told its index writes into it without marking it joined (``Router.stamp`` is this
release's), so a user put in two indices there is one the join must bring together.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

import longterm.memory.routing as routing


@contextmanager
def earlier_release() -> Iterator[None]:
    async def unmarked(router: routing.Router) -> None:
        return None

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(routing, "stamp", unmarked)
        yield
