"""Chart pages load faster on a first visit (issue 42 item 10): the vendored Plotly is a partial
bundle (the trace types the pages draw), sent gzip-compressed (once per process, not per request);
pages name it and the stylesheet with their content hash and those URLs are cached for a year;
pages, scripts and JSON views are compressed for any client that accepts it; a client that does
not gets the plain bytes."""

from __future__ import annotations

import re

from tests.platform.test_api import make_client


def test_plotly_and_the_views_are_sent_compressed(tmp_path):
    from ptmlab.api.routes.pages import plotly_js_path

    plain = plotly_js_path().read_bytes()
    assert len(plain) < 2_000_000, "the full 4.8 MB bundle is vendored, not the partial one"
    with make_client(tmp_path) as client:
        raw = client.get("/static/vendor/plotly.min.js", headers={"accept-encoding": "gzip, br"})
        assert raw.headers["content-encoding"] == "gzip" and "max-age=300" in raw.headers["cache-control"]
        assert int(raw.headers["content-length"]) < len(plain) / 2.5 and raw.content == plain
        identity = client.get("/static/vendor/plotly.min.js", headers={"accept-encoding": "identity"})
        assert "content-encoding" not in identity.headers and identity.content == plain
        for path in ("/runs", "/static/js/runs.js", "/api/v1/views/overview"):
            response = client.get(path, headers={"accept-encoding": "gzip"})
            assert response.status_code == 200
            if len(response.content) >= 1024:
                assert response.headers["content-encoding"] == "gzip", path


def test_pages_name_plotly_and_the_stylesheet_by_content_hash(tmp_path):
    with make_client(tmp_path) as client:
        html = client.get("/compression").text
        plotly_url = re.search(r'src="(/static/vendor/plotly\.min\.js\?v=[0-9a-f]{12})"', html).group(1)
        css_url = re.search(r'href="(/static/css/dashboard\.css\?v=[0-9a-f]{12})"', html).group(1)
        for url in (plotly_url, css_url):
            cached = client.get(url)
            assert cached.status_code == 200 and "max-age=31536000" in cached.headers["cache-control"], url
        # a stale hash (the copy before a release) is not promised for a year
        assert "max-age=300" in client.get("/static/css/dashboard.css?v=000000000000").headers["cache-control"]
