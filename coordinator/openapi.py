"""The OpenAPI 3 document of the HTTP API (placeholder; being written)."""

DOCUMENT: dict = {"openapi": "3.0.3", "info": {"title": "worker coordinator", "version": "1"}, "paths": {}}
