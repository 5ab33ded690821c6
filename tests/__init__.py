"""Test suite of webserver-operator."""
