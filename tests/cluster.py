"""A real Redis Cluster for tests: nodes started from the server binary on free ports, joined and given
their slots and replicas with plain cluster commands (no ``redis-cli`` needed), and helpers that pick
names by the slot they hash to (never by chance), kill a master as ``kill -9`` would and pause a replica."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import redis
from redis.crc import key_slot

from gateway.redis.server import EmbeddedRedis
from tests.ports import free_cluster_port

SLOTS = 16_384


@dataclass(frozen=True, slots=True)
class Node:
    port: int
    node_id: str
    server: EmbeddedRedis

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=5, decode_responses=True)


@dataclass(frozen=True, slots=True)
class Cluster:
    masters: tuple[Node, ...]
    replicas: tuple[Node, ...]
    ranges: tuple[tuple[int, int], ...]
    """The slots each master was given, in the order of ``masters``."""

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.masters[0].port}/0"

    def master_of(self, slot: int) -> Node:
        for node, (low, high) in zip(self.masters, self.ranges, strict=True):
            if low <= slot <= high:
                return node
        raise ValueError(f"slot {slot} out of range")

    def kill(self, node: Node) -> None:
        """``kill -9`` the node's server: no shutdown, no last write."""
        with node.client() as client:
            pid = int(client.info("server")["process_id"])
        os.kill(pid, signal.SIGKILL)

    def replica_of(self, master: Node) -> Node:
        """The replica ``redis_cluster`` gave ``master`` (the first, with several)."""
        return self.replicas[self.masters.index(master)]

    @contextmanager
    def paused(self, node: Node, *, cut_from: Node | None = None) -> Iterator[None]:
        """The node's server stopped (``SIGSTOP``: alive, answering nobody, acknowledging no replication)
        until the block ends. ``cut_from``: its master, which then drops the replication link, so that
        nothing written meanwhile waits for the replica in its socket (as when the link is lost)."""
        with node.client() as client:
            pid = int(client.info("server")["process_id"])
        os.kill(pid, signal.SIGSTOP)
        try:
            if cut_from is not None:
                with cut_from.client() as client:
                    client.execute_command("CLIENT", "KILL", "TYPE", "replica")
            yield
        finally:
            os.kill(pid, signal.SIGCONT)

    def set_node_timeout(self, milliseconds: int, *, without: Sequence[Node] = ()) -> None:
        """``cluster-node-timeout`` on every node but ``without`` (one paused or dead would not answer):
        how long a node may stay silent before the others take it for failed."""
        for node in (*self.masters, *self.replicas):
            if node not in without:
                with node.client() as client:
                    client.config_set("cluster-node-timeout", milliseconds)

    def wait_healthy(self, *, without: Sequence[Node] = (), timeout: float = 60.0) -> None:
        """Until every live node says ``cluster_state:ok`` and sees every slot served."""
        alive = [node for node in (*self.masters, *self.replicas) if node not in without]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(_healthy(node) for node in alive):
                return
            time.sleep(0.1)
        raise RuntimeError("the cluster did not become healthy")


def _healthy(node: Node) -> bool:
    try:
        with node.client() as client:
            info = client.execute_command("CLUSTER", "INFO")
    except redis.RedisError:
        return False
    text = info if isinstance(info, str) else str(info)
    return "cluster_state:ok" in text and "cluster_slots_ok:16384" in text


@contextmanager
def redis_cluster(
    root: Path, *, masters: int = 3, replicas_per_master: int = 0, node_timeout_ms: int = 1_000
) -> Iterator[Cluster]:
    """A cluster of ``masters`` masters, each with ``replicas_per_master`` replicas, ready for writes."""
    with ExitStack() as stack:
        nodes: list[Node] = []
        for _ in range(masters * (1 + replicas_per_master)):
            port = free_cluster_port()
            server = EmbeddedRedis(root / str(port), port=port, persist=False, cluster=True)
            stack.enter_context(server)
            with redis.Redis(port=port, decode_responses=True) as client:
                client.config_set("cluster-node-timeout", node_timeout_ms)
                node_id = str(client.execute_command("CLUSTER", "MYID"))
            nodes.append(Node(port, node_id, server))
        first, rest = nodes[0], nodes[1:]
        with first.client() as client:
            for node in rest:
                client.execute_command("CLUSTER", "MEET", "127.0.0.1", node.port)
        ranges = _ranges(masters)
        for node, (low, high) in zip(nodes[:masters], ranges, strict=True):
            with node.client() as client:
                client.execute_command("CLUSTER", "ADDSLOTS", *range(low, high + 1))
        _wait_all_known(nodes)
        for position, node in enumerate(nodes[masters:]):
            master = nodes[position % masters]
            with node.client() as client:
                client.execute_command("CLUSTER", "REPLICATE", master.node_id)
        cluster = Cluster(tuple(nodes[:masters]), tuple(nodes[masters:]), tuple(ranges))
        cluster.wait_healthy()
        _wait_replicas_listed(cluster, replicas_per_master)
        yield cluster


def _ranges(masters: int) -> list[tuple[int, int]]:
    size = SLOTS // masters
    return [(n * size, SLOTS - 1 if n == masters - 1 else (n + 1) * size - 1) for n in range(masters)]


def _wait_all_known(nodes: Sequence[Node], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        known = []
        for node in nodes:
            with node.client() as client:
                lines = str(client.execute_command("CLUSTER", "NODES")).strip().splitlines()
            known.append(sum(1 for line in lines if "connected" in line.split()))
        if all(count == len(nodes) for count in known):
            return
        time.sleep(0.05)
    raise RuntimeError("the cluster's nodes did not all meet")


def _wait_replicas_listed(cluster: Cluster, replicas: int, timeout: float = 30.0) -> None:
    """Until every node's ``CLUSTER SLOTS`` lists each master's replicas, in sync (clients learn the
    topology from it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        listed = True
        for node in (*cluster.masters, *cluster.replicas):
            with node.client() as client:
                entries = client.execute_command("CLUSTER", "SLOTS")
            listed = listed and all(len(entry) - 2 >= 1 + replicas for entry in entries)
        for node in cluster.replicas:
            with node.client() as client:
                listed = listed and client.info("replication").get("master_link_status") == "up"
        if listed:
            return
        time.sleep(0.1)
    raise RuntimeError("the replicas did not all come in sync")


def names_on_every_master(cluster: Cluster, prefix: str, *, per_master: int = 1) -> list[str]:
    """Names whose hash tag ``{name}`` lands on each master, ``per_master`` each, in the masters' order:
    found by computing the slot, never by chance."""
    found: dict[int, list[str]] = {position: [] for position in range(len(cluster.masters))}
    number = 0
    while any(len(names) < per_master for names in found.values()):
        name = f"{prefix}-{number}"
        number += 1
        slot = key_slot(f"{{{name}}}".encode())
        position = cluster.masters.index(cluster.master_of(slot))
        if len(found[position]) < per_master:
            found[position].append(name)
    return [name for position in sorted(found) for name in found[position]]
