"""webserver-operator: keeps a Deployment and a NodePort Service in line with each WebServer custom resource.

Imported by every layer for ``__version__`` (the user agent, the image label, ``version``).
"""

__all__ = ["__version__"]

__version__ = "0.1.0"
