"""The etcd v3 storage backend, over etcd's JSON gRPC gateway: HTTP/1.1 calls, WebSocket watches."""
from kapiserver.storage.etcd.backend import EtcdStorage
from kapiserver.storage.etcd.tls import EtcdTLS

__all__ = ["EtcdStorage", "EtcdTLS"]
