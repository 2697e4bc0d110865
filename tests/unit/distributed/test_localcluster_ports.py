"""LocalCluster's port draw: Ray refuses a start whose components share a port, and
ports released one at a time can be handed out twice by the kernel (a CI failure)."""

from posttrain.distributed.localcluster import _free_ports


def test_ports_drawn_together_are_distinct():
    ports = _free_ports(64, set())
    assert len(set(ports)) == 64


def test_ports_already_taken_are_never_handed_out_again():
    taken: set[int] = set()
    first = _free_ports(8, taken)
    later = [p for _ in range(20) for p in _free_ports(4, taken)]
    assert not set(first) & set(later)
    assert len(set(later)) == len(later)
