"""What a question says: its keywords and the time it points at (pure functions)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from lossless.questions import (
    FUNCTION_WORDS,
    STOPWORDS,
    event_offset,
    keywords,
    spans_named,
    time_named,
    time_window,
)

ANCHOR = datetime(2024, 8, 20, 12, tzinfo=UTC)


def test_keywords_drop_question_glue_and_possessives() -> None:
    assert keywords("What did Maya's kids call the dog they adopted?") == ["Maya", "kids", "call", "dog", "adopted"]
    assert keywords("Which file did we change to fix the flaky login test?") == [
        "file",
        "change",
        "fix",
        "flaky",
        "login",
        "test",
    ]
    # Only stopwords: the words are kept, so the question still ranks on something.
    assert keywords("what was it") == ["what", "was", "it"]
    # Non-English words pass through (CJK has no stopword list here).
    assert keywords("备份 失败") == ["备份", "失败"]


def test_a_keyword_search_drops_function_words_only() -> None:
    question = "What tune did Jonas finally get through without mistakes?"
    # the full-text ranker keeps adverbs and verbs ("finally", "get"): for words alone they are evidence
    assert keywords(question, stopwords=FUNCTION_WORDS) == ["tune", "Jonas", "finally", "get", "mistakes"]
    # hybrid drops question glue as well (its meaning side covers it)
    assert keywords(question) == ["tune", "Jonas", "mistakes"]
    assert FUNCTION_WORDS < STOPWORDS and {"finally", "last", "one", "get", "remember"}.isdisjoint(FUNCTION_WORDS)


def test_time_words_are_not_keywords() -> None:
    question = "Which band did Hugo see in April 2023?"
    window = time_window(question, ANCHOR)
    assert window is not None and window.start == datetime(2023, 4, 1, tzinfo=UTC)
    assert keywords(question, window) == ["band", "Hugo", "see"]


def test_months_years_and_relative_expressions() -> None:
    may = time_window("what happened last May", ANCHOR)
    assert may is not None and (may.start, may.end) == (
        datetime(2024, 5, 1, tzinfo=UTC),
        datetime(2024, 6, 1, tzinfo=UTC),
    )
    # A month after the anchor's month without a year is last year's.
    october = time_window("the trip in October", ANCHOR)
    assert october is not None and october.start == datetime(2023, 10, 1, tzinfo=UTC)
    year = time_window("what did we decide in 2023", ANCHOR)
    assert year is not None and (year.start.year, year.end.year) == (2023, 2024)
    ago = time_window("the concert two weeks ago", ANCHOR)
    assert ago is not None and ago.contains(datetime(2024, 8, 6, tzinfo=UTC)) and not ago.contains(ANCHOR)
    last_month = time_window("what did she say last month", ANCHOR)
    assert last_month is not None and last_month.contains(datetime(2024, 7, 25, tzinfo=UTC))
    # "may" the verb is not the month; no expression at all gives None.
    assert time_window("may I ask which dog they adopted", ANCHOR) is None
    assert time_window("which dog did they adopt", ANCHOR) is None


def test_a_named_day_and_spans_next_to_it() -> None:
    def span(question: str) -> tuple[str, str] | None:
        window = time_window(question, ANCHOR)
        return None if window is None else (window.start.date().isoformat(), window.end.date().isoformat())

    # A day, however written: that day, one before (time zones) and three after (told later).
    day = ("2023-10-19", "2023-10-24")
    for question in (
        "What did Melanie do on 20 October 2023?",
        "what happened on October 20, 2023",
        "what did we decide on the 20th of Oct 2023?",
        "which tests failed on 2023-10-20?",
    ):
        assert span(question) == day, question
    # Without a year: the latest such day not after the anchor (20 August 2024).
    assert span("what did we ship on 8 May?") == ("2024-05-07", "2024-05-12")
    assert span("what did we ship on 3 September?") == ("2023-09-02", "2023-09-07")
    # Next to a day: "the week before", "two days after".
    assert span("What did Jon do the week before 9 June 2023?") == ("2023-05-31", "2023-06-10")
    assert span("what broke two days after 5th of March 2024") == ("2024-03-05", "2024-03-09")
    # A span of months; the first month without a year is the one before the last.
    assert span("what did John read between May and July 2023?") == ("2023-05-01", "2023-08-01")
    assert span("what changed between November and February") == ("2023-11-01", "2024-03-01")
    # The date's words are not keywords; the verb "may" and numbers that are no day stay out of it.
    question = "What did Melanie paint on 20 October 2023?"
    assert keywords(question, time_window(question, ANCHOR)) == ["Melanie", "paint"]
    assert time_window("we may 3 times retry the build", ANCHOR) is None
    assert span("the 3 dogs we adopted in May 2023") == ("2023-05-01", "2023-06-01")
    assert span("no such day as 31 June 2023") == ("2023-06-01", "2023-07-01")  # its month, as before


def test_times_relative_to_an_event() -> None:
    before = event_offset("What did Tom buy three weeks before the trip to Kyoto?")
    assert before is not None and (before.days, before.event) == (-21, ("trip", "Kyoto"))
    assert before.words == ("three", "weeks", "before")
    trip = datetime(2024, 5, 22, tzinfo=UTC)
    window = before.window(trip)
    assert window.contains(datetime(2024, 5, 1, tzinfo=UTC)) and not window.contains(trip)
    loose = event_offset("What did Kwame buy ten days or so before the trip to Cork?")
    assert loose is not None and loose.days == -10 and loose.event == ("trip", "Cork")
    after = event_offset("what broke a couple of days after the launch")
    assert after is not None and (after.days, after.event) == (2, ("launch",))
    assert event_offset("Where did Maya go in May?") is None
    assert event_offset("two weeks before the") is None  # no event named


def test_spans_named_are_the_dates_a_text_gives_in_full() -> None:
    def days(text: str) -> list[tuple[str, str]]:
        return [(start.date().isoformat(), end.date().isoformat()) for start, end in spans_named(text)]

    said = "Maya finally bought a proper rain jacket for travelling (said on 13 September 2023)."
    assert days(said) == [("2023-09-13", "2023-09-14")]
    assert days("flew out on 2023-09-12, back on September 20, 2023, moved in October 2023") == [
        ("2023-09-12", "2023-09-13"),
        ("2023-09-20", "2023-09-21"),
        ("2023-10-01", "2023-11-01"),
    ]
    assert days("on 13 May 2023") == [("2023-05-13", "2023-05-14")]
    # No year, a bare year, the verb "may": nothing named in full.
    assert days("back on 12 September, sometime in 2023; we may 2023 times") == []
    assert days("the same day twice: 13 September 2023 and 2023-09-13") == [("2023-09-13", "2023-09-14")]


@given(st.text(max_size=120))
def test_spans_named_never_raise_and_are_ordered_spans(text: str) -> None:
    for start, end in spans_named(text):
        assert start < end and start.tzinfo is UTC


def test_a_named_29_february_keeps_its_words_whatever_year_it_is_asked_in() -> None:
    """Read at the clock, "29 February" was that day in a leap year (after the 29th) and February alone
    otherwise: the words a search drops from the question, so the text it embeds, changed with the date."""
    named = time_named("What did Maya do on 29 February?")
    assert named is not None and named.words == ("29", "february")
    assert time_window("What did Maya do on 29 February?", datetime(2026, 11, 27, tzinfo=UTC)) is not None


_MONTH_NAMES = ["January", "Feb", "February", "March", "May", "June", "Sept", "October", "december"]
_TIMED = st.one_of(
    st.builds(
        lambda day, month, year, before: f"{before}on {day} {month}{year}?",
        st.integers(min_value=1, max_value=31),
        st.sampled_from(_MONTH_NAMES),
        st.sampled_from(["", " 2023", ", 2024"]),
        st.sampled_from(["what did Maya do ", "the week before ", "two days after "]),
    ),
    st.builds(
        lambda month, day: f"what happened {month} {day}th and later",
        st.sampled_from(_MONTH_NAMES),
        st.integers(min_value=1, max_value=31),
    ),
    st.sampled_from(
        ["in May", "last May", "back in March 2022", "in 2023", "last week", "three weeks ago", "between May and July"]
    ).map(lambda when: f"what did Jonas cook {when}?"),
    st.sampled_from(["which dog did they adopt?", "may I ask about the trip?", "two weeks before the trip to Porto"]),
)


@given(
    question=_TIMED,
    anchor=st.datetimes(min_value=datetime(1990, 1, 1), max_value=datetime(2090, 1, 1), timezones=st.just(UTC)),
)
def test_whether_a_question_names_a_time_and_in_which_words_is_the_same_at_any_date(
    question: str, anchor: datetime
) -> None:
    """time_named finds a time wherever the question, read at any anchor, names one; and its words are
    those read at any anchor where every day named exists (a leap year from March on)."""
    named = time_named(question)
    assert (named is None) == (time_window(question, anchor) is None)
    leap = datetime(2028, 3, 1, tzinfo=UTC) + timedelta(days=anchor.timetuple().tm_yday % 300)
    at_leap = time_window(question, leap)
    assert (named and named.words) == (at_leap and at_leap.words)
