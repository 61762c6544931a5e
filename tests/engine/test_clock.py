"""The training clock that the CLI's progress line and the Train tab share: h:mm:ss and the time left."""

from attnviz.engine.training.clock import format_clock, format_left, remaining_seconds


def test_the_clock_reads_hours_minutes_seconds():
    assert format_clock(0) == "0:00:00"
    assert format_clock(59.9) == "0:00:59"  # whole seconds, never rounded up past what has passed
    assert format_clock(3725) == "1:02:05"
    assert format_clock(100 * 3600 + 61) == "100:01:01"  # hours are not wrapped at a day
    assert format_clock(-5) == "0:00:00"


def test_the_time_left_is_the_mean_pace_times_the_steps_left():
    assert remaining_seconds(10.0, 5, 20) == 40.0
    assert remaining_seconds(0.0, 0, 7) == 0.0  # no step timed yet: no estimate, not a division by zero
    assert remaining_seconds(3.0, 3, 0) == 0.0


def test_the_time_left_reads_as_a_duration_not_a_time_of_day():
    assert format_left(45.7) == "45 s left"
    assert format_left(725) == "12 min 05 s left"
    assert format_left(3725) == "1 h 02 min left"  # seconds are noise at an hour's estimate
    assert format_left(100 * 3600) == "100 h 00 min left"
    assert format_left(-3) == "0 s left"
