"""What a started server has not loaded yet: parts paid for on first use only.

Each of these costs idle memory and start time in every process (RE2 with its
C++ runtime about 2.4 MiB resident, the CEL function library 0.9 MiB, the
policy type checker 0.5 MiB, the connect subresources' streaming code 1.6 MiB,
treq and Twisted's HTTP client 0.9 MiB, the PATCH handler and its codecs,
prometheus_client's exposition 1.1 MiB) and is needed only once a client
patches or sends a schema pattern, a CEL rule or a ValidatingAdmissionPolicy,
connects to a pod, node, service or extension API server (logs, exec, attach,
port-forward, proxy), or scrapes ``/metrics``, or the server first calls out
(webhooks, OIDC issuers, extension servers), or a CronJob names a time zone,
or the first CRD is written or stored.  The admission plugins that are off by
default load only when enabled, and ``_strptime`` (whose first use builds
locale tables: 6 ms) only with a time to parse that a start does not have.  The server is started in a
fresh interpreter, as twistd would, so nothing another test imported counts.  A restart parses no
certificate or key with cryptography (whose parsers' code would stay resident: 1.1 MiB).
"""
from __future__ import annotations

import json
import subprocess
import sys

from twisted.trial import unittest

from kapiserver.testing.process import REPO_ROOT, child_env

LOADED_ON_FIRST_USE = (
    "re2",
    "kapiserver.cel.library",
    "kapiserver.machinery.cel_runtime",
    "kapiserver.admission.policy.typecheck",
    "kapiserver.endpoints.streaming.connector",
    "kapiserver.endpoints.streaming.splice",
    "kapiserver.endpoints.streaming.relay",
    "kapiserver.machinery.httpstream",
    "kapiserver.machinery.go_html",
    "treq",
    "twisted.web.client",
    "kapiserver.auth.oidc",
    "kapiserver.auth.authentication_configuration",
    "zoneinfo",
    # the custom resource machinery (schemas, CEL rules, a CRD's own validation): with the first CRD
    "kapiserver.apiextensions.custom_resource",
    "kapiserver.apiextensions.crd_validation",
    "kapiserver.apiextensions.cel.rules",
    "kapiserver.apiextensions.schema.structural",
    "kapiserver.apiextensions.schema.validation",
    "_strptime",  # a start's dates (managedFields times, the token tracking date) are read without it
    "importlib.resources",  # the built-in definitions' reader when installed as a zip
    # admission plugins that are off by default: imported when enabled
    "kapiserver.admission.always",
    "kapiserver.admission.always_pull_images",
    "kapiserver.admission.event_rate_limit",
    "kapiserver.admission.node_restriction",
    "kapiserver.admission.owner_references",
    # PATCH: its handler and the patch codecs, with the first one (a webhook's JSON patch too)
    "kapiserver.endpoints.handlers.patch",
    "kapiserver.machinery.jsonpatch",
    "kapiserver.machinery.mergepatch",
    "kapiserver.machinery.strategicpatch",
    "kapiserver.machinery.openapi_v2_protobuf",  # with the first /openapi/v2 request
    "kapiserver.admission.pod_security.checks",  # with the first pod (or pod template) PodSecurity checks
    "kapiserver.apis.admissionregistration.validation",  # with the first webhook configuration or policy written
    # the pod spec's and volumes' validation and defaulting: with the first pod, pod template, workload or volume
    # written (the start's Service and Endpoints take their port checks from apis/core/ports.py)
    "kapiserver.apis.core.podspec",
    "kapiserver.apis.core.volumes",
    # YAML bodies and answers: with the first (PyYAML itself is loaded by every start: the configuration file and
    # the admin kubeconfig are YAML; a worker process, handed its configuration as JSON, does not load it)
    "kapiserver.machinery.yamljson",
    "kapiserver.machinery.yaml_encoding",
    "fractions",  # a quantity's exact value (machinery/quantity.py): with the first one compared or computed with
    "kapiserver.auth.tokenfile",  # only with a static token file (and csv with it)
    "csv",
    # the Prometheus text exposition (and the HTTP servers it imports): with the first /metrics scrape
    "prometheus_client",
    "http.server",
    "wsgiref",
)

# The server as twistd's plugin builds it (build_service), started until READY=1: the test
# harness's own client (kapiserver.testing) would load treq and count it against the server.
# With --restart it is started twice on one directory, and the second start reports the
# calls of cryptography's certificate and key parsers it made.
_SCRIPT = """
import json, os, shutil, sys, tempfile
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from twisted.internet import defer, task
from kapiserver.app.plugin import build_service
from kapiserver.server.config import config_from_dict

async def start(reactor, workdir):
    config = config_from_dict({
        "secure_port": 0, "bind_address": "127.0.0.1", "workers": 1, "advertise_address": "192.0.2.10",
        "cert_dir": os.path.join(workdir, "certs"), "data_dir": os.path.join(workdir, "data"),
        "admin_kubeconfig": os.path.join(workdir, "admin.kubeconfig"),
        "authorization": {"modes": ["Node", "RBAC"]}})
    top = build_service(config, reactor, install_signal_handlers=False, exit_on_failure=False)
    top.startService()
    [server] = list(top)
    await server.ready
    return top

def recording(name, parse, calls):
    def recorded(*args, **kwargs):
        calls.append(name)
        return parse(*args, **kwargs)
    return recorded

async def main(reactor):
    workdir = tempfile.mkdtemp(prefix="kapiserver-footprint-")
    parsed = []
    if sys.argv[1] == "--restart":
        await (await start(reactor, workdir)).stopService()
        for module, name in ((x509, "load_pem_x509_certificate"), (x509, "load_pem_x509_certificates"),
                             (x509, "load_der_x509_certificate"), (serialization, "load_pem_private_key"),
                             (serialization, "load_der_private_key"), (serialization, "load_pem_public_key")):
            setattr(module, name, recording(name, getattr(module, name), parsed))
    top = await start(reactor, workdir)
    loaded = [name for name in sys.argv[2:] if name in sys.modules]
    await top.stopService()
    shutil.rmtree(workdir)
    print(json.dumps({"loaded": loaded, "parsed": parsed}))

task.react(lambda reactor: defer.Deferred.fromCoroutine(main(reactor)))
"""


def _start(*args: str) -> dict:
    done = subprocess.run([sys.executable, "-c", _SCRIPT, *args], cwd=REPO_ROOT,
                          env=child_env(), capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise AssertionError(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


class StartFootprintTests(unittest.TestCase):
    def test_a_started_server_has_not_loaded_what_only_some_requests_need(self) -> None:
        self.assertEqual(_start("--first", *LOADED_ON_FIRST_USE)["loaded"], [])

    def test_a_restart_parses_no_certificate_or_key_with_cryptography(self) -> None:
        """A restart finds its certificates and service-account key checked before
        (cert_dir/.checked.json; the key is parsed when a token is first signed or verified) and
        reads the CA bundles with OpenSSL: cryptography's x509 and key parsers would keep 1.1 MiB
        more of its code resident in every process (bench/README.md)."""
        self.assertEqual(_start("--restart")["parsed"], [])
