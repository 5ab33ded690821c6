"""webserver-operator: keeps a Deployment and a NodePort Service in line with each WebServer custom resource."""

__version__ = "0.1.0"
