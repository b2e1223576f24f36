"""`AsyncClosing`: the async context manager of every policy, encoder and scorer closes on the way out."""

from __future__ import annotations

import asyncio

import pytest

from burnqed.policy.base import AsyncClosing


class Closable(AsyncClosing):
    def __init__(self) -> None:
        self.closes = 0

    async def close(self) -> None:
        self.closes += 1


def test_async_with_gives_the_object_and_closes_it() -> None:
    async def go() -> Closable:
        async with Closable() as thing:
            assert thing.closes == 0
        return thing

    assert asyncio.run(go()).closes == 1


def test_async_with_closes_on_an_error_and_lets_it_through() -> None:
    thing = Closable()

    async def go() -> None:
        async with thing:
            raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        asyncio.run(go())
    assert thing.closes == 1


def test_close_is_required() -> None:
    class Forgetful(AsyncClosing):
        pass

    with pytest.raises(TypeError, match="abstract"):
        Forgetful()  # type: ignore[abstract]
