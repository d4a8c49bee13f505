"""`ptmlab serve`: the REST API under uvicorn, 127.0.0.1 by default."""

from __future__ import annotations

import argparse

from ptmlab.errors import AuthError
from ptmlab.settings import is_loopback

# uvicorn's limits for slow or greedy clients: an idle kept-alive connection closes after
# KEEP_ALIVE_S, a request's headers may not exceed MAX_HEADER_BYTES (h11's own default, stated), and
# a whole request must arrive within PTMLAB_API_READ_TIMEOUT_S (request_guard.ReadDeadlineProtocol).
KEEP_ALIVE_S = 5
MAX_HEADER_BYTES = 16 * 1024


def _cmd_serve(args: argparse.Namespace) -> int:
    from ptmlab.settings import get_settings

    settings = get_settings()  # checked by ptmlab.cli.main before the API's modules read them at import
    import uvicorn

    from ptmlab.api.app import create_app
    from ptmlab.api.request_guard import read_deadline_protocol

    host = args.host or settings.bind_host
    if not settings.api_token and not args.insecure and not is_loopback(host):
        raise AuthError(
            f"refusing to serve on {host} without a token: anyone who reaches it could queue jobs "
            f"on your workers; set PTMLAB_API_TOKEN, bind 127.0.0.1, or pass --insecure"
        )
    # The app's Host allowlist and read protection follow the address actually bound.
    settings = settings.model_copy(update={"bind_host": host})
    app = create_app(settings)  # migrates before the port opens
    # `http=` a class: uvicorn's h11 protocol with a read deadline (also where httptools is installed).
    uvicorn.run(
        app,
        host=host,
        port=args.port or settings.bind_port,
        log_level=args.log_level,
        http=read_deadline_protocol(settings.api_read_timeout_s),
        timeout_keep_alive=KEEP_ALIVE_S,
        h11_max_incomplete_event_size=MAX_HEADER_BYTES,
        limit_concurrency=settings.api_max_connections,
    )
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="the REST API (uvicorn): ptmlab serve --port 8765")
    p.add_argument("--host", default=None, help="default: PTMLAB_BIND_HOST (127.0.0.1)")
    p.add_argument("--port", type=int, default=None, help="default: PTMLAB_BIND_PORT (8765)")
    p.add_argument("--log-level", default="info")
    p.add_argument(
        "--insecure",
        action="store_true",
        help="allow a non-loopback address without PTMLAB_API_TOKEN (anyone who reaches it can queue jobs)",
    )
    p.set_defaults(func=_cmd_serve)
