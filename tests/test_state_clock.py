from __future__ import annotations

from pytest_fwloop.core.machine.state_clock import StateClock


class Now:
    def __init__(self) -> None:
        self.t = 50.0

    def __call__(self) -> float:
        return self.t


def test_remaining_counts_down_to_zero_and_never_below() -> None:
    now = Now()
    clock = StateClock(now)
    clock.start(10)
    now.t += 4
    assert clock.remaining() == 6
    assert not clock.expired()
    now.t += 7
    assert clock.remaining() == 0
    assert clock.expired()


def test_each_start_gives_a_fresh_deadline() -> None:
    now = Now()
    clock = StateClock(now)
    clock.start(1)
    now.t += 5
    clock.start(3)
    assert clock.remaining() == 3
    assert clock.limit == 3


def test_paused_time_does_not_count() -> None:
    now = Now()
    clock = StateClock(now)
    clock.start(10)
    with clock.paused():
        now.t += 500  # the operator thinks it over
    now.t += 2
    assert clock.remaining() == 8


def test_a_clock_never_started_has_no_deadline() -> None:
    assert not StateClock().expired()
