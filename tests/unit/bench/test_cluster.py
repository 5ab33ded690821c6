"""The benchmark cluster's size: enough NodePorts for one Service per WebServer."""

from bench.cluster import DEFAULT_NODE_PORTS, BenchCluster, node_port_range_for


def test_the_default_node_port_range_is_kept_while_it_has_room() -> None:
    assert node_port_range_for(100) is None
    assert node_port_range_for(1000) is None
    assert node_port_range_for(DEFAULT_NODE_PORTS - 100) is None


def test_a_run_past_the_default_range_gets_room_for_every_webserver() -> None:
    wide = node_port_range_for(5000)
    assert wide is not None
    first, last = (int(part) for part in wide.split("-"))
    assert first == 30000 and last - first + 1 >= 5000 + 100
    env = BenchCluster(nodes=1, node_port_range=wide)._env()
    assert env["NODE_PORT_RANGE"] == wide
    assert "NODE_PORT_RANGE" not in BenchCluster(nodes=1)._env()
