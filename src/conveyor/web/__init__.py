"""The web app: server-rendered pages (Jinja2) and a small script, served by ``conveyor serve``.

Public surface::

    create_app      the API plus the pages at ``/`` (conveyor.web.app)
"""

from conveyor.web.app import create_app

__all__ = ["create_app"]
