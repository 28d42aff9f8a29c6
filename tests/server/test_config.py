"""Configuration loading: defaults, validation messages, overrides, and how bad configs end twistd."""
from __future__ import annotations

import dataclasses
import os
import socket

import yaml
from twisted.trial import unittest

from kapiserver.server.config import ConfigError, load_config
from kapiserver.app.plugin import Options
from tests.server.process import run_to_exit, write_config


class LoadConfigTests(unittest.TestCase):
    def setUp(self) -> None:
        self.dir = self.mktemp()
        os.makedirs(self.dir)

    def write(self, text: str) -> str:
        path = os.path.join(self.dir, "apiserver.yaml")
        with open(path, "w") as f:
            f.write(text)
        return path

    def assertConfigError(self, text: str, message: str) -> None:
        path = self.write(text)
        with self.assertRaises(ConfigError) as cm:
            load_config(path)
        self.assertEqual(str(cm.exception), f"{path}: {message}")

    def test_defaults(self) -> None:
        config = load_config(None)
        self.assertEqual(config.secure_port, 6443)
        self.assertEqual(config.bind_address, "127.0.0.1")
        self.assertEqual(config.storage.backend, "sqlite")
        self.assertEqual(config.storage.etcd.prefix, "/registry")
        self.assertEqual(config.limits.max_request_body_bytes, 3145728)
        self.assertTrue(config.authentication.anonymous)
        self.assertEqual(config.authorization.modes, ["RBAC"])
        self.assertEqual((config.authorization.webhook.cache_authorized_ttl_seconds,
                          config.authorization.webhook.cache_unauthorized_ttl_seconds), (300.0, 30.0))
        self.assertEqual(config.cert_dir, os.path.abspath("var/certs"))

    def test_nested_values_and_relative_paths(self) -> None:
        path = self.write("secure_port: 7443\ncert_dir: certs\nstorage:\n  backend: etcd3\n  etcd:\n"
                          "    servers: [http://127.0.0.1:2379]\n    prefix: /kap\nshutdown:\n  drain_seconds: 2.5\n")
        config = load_config(path)
        self.assertEqual(config.secure_port, 7443)
        self.assertEqual(config.cert_dir, os.path.join(os.getcwd(), "certs"))
        self.assertEqual(config.storage.backend, "etcd3")
        self.assertEqual(config.storage.etcd.prefix, "/kap")
        self.assertEqual(config.shutdown.drain_seconds, 2.5)

    def test_empty_file_means_defaults(self) -> None:
        self.assertEqual(load_config(self.write("")).secure_port, 6443)

    def test_unknown_nested_key(self) -> None:
        self.assertConfigError("storage:\n  bakend: sqlite\n", "unknown key 'storage.bakend'")

    def test_unknown_top_level_key(self) -> None:
        self.assertConfigError("port: 1\n", "unknown key 'port'")

    def test_wrong_type(self) -> None:
        self.assertConfigError("secure_port: '6443'\n", "key 'secure_port': must be an integer, got '6443'")

    def test_bool_is_not_an_integer(self) -> None:
        self.assertConfigError("limits:\n  max_requests_inflight: true\n",
                               "key 'limits.max_requests_inflight': must be an integer, got True")

    def test_list_of_strings(self) -> None:
        self.assertConfigError("tls:\n  extra_sans: example.com\n",
                               "key 'tls.extra_sans': must be a list of strings, got 'example.com'")

    def test_section_must_be_mapping(self) -> None:
        self.assertConfigError("storage: sqlite\n", "storage must be a mapping, got 'sqlite'")

    def test_backend_choice(self) -> None:
        self.assertConfigError("storage:\n  backend: mysql\n",
                               "key 'storage.backend': must be one of sqlite, etcd3, got 'mysql'")

    def test_port_range(self) -> None:
        self.assertConfigError("secure_port: 70000\n", "key 'secure_port': must be between 0 and 65535, got 70000")

    def test_invalid_yaml(self) -> None:
        path = self.write("secure_port: [\n")
        with self.assertRaises(ConfigError) as cm:
            load_config(path)
        self.assertIn(f"{path}: invalid YAML at line", str(cm.exception))

    def test_missing_file(self) -> None:
        path = os.path.join(self.dir, "nope.yaml")
        with self.assertRaises(ConfigError) as cm:
            load_config(path)
        self.assertEqual(str(cm.exception), f"{path}: configuration file not found")

    def test_overrides_win(self) -> None:
        path = self.write("secure_port: 7443\n")
        config = load_config(path, {"secure_port": 0, "storage.etcd.servers": ["http://127.0.0.1:1"]})
        self.assertEqual(config.secure_port, 0)
        self.assertEqual(config.storage.etcd.servers, ["http://127.0.0.1:1"])

    def test_service_range_advertise_address_and_leader_election_defaults(self) -> None:
        config = load_config(None)
        self.assertEqual(config.service_cluster_ip_range, "10.0.0.0/24")  # kube-apiserver's default
        self.assertEqual(config.advertise_address, "")
        ctl = config.controllers
        self.assertEqual((ctl.leader_elect, ctl.leader_elect_lease_duration_seconds,
                          ctl.leader_elect_renew_deadline_seconds, ctl.leader_elect_retry_period_seconds,
                          ctl.leader_elect_resource_namespace, ctl.leader_elect_resource_name),
                         (True, 15, 10, 2, "kube-system", "kapiserver-controllers"))

    def test_connection_limits_and_shutdown_delay(self) -> None:
        config = load_config(None)
        c = config.connections
        # upstream's: Go's MaxHeaderBytes as kube-apiserver sets it, IdleTimeout, 100 HTTP/2 streams
        self.assertEqual((c.max_header_bytes, c.idle_timeout_seconds, c.http2_max_streams_per_connection),
                         (1 << 20, 90, 100))
        self.assertEqual(config.shutdown.delay_seconds, 0)  # --shutdown-delay-duration's default
        config = load_config(self.write("connections:\n  request_header_timeout_seconds: 2.5\n"
                                        "shutdown:\n  delay_seconds: 5\n"))
        self.assertEqual((config.connections.request_header_timeout_seconds, config.shutdown.delay_seconds), (2.5, 5))
        self.assertConfigError("connections:\n  max_connections: 0\n",
                               "key 'connections.max_connections': must be greater than 0, got 0")
        self.assertConfigError("connections:\n  max_connections: 10\n  max_connections_per_address: 20\n",
                               "key 'connections.max_connections_per_address': must not exceed "
                               "connections.max_connections (10)")
        self.assertConfigError("shutdown:\n  delay_seconds: -1\n", "key 'shutdown.delay_seconds': must not be negative")
        # upstream's --goaway-chance: off by default, at most 2 % of requests
        self.assertEqual(c.goaway_chance, 0)
        self.assertEqual(load_config(None, {"connections.goaway_chance": 0.02}).connections.goaway_chance, 0.02)
        self.assertConfigError("connections:\n  goaway_chance: 0.03\n", "key 'connections.goaway_chance': can not "
                               "be less than 0 or greater than 0.02, got 0.03")

    def test_heap_trim_interval(self) -> None:
        self.assertEqual(load_config(None).memory.heap_trim_interval_seconds, 60)
        self.assertEqual(load_config(self.write("memory:\n  heap_trim_interval_seconds: 0\n"))
                         .memory.heap_trim_interval_seconds, 0)
        self.assertConfigError("memory:\n  heap_trim_interval_seconds: -5\n",
                               "key 'memory.heap_trim_interval_seconds': must not be negative")

    def test_the_shipped_file_lists_every_key_with_its_default(self) -> None:
        path = os.path.join(os.path.dirname(__file__), "..", "..", "etc", "apiserver.yaml")
        shipped, defaults = load_config(path), load_config(None)
        shipped.source = defaults.source
        self.assertEqual(dataclasses.asdict(shipped), dataclasses.asdict(defaults))
        with open(path) as f:
            raw = yaml.safe_load(f)

        def missing(obj, data, prefix=""):
            for fld in dataclasses.fields(obj):
                if fld.metadata.get("internal"):
                    continue
                if fld.name not in data:
                    yield prefix + fld.name
                elif dataclasses.is_dataclass(getattr(obj, fld.name)):
                    yield from missing(getattr(obj, fld.name), data[fld.name], f"{prefix}{fld.name}.")
        self.assertEqual(list(missing(defaults, raw)), [])

    def test_reset_needs_the_sqlite_backend(self) -> None:
        self.assertConfigError("storage: {backend: etcd3}\ntesting: {enable_reset: true}\n",
                               "key 'testing.enable_reset': needs storage.backend sqlite (the etcd3 backend cannot "
                               "restore a snapshot)")
        self.assertFalse(load_config(None).testing.enable_reset)  # off unless asked for

    def test_service_range_limits(self) -> None:
        self.assertConfigError("service_cluster_ip_range: 10.0.0.0/8\n",
                               "key 'service_cluster_ip_range': 10.0.0.0/8 is too large; for 32-bit addresses, the "
                               "mask must be >= 12")
        self.assertConfigError("service_cluster_ip_range: fd00::/64\n",
                               "key 'service_cluster_ip_range': fd00::/64 is too large; for 128-bit addresses, the "
                               "mask must be >= 108")
        self.assertConfigError("service_cluster_ip_range: 10.0.0.0/31\n",
                               "key 'service_cluster_ip_range': 10.0.0.0/31 is too small to hold a Service "
                               "(at most /30)")
        self.assertEqual(load_config(self.write("service_cluster_ip_range: 10.96.0.0/12\n")).service_cluster_ip_range,
                         "10.96.0.0/12")

    def test_advertise_address_must_be_an_address(self) -> None:
        self.assertConfigError("advertise_address: apiserver.local\n",
                               "key 'advertise_address': must be an IP address, got 'apiserver.local'")
        self.assertConfigError("advertise_address: 0.0.0.0\n",
                               "key 'advertise_address': must be a reachable IP address, not 0.0.0.0")

    def test_leader_election_durations_are_ordered(self) -> None:
        self.assertConfigError("controllers:\n  leader_elect_renew_deadline_seconds: 20\n",
                               "keys 'controllers.leader_elect_*': the lease duration must be greater than the "
                               "renew deadline, and the renew deadline greater than 1.2 x the retry period (> 0)")

    def test_kube_apiserver_flags(self) -> None:
        options = Options()
        options.parseOptions(["--service-cluster-ip-range", "10.96.0.0/16", "--advertise-address", "192.0.2.10"])
        self.assertEqual(options.overrides(), {"service_cluster_ip_range": "10.96.0.0/16",
                                               "advertise_address": "192.0.2.10"})

    def test_override_is_validated(self) -> None:
        with self.assertRaises(ConfigError) as cm:
            load_config(None, {"storage.backend": "mysql"})
        self.assertIn("'storage.backend': must be one of", str(cm.exception))


    def test_authorization_modes_are_checked(self) -> None:
        self.assertConfigError("authorization:\n  modes: []\n",
                               "key 'authorization.modes': at least one authorization mode must be given")
        self.assertConfigError("authorization:\n  modes: [RBAC, Magic]\n",
                               "key 'authorization.modes': authorization-mode 'Magic' is not a valid mode (one of "
                               "AlwaysAllow, AlwaysDeny, Node, RBAC, Webhook)")
        self.assertConfigError("authorization:\n  modes: [ABAC, RBAC]\n",
                               "key 'authorization.modes': mode 'ABAC' is not supported by kapiserver (supported: "
                               "AlwaysAllow, AlwaysDeny, Node, RBAC, Webhook)")
        self.assertEqual(load_config(None, {"authorization.modes": ["Node", "RBAC"]}).authorization.modes,
                         ["Node", "RBAC"])
        self.assertConfigError("authorization:\n  modes: [RBAC, RBAC]\n",
                               "key 'authorization.modes': a mode is given more than once: ['RBAC', 'RBAC']")
        self.assertConfigError("authorization:\n  modes: [Webhook]\n",
                               "key 'authorization.webhook.config_file': required by authorization mode Webhook")
        self.assertConfigError("authorization:\n  webhook: {config_file: w.yaml}\n",
                               "key 'authorization.webhook.config_file': cannot be set without authorization mode "
                               "Webhook")
        config = load_config(self.write("authorization:\n  modes: [Webhook, RBAC]\n"
                                        "  webhook: {config_file: w.yaml, version: v1beta1}\n"))
        self.assertEqual(config.authorization.webhook.config_file, os.path.abspath("w.yaml"))

    def test_authorization_flags(self) -> None:
        from kapiserver.app.plugin import Options
        options = Options()
        options.parseOptions(["--authorization-mode", "Webhook,RBAC", "--authorization-webhook-config-file", "w.yaml",
                              "--authorization-webhook-cache-authorized-ttl", "1m30s",
                              "--authorization-webhook-cache-unauthorized-ttl", "0"])
        config = load_config(None, options.overrides())
        self.assertEqual(config.authorization.modes, ["Webhook", "RBAC"])
        self.assertEqual(config.authorization.webhook.cache_authorized_ttl_seconds, 90.0)
        self.assertEqual(config.authorization.webhook.cache_unauthorized_ttl_seconds, 0.0)


class AuthenticationConfigTests(unittest.TestCase):
    def test_defaults(self) -> None:
        authn = load_config(None).authentication
        self.assertEqual(authn.service_account.issuers, ["https://kubernetes.default.svc.cluster.local"])
        self.assertEqual((authn.client_ca_file, authn.token_auth_file, authn.api_audiences), ("", "", []))
        self.assertEqual(authn.requestheader.username_headers, ["X-Remote-User"])
        self.assertEqual(authn.requestheader.allowed_names, ["front-proxy-client"])
        self.assertEqual(authn.service_account.max_token_expiration_seconds, 0)

    def test_paths_are_made_absolute(self) -> None:
        config = load_config(None, {"authentication.token_auth_file": "tokens.csv",
                                    "authentication.service_account.key_files": ["a.pem", "/etc/b.pem"]})
        self.assertEqual(config.authentication.token_auth_file, os.path.abspath("tokens.csv"))
        self.assertEqual(config.authentication.service_account.key_files, [os.path.abspath("a.pem"), "/etc/b.pem"])

    def test_flags_use_kube_apiserver_names(self) -> None:
        from kapiserver.app.plugin import Options
        options = Options()
        options.parseOptions(["--token-auth-file", "t.csv", "--service-account-issuer", "https://a,https://b",
                              "--service-account-max-token-expiration", "48h", "--anonymous-auth=true",
                              "--requestheader-allowed-names", "aggregator,front-proxy-client",
                              "--enable-bootstrap-token-auth=true"])
        config = load_config(None, options.overrides())
        self.assertTrue(config.authentication.enable_bootstrap_token_auth)
        self.assertFalse(load_config(None).authentication.enable_bootstrap_token_auth)  # off unless asked, as upstream
        self.assertEqual(config.authentication.service_account.issuers, ["https://a", "https://b"])
        self.assertEqual(config.authentication.service_account.max_token_expiration_seconds, 48 * 3600)
        self.assertTrue(config.authentication.anonymous)
        self.assertEqual(config.authentication.requestheader.allowed_names, ["aggregator", "front-proxy-client"])

    def test_invalid_values(self) -> None:
        for overrides, message in [
            ({"authentication.service_account.issuers": []}, "at least one issuer is required"),
            ({"authentication.service_account.issuers": ["https://a", "https://a"]}, "'https://a' is listed twice"),
            ({"authentication.service_account.max_token_expiration_seconds": 60},
             "must be 0 (no limit) or between 3600 (1 hour) and 2^32 seconds, got 60"),
            ({"authentication.service_account.jwks_uri": "http://x/jwks"}, "must be an https URL"),
            ({"proxy_client_cert_file": "c.crt"}, "must be set together"),
        ]:
            with self.assertRaises(ConfigError, msg=str(overrides)) as cm:
                load_config(None, overrides)
            self.assertIn(message, str(cm.exception))


class BadConfigExitTests(unittest.TestCase):
    """Every startup problem ends twistd with a non-zero status and exactly one line on stderr."""

    def setUp(self) -> None:
        self.dir = os.path.abspath(self.mktemp())
        os.makedirs(self.dir)

    def assertFailsWith(self, config_path, expected: str, *extra: str) -> None:
        result = run_to_exit(self.dir, config_path, *extra)
        self.assertNotEqual(result.returncode, 0, result.stdout)
        lines = result.stderr.splitlines()
        self.assertEqual(len(lines), 1, result.stderr)
        self.assertIn(expected, lines[0])
        self.assertNotIn("Traceback", result.stderr)

    def test_unknown_key(self) -> None:
        path = write_config(self.dir, {"storage": {"bakend": "sqlite"}})
        self.assertFailsWith(path, f"{path}: unknown key 'storage.bakend'")

    def test_wrong_type(self) -> None:
        path = write_config(self.dir, {"secure_port": "high"})
        self.assertFailsWith(path, f"{path}: key 'secure_port': must be an integer, got 'high'")

    def test_missing_file(self) -> None:
        path = os.path.join(self.dir, "missing.yaml")
        self.assertFailsWith(path, f"{path}: configuration file not found")

    def test_missing_token_file(self) -> None:
        tokens = os.path.join(self.dir, "tokens.csv")
        path = write_config(self.dir, {"authentication": {"token_auth_file": tokens}})
        self.assertFailsWith(path, f"{tokens}: token file not found")

    def test_bad_flag_value(self) -> None:
        path = write_config(self.dir, {})
        self.assertFailsWith(path, "--secure-port: invalid value 'x'", "--secure-port", "x")

    def test_bad_duration_flag(self) -> None:
        path = write_config(self.dir, {})
        self.assertFailsWith(path, "--authorization-webhook-cache-authorized-ttl: invalid value '5 minutes'",
                             "--authorization-webhook-cache-authorized-ttl", "5 minutes")

    def test_unreadable_webhook_config(self) -> None:
        missing = os.path.join(self.dir, "nowhere.kubeconfig")
        path = write_config(self.dir, {"secure_port": 0, "cert_dir": os.path.join(self.dir, "certs"),
                                       "data_dir": os.path.join(self.dir, "data"),
                                       "admin_kubeconfig": os.path.join(self.dir, "admin.kubeconfig"),
                                       "authorization": {"modes": ["Webhook"], "webhook": {"config_file": missing}}})
        self.assertFailsWith(path, f"{missing}: cannot read webhook configuration: No such file or directory")

    def test_port_in_use(self) -> None:
        busy = socket.socket()
        self.addCleanup(busy.close)
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        path = write_config(self.dir, {"secure_port": port, "cert_dir": os.path.join(self.dir, "certs"),
                                       "data_dir": os.path.join(self.dir, "data"),
                                       "admin_kubeconfig": os.path.join(self.dir, "admin.kubeconfig")})
        self.assertFailsWith(path, f"cannot listen on 127.0.0.1:{port}: Address already in use")
        self.assertFalse(os.path.exists(os.path.join(self.dir, "admin.kubeconfig")))

    def test_unreadable_certificate(self) -> None:
        certs = os.path.join(self.dir, "certs")
        os.makedirs(certs)
        with open(os.path.join(certs, "ca.crt"), "w") as f:
            f.write("this is not a certificate\n")
        with open(os.path.join(certs, "ca.key"), "w") as f:
            f.write("nor is this a key\n")
        path = write_config(self.dir, {"secure_port": 0, "cert_dir": certs})
        self.assertFailsWith(path, f"{certs}/ca.crt: not a PEM certificate")

    def test_storage_unreachable(self) -> None:
        closed = socket.socket()
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        closed.close()  # nothing listens there now
        path = write_config(self.dir, {"secure_port": 0, "cert_dir": os.path.join(self.dir, "certs"),
                                       "storage": {"backend": "etcd3",
                                                   "etcd": {"servers": [f"http://127.0.0.1:{port}"]}}})
        self.assertFailsWith(path, f"storage unavailable: cannot open etcd at http://127.0.0.1:{port}")
