"""``warm_planner``: Spark's planner is warmed on a thread of its own, and a failure there never
reaches the export (the query plans without it)."""

from __future__ import annotations

import logging
import threading

from blockgz.sink.session import warm_planner


class _Plan:
    def __init__(self, calls: list[str], fail: bool):
        self.calls, self.fail = calls, fail

    def queryExecution(self):  # the JVM method's name
        return self

    def executedPlan(self):  # the JVM method's name
        if self.fail:
            raise RuntimeError("the session stopped under it")
        self.calls.append(threading.current_thread().name)
        return "plan"


class _Frame:
    def __init__(self, calls: list[str], fail: bool):
        self._jdf = _Plan(calls, fail)

    def select(self, *columns: str) -> _Frame:
        assert columns == ("id",)
        return self


class _Session:
    """As much of a SparkSession as ``warm_planner`` touches: ``range(1).select("id")``."""

    def __init__(self, *, fail: bool = False):
        self.calls: list[str] = []
        self.fail = fail

    def range(self, n: int) -> _Frame:
        assert n == 1
        return _Frame(self.calls, self.fail)


def test_the_plan_is_made_on_a_thread_of_its_own_that_does_not_keep_the_process_alive():
    spark = _Session()
    thread = warm_planner(spark)
    thread.join(timeout=10)
    assert not thread.is_alive() and thread.daemon
    assert spark.calls == ["blockgz-warm-planner"]  # planned once, not on the caller's thread
    assert thread is not threading.current_thread()


def test_a_failing_warm_up_is_logged_at_debug_and_raises_nothing(caplog):
    spark = _Session(fail=True)
    with caplog.at_level(logging.DEBUG, logger="blockgz.sink.session"):
        warm_planner(spark).join(timeout=10)
    assert spark.calls == []
    [record] = [r for r in caplog.records if r.name == "blockgz.sink.session"]
    assert record.levelno == logging.DEBUG and "warming Spark's planner failed" in record.message
    assert record.exc_info is not None and "stopped under it" in str(record.exc_info[1])
