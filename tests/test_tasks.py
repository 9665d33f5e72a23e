"""broker/tasks.spawn: a background task is held until it ends, and how it failed is logged."""

from __future__ import annotations

import asyncio
import gc
import logging

import pytest

from pyspark_logsource.broker import tasks


def test_a_spawned_task_nobody_holds_survives_garbage_collection():
    async def main():
        done = asyncio.Event()

        async def work():
            await asyncio.sleep(0.05)
            done.set()

        before = tasks.running()
        tasks.spawn(work(), name="unheld")  # the caller drops the task at once
        gc.collect()
        assert tasks.running() == before + 1
        await asyncio.wait_for(done.wait(), 5)
        await asyncio.sleep(0)  # the done callback runs on the next turn
        assert tasks.running() == before

    asyncio.run(main())


def test_the_exception_a_task_ends_with_is_logged_with_its_name_and_a_cancellation_is_not(caplog):
    async def fail():
        raise ValueError("boom")

    async def main():
        t = tasks.spawn(fail(), name="failing-task")
        await asyncio.wait([t])
        c = tasks.spawn(asyncio.sleep(60), name="cancelled-task")
        await asyncio.sleep(0)
        c.cancel()
        await asyncio.wait([c])
        await asyncio.sleep(0)

    with caplog.at_level(logging.ERROR, logger="pyspark_logsource.broker.tasks"):
        asyncio.run(main())
    failed = [r for r in caplog.records if r.name == "pyspark_logsource.broker.tasks"]
    assert len(failed) == 1 and "failing-task" in failed[0].getMessage()
    assert failed[0].exc_info[0] is ValueError


def test_spawn_without_a_running_loop_raises_and_with_a_given_loop_runs_there():
    async def noop():
        return 1

    coro = noop()
    with pytest.raises(RuntimeError):
        tasks.spawn(coro)
    coro.close()
    loop = asyncio.new_event_loop()
    try:
        t = tasks.spawn(noop(), name="on-given-loop", loop=loop)
        assert loop.run_until_complete(t) == 1
    finally:
        loop.close()
