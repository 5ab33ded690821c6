"""The chaos harness: real faults on the local control plane, verdicts from the API server's audit log and state.

Why a harness of its own (and not more integration tests): the failure modes it looks for (lost updates, retry
storms, two leaders, adopted foreign objects) only show under sustained churn while etcd, the API server, the network
and the operator processes themselves misbehave, and they are judged from outside the operator: what the API server
recorded (``hack/audit-policy.yaml`` records every request of the ServiceAccounts the operators run as) and what
``kubectl get`` would show. The operator's own logs and metrics are never used for a verdict; its stderr is only
scanned for tracebacks.

Run by ``make chaos`` (``python -m chaos``, the full run: 200 WebServers, every fault, ``docs/reliability.md``) and by
``tests/integration/test_chaos_short.py`` (20 WebServers, three faults, ``make chaos-short``). Its admin API client,
audit-log reader and process runner are the shared ``harness`` package's. Modules, bottom up: ``controlplane``
(etcd/kube-apiserver processes), ``toxiproxy`` (asyncio client of the TCP-fault proxy) and ``toxiserver`` (its
process), ``identity`` (ServiceAccounts, RBAC, API Priority and Fairness), ``replica`` (operator processes),
``workload`` (the churn), ``observe`` (cluster state), ``verdicts`` (figures and pass/fail), ``fencing`` (the
zero-slack Lease-expiry rule), ``faults`` and ``trust`` (the faults with their own verdicts), ``shards``,
``shardverdicts`` and ``shardfaults`` (the sharded run of ``--shards``: each namespace's shard, the per-shard Lease
verdicts, the sharded faults), ``failure`` (harness failures), ``scenario`` (the run) and ``report`` (the Markdown
tables).
"""
