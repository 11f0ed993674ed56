from bench.ingest_at_size import LATER_YEARS, later_sessions
from bench.scale import synthetic_sessions


def test_later_sessions_are_the_synthetic_ones_after_every_filled_session() -> None:
    # the added sessions must not collide with the filled space's ids or order, and their
    # sessions start after its last one (the days their texts name are left as they are)
    filled = synthetic_sessions(600, 7)
    later = later_sessions(600, 7)
    assert [s.turns for s in later] == [s.turns for s in filled]
    assert not {s.session_id for s in later} & {s.session_id for s in filled}
    assert min(s.seq or 0 for s in later) > max(s.seq or 0 for s in filled)
    assert min(s.started_at for s in later) > max(s.started_at for s in filled)
    first, again = filled[0], later[0]
    assert again.started_at.year == first.started_at.year + LATER_YEARS
    assert again.started_at.replace(year=first.started_at.year) == first.started_at
