"""The REST API of the platform (FastAPI): `from ptmlab.api.app import create_app`."""
