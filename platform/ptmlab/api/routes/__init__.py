"""API routers, one per resource; mounted under /api/v1 by ptmlab.api.app."""
