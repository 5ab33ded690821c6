"""The benchmark (`make bench`): this operator against the API server's own limit and two peers, measured alike.

Entry point ``python -m bench`` (bench/__main__.py); bench/README.md describes the method and the findings.
"""
