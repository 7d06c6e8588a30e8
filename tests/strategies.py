"""Hypothesis strategies for wire messages (shared by tests)."""

from __future__ import annotations

from hypothesis import strategies as st

from locpriv.errors import ErrorCode
from locpriv.wire import messages as m

lat = st.floats(min_value=-90, max_value=90, allow_nan=False)
lon = st.floats(min_value=-180, max_value=180, allow_nan=False)
seconds = st.floats(min_value=0, max_value=4e9, allow_nan=False)
metres = st.floats(min_value=0, max_value=1e6, allow_nan=False)
ident = st.from_regex(r"[A-Za-z0-9_.:@-]{1,20}", fullmatch=True)
corr = st.from_regex(r"[A-Za-z0-9_.:-]{1,20}", fullmatch=True)
topic = st.from_regex(r"[a-z]{1,8}(/[a-z0-9_-]{1,8}){0,3}", fullmatch=True)
periods = st.integers(0, 2**40)
b64 = st.from_regex(r"[A-Za-z0-9_-]{1,40}", fullmatch=True)
category = st.from_regex(r"[a-z0-9_-]{1,12}", fullmatch=True)


@st.composite
def profiles(draw: st.DrawFn) -> m.PrivacyProfile:
    a_min = draw(st.floats(min_value=0, max_value=1e8, allow_nan=False))
    a_max = draw(st.floats(min_value=a_min + 1.0, max_value=a_min + 1e9, allow_nan=False))
    return m.PrivacyProfile(
        k=draw(st.integers(1, 10_000)),
        a_min_m2=a_min,
        a_max_m2=a_max,
        max_delay_s=draw(st.floats(0, 3600, allow_nan=False)),
    )


@st.composite
def regions(draw: st.DrawFn) -> m.Region:
    pts = draw(st.lists(st.tuples(lon, lat), min_size=3, max_size=8, unique=True))
    return m.Region(ring=pts)


queries = st.one_of(
    st.builds(m.NearestQuery, category=category, n=st.integers(1, 100)),
    st.builds(
        m.WithinQuery,
        category=st.none() | category,
        radius_m=st.floats(min_value=0.5, max_value=100_000, allow_nan=False),
    ),
)
ds_locations = st.one_of(
    st.builds(m.PointLocation, lat=lat, lon=lon),
    st.builds(m.RegionLocation, region=regions()),
    st.builds(
        m.CentroidLocation,
        lat=lat,
        lon=lon,
        radius_m=st.floats(min_value=0, max_value=100_000, allow_nan=False),
    ),
)
pois = st.builds(m.POI, id=ident, category=category, lat=lat, lon=lon, name=st.text(max_size=20))


@st.composite
def cloak_requests(draw: st.DrawFn) -> m.CloakRequest:
    has_pos = draw(st.booleans())
    return m.CloakRequest(
        correlation_id=draw(corr),
        reply_to=draw(topic),
        user_id=draw(ident),
        lat=draw(lat) if has_pos else None,
        lon=draw(lon) if has_pos else None,
        profile=draw(st.none() | profiles()),
    )


messages: st.SearchStrategy[m.Message] = st.one_of(
    st.builds(
        m.LocationUpdate,
        user_id=ident,
        lat=lat,
        lon=lon,
        t=seconds,
        accuracy_m=st.none() | metres,
    ),
    st.builds(
        m.LocationLeave,
        user_id=ident,
        tile=st.builds("t{}_{}".format, st.integers(-(10**9) + 1, 10**9 - 1), st.integers(-9, 9)),
        t=seconds,
    ),
    cloak_requests(),
    st.builds(
        m.CloakReply,
        correlation_id=corr,
        region=regions(),
        area_m2=metres,
        users=st.integers(1, 1000),
        t1=seconds,
        t2=seconds,
    ),
    st.builds(
        m.QueryRequest,
        correlation_id=corr,
        reply_to=topic,
        user_id=ident,
        protocol=st.sampled_from([1, 2]),
        lat=lat,
        lon=lon,
        query=queries,
        profile=st.none() | profiles(),
        attributes=st.dictionaries(ident, st.integers() | st.text(max_size=5), max_size=3),
    ),
    st.builds(
        m.QueryAnswer,
        correlation_id=corr,
        pois=st.lists(pois, max_size=4),
        candidates=st.booleans(),
        region=st.none() | regions(),
        area_m2=st.none() | metres,
        t1=st.none() | seconds,
        t2=st.none() | seconds,
    ),
    st.builds(m.DSQuery, correlation_id=corr, reply_to=topic, query=queries, location=ds_locations),
    st.builds(
        m.PeerRequest,
        correlation_id=corr,
        reply_to=topic,
        requester=ident,
        lat=lat,
        lon=lon,
        t=seconds,
        max_distance_m=st.none() | st.floats(0, 100_000, allow_nan=False),
    ),
    st.builds(
        m.PeerReply,
        correlation_id=corr,
        responder=ident,
        lat=lat,
        lon=lon,
        t=seconds,
        period=st.none() | periods,
        token=st.none() | b64,
        proof=st.none() | b64,
    ),
    st.builds(
        m.IssueRequest,
        correlation_id=corr,
        reply_to=topic,
        user_id=ident,
        period=periods,
        blinded_msg=b64,
    ),
    st.builds(m.IssueAnswer, correlation_id=corr, period=periods, blind_sig=b64),
    st.builds(m.FixWanted, within_s=st.floats(0.0, 60.0, allow_nan=False)),
    st.builds(
        m.IssuerKeys,
        period_s=st.floats(1.0, 1e6, allow_nan=False),
        per_login=st.integers(1, 1000),
        keys=st.lists(
            st.builds(m.IssuerKey, period=periods, n=b64, e=st.integers(3, 2**32)),
            min_size=1,
            max_size=4,
        ),
    ),
    st.builds(
        m.ErrorReply,
        correlation_id=st.none() | corr,
        code=st.sampled_from(list(ErrorCode)),
        reason=st.text(max_size=50),
        field=st.none() | st.text(max_size=10),
    ),
    st.builds(
        m.DeploymentConfig,
        lat0_deg=lat,
        lon0_deg=lon,
        tile_m=st.none() | st.floats(1.0, 1e7, allow_nan=False),
    ),
)
