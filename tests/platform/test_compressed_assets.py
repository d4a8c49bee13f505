"""Chart pages load faster on a first visit (issue 42 item 10): Plotly's 4.8 MB bundle is sent
gzip-compressed (once per process, not per request) with a long cache lifetime, and pages, scripts
and JSON views are compressed for any client that accepts it; a client that does not gets the
plain bytes."""

from __future__ import annotations


from tests.platform.test_api import make_client


def test_plotly_and_the_views_are_sent_compressed(tmp_path):
    from ptmlab.api.routes.pages import plotly_js_path

    plain = plotly_js_path().read_bytes()
    with make_client(tmp_path) as client:
        raw = client.get("/static/vendor/plotly.min.js", headers={"accept-encoding": "gzip, br"})
        assert raw.headers["content-encoding"] == "gzip" and "max-age=86400" in raw.headers["cache-control"]
        assert int(raw.headers["content-length"]) < len(plain) / 3 and raw.content == plain
        identity = client.get("/static/vendor/plotly.min.js", headers={"accept-encoding": "identity"})
        assert "content-encoding" not in identity.headers and identity.content == plain
        for path in ("/runs", "/static/js/runs.js", "/api/v1/views/overview"):
            response = client.get(path, headers={"accept-encoding": "gzip"})
            assert response.status_code == 200
            if len(response.content) >= 1024:
                assert response.headers["content-encoding"] == "gzip", path
