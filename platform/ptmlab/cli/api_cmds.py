"""`ptmlab serve`: the REST API under uvicorn, 127.0.0.1 by default."""

from __future__ import annotations

import argparse

from ptmlab.errors import AuthError


def _cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from ptmlab.api.app import create_app
    from ptmlab.settings import get_settings

    settings = get_settings()
    host = args.host or settings.bind_host
    if not settings.api_token and not args.insecure and not is_loopback(host):
        raise AuthError(f"refusing to serve on {host} without a token: anyone who reaches it could queue jobs "
                        f"on your workers; set PTMLAB_API_TOKEN, bind 127.0.0.1, or pass --insecure")
    app = create_app(settings)  # migrates before the port opens
    uvicorn.run(app, host=host, port=args.port or settings.bind_port, log_level=args.log_level)
    return 0


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 and `localhost`; 0.0.0.0 / :: (every interface) and names are not."""
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="the REST API (uvicorn): ptmlab serve --port 8765")
    p.add_argument("--host", default=None, help="default: PTMLAB_BIND_HOST (127.0.0.1)")
    p.add_argument("--port", type=int, default=None, help="default: PTMLAB_BIND_PORT (8765)")
    p.add_argument("--log-level", default="info")
    p.add_argument("--insecure", action="store_true",
                   help="allow a non-loopback address without PTMLAB_API_TOKEN (anyone who reaches it can queue jobs)")
    p.set_defaults(func=_cmd_serve)
