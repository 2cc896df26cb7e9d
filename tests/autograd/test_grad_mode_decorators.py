"""no_grad / enable_grad / set_grad_enabled as decorators of generators, async generators and
coroutines: the mode holds at every resume and never leaks (Note [Grad mode at every resume])."""

from __future__ import annotations

import asyncio
import warnings

import pytest

import asyncgrad as ag


def _modes_of_a_generator(lib, decorator):
    """What the generator's body and its consumer see, step by step (send, throw, close)."""
    seen = []

    @decorator
    def gen(n):
        try:
            for i in range(n):
                seen.append(("body", i, lib.is_grad_enabled()))
                try:
                    received = yield i
                except ValueError:
                    seen.append(("caught", lib.is_grad_enabled()))
                    received = "thrown"
                seen.append(("received", received, lib.is_grad_enabled()))
        finally:
            seen.append(("finally", lib.is_grad_enabled()))
        return "done"

    g = gen(4)
    seen.append(("consumer", next(g), lib.is_grad_enabled()))
    seen.append(("consumer", g.send("hello"), lib.is_grad_enabled()))
    seen.append(("consumer", g.throw(ValueError("x")), lib.is_grad_enabled()))
    g.close()
    seen.append(("closed", lib.is_grad_enabled()))
    g2 = gen(1)
    next(g2)
    with pytest.raises(StopIteration) as stop:
        next(g2)
    seen.append(("returned", stop.value.value))
    return seen


@pytest.mark.parametrize("name", ["no_grad", "enable_grad", "set_grad_enabled_false", "set_grad_enabled_true"])
@pytest.mark.parametrize("outer", [True, False])
def test_generator_mode_at_every_resume_is_torchs(torch, name, outer):
    def decorator_of(lib):
        return {"no_grad": lambda: lib.no_grad(), "enable_grad": lambda: lib.enable_grad(),
                "set_grad_enabled_false": lambda: lib.set_grad_enabled(False),
                "set_grad_enabled_true": lambda: lib.set_grad_enabled(True)}[name]()

    with ag.set_grad_enabled(outer):
        mine = _modes_of_a_generator(ag, decorator_of(ag))
        assert ag.is_grad_enabled() == outer
    with torch.set_grad_enabled(outer):
        theirs = _modes_of_a_generator(torch, decorator_of(torch))
    assert mine == theirs
    inner = name in ("enable_grad", "set_grad_enabled_true")
    assert ("body", 0, inner) in mine and ("consumer", 0, outer) in mine and ("finally", inner) in mine


def test_generator_records_nothing_under_no_grad():
    x = ag.tensor([1.0, 2.0], requires_grad=True)

    @ag.no_grad()
    def doubles():
        while True:
            yield x * 2

    g = doubles()
    assert not next(g).requires_grad
    assert (x * 2).requires_grad  # the consumer's mode, between resumes
    assert not next(g).requires_grad


def test_decorator_without_parentheses_is_torchs(torch):
    @ag.no_grad
    def f(x):
        return x * 2, ag.is_grad_enabled()

    @torch.no_grad
    def tf(x):
        return x * 2, torch.is_grad_enabled()

    out, enabled = f(ag.tensor([1.0], requires_grad=True))
    tout, tenabled = tf(torch.tensor([1.0], requires_grad=True))
    assert (out.requires_grad, enabled) == (tout.requires_grad, tenabled) == (False, False)
    assert f.__name__ == "f"

    @ag.enable_grad
    def g():
        return ag.is_grad_enabled()

    with ag.no_grad():
        assert g() is True


def test_decorating_a_class_warns_as_torch(torch):
    def decorate(lib):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")

            class Thing:
                def __init__(self):
                    self.enabled = lib.is_grad_enabled()

            made = lib.no_grad()(Thing)
        return caught, made

    mine, made = decorate(ag)
    theirs, tmade = decorate(torch)
    assert [(w.category, str(w.message)) for w in mine] == [(w.category, str(w.message)) for w in theirs]
    assert mine[0].category is FutureWarning and mine[0].filename == __file__
    assert made().enabled is False and tmade().enabled is False


async def test_async_generator_mode_at_every_resume_with_interleaved_tasks():
    log = []

    @ag.no_grad()
    async def off(n):
        for i in range(n):
            log.append(("off body", i, ag.is_grad_enabled()))
            await asyncio.sleep(0)  # another task runs here
            log.append(("off after await", i, ag.is_grad_enabled()))
            yield i

    @ag.enable_grad()
    async def on(n):
        for i in range(n):
            log.append(("on body", i, ag.is_grad_enabled()))
            await asyncio.sleep(0)
            log.append(("on after await", i, ag.is_grad_enabled()))
            yield i

    async def consume(gen, tag, mode):
        with ag.set_grad_enabled(mode):
            async for i in gen:
                log.append((tag, i, ag.is_grad_enabled()))
                await asyncio.sleep(0)

    await asyncio.gather(consume(off(3), "off consumer", True), consume(on(3), "on consumer", False))
    assert ag.is_grad_enabled()
    for entry in log:
        expected = {"off body": False, "off after await": False, "on body": True, "on after await": True,
                    "off consumer": True, "on consumer": False}[entry[0]]
        assert entry[2] is expected, entry
    assert len(log) == 18


async def test_async_generator_asend_athrow_aclose():
    seen = []

    @ag.no_grad()
    async def gen():
        try:
            while True:
                try:
                    got = yield ag.is_grad_enabled()
                    seen.append(("got", got, ag.is_grad_enabled()))
                except KeyError:
                    seen.append(("caught", ag.is_grad_enabled()))
        finally:
            seen.append(("finally", ag.is_grad_enabled()))

    g = gen()
    assert await g.asend(None) is False
    assert await g.asend("a") is False and ag.is_grad_enabled()
    assert await g.athrow(KeyError("k")) is False
    await g.aclose()
    assert seen == [("got", "a", False), ("caught", False), ("finally", False)]
    assert ag.is_grad_enabled()


async def test_coroutines_keep_their_mode_across_awaits_with_interleaved_tasks():
    log = []
    x = ag.tensor([1.0], requires_grad=True)

    @ag.no_grad()
    async def off(tag):
        for _ in range(3):
            log.append((tag, ag.is_grad_enabled(), (x * 2).requires_grad))
            await asyncio.sleep(0)
        return tag

    @ag.set_grad_enabled(True)
    async def on(tag):
        for _ in range(3):
            log.append((tag, ag.is_grad_enabled(), (x * 2).requires_grad))
            await asyncio.sleep(0)
        return tag

    async def plain(tag):
        for _ in range(3):
            log.append((tag, ag.is_grad_enabled(), (x * 2).requires_grad))
            await asyncio.sleep(0)

    with ag.no_grad():
        results = await asyncio.gather(off("off"), on("on"), plain("plain, started under no_grad"), off("off2"))
    assert results[:2] == ["off", "on"]
    await plain("plain after")
    expected = {"off": False, "off2": False, "on": True, "plain, started under no_grad": False, "plain after": True}
    assert all(enabled is expected[tag] and recorded is expected[tag] for tag, enabled, recorded in log), log
    # awaited directly in this task: the mode holds inside and is restored after
    assert await off("direct") == "direct" and ag.is_grad_enabled()
