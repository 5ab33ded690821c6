"""The outside view of the operator, shared by the tests' support code, the benchmark and the chaos harness.

Why one package: all three judge the operator from outside, the way a user or the API server sees it, and each once
carried its own copy of the same pieces. Here they exist once: the repository and tool paths (``paths``), a small
admin API client (``kubeapi``), the API server's audit log (``audit``), the operator run as a process (``process``,
``operator``) and the plain HTTP GET of its probes and metrics (``scrape``).

It never imports ``webserver_operator``: a bug in the operator's own client or settings must not hide in the code
that measures it. Development only: the wheel ships ``webserver_operator`` alone and the image never holds this.
"""
